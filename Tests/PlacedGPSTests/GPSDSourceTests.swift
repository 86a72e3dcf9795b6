import PlacedCore
import PlacedSystem
import Testing

@testable import PlacedGPS

#if canImport(Glibc)
    import Glibc
#endif

/// A stand-in gpsd on a loopback port: it accepts one client at a time and sends the lines it is
/// given. The real gpsd is exercised by the integration tests; this pins down the adapter alone.
private final class FakeGPSD {
    let listener: Int32
    let port: UInt16
    private(set) var client: Int32 = -1

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        listen(listener, 4)
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.port = UInt16(bigEndian: bound.sin_port)
    }

    deinit {
        if client >= 0 { close(client) }
        close(listener)
    }

    /// Waits (driving `loop`) until the source has connected, then takes the connection.
    func accept(driving loop: EventLoop) throws {
        var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        for _ in 0..<200 where poll(&ready, 1, 0) == 0 { try loop.runOnce(timeout: 10_000) }
        client = Glibc.accept(listener, nil, nil)
    }

    func send(_ lines: [String]) {
        for line in lines { writeAll(client, line + "\n") }
    }

    func hangUp() {
        close(client)
        client = -1
    }
}

/// Gates what the source delivers, as the daemon does, and records it.
private final class RecordingSink: LocationSink {
    var gate = FixGate()
    var fixes: [Fix] = []
    var states: [SourceState] = []
    var reasons: [String] = []

    func receive(_ report: TPVReport, at receivedAt: UInt64) {
        if let fix = gate.admit(report, receivedAt: receivedAt) { fixes.append(fix) }
    }

    func locationSource(_ source: LocationSource, changedTo state: SourceState, reason: String) {
        gate.sourceChanged(to: state)
        states.append(state)
        reasons.append(reason)
    }
}

private func tpv(_ time: String, mode: Int = 3, lat: Double = 60.1699, lon: Double = 24.9384) -> String {
    #"{"class":"TPV","device":"/dev/pts/1","mode":\#(mode),"time":"\#(time)","ept":0.005,"lat":\#(lat),"lon":\#(lon),"eph":12.24,"speed":1.5}"#
}

@Suite(.serialized) struct GPSDSourceTests {
    @Test func gatesFixesAndReconnectsWithBackoffWhenGPSDHangsUp() throws {
        let gpsd = try FakeGPSD()
        let loop = try EventLoop()
        let source = GPSDSource(
            loop: loop,
            configuration: .init(
                host: "127.0.0.1", port: String(gpsd.port), silenceTimeout: 5_000_000,
                backoff: Backoff(initial: 20_000, maximum: 40_000)))
        let sink = RecordingSink()
        source.start(delivering: sink)
        var fixes: [Fix] { sink.fixes }
        var states: [SourceState] { sink.states }
        try gpsd.accept(driving: loop)
        gpsd.send([
            #"{"class":"VERSION","release":"3.22","rev":"3.22","proto_major":3,"proto_minor":14}"#,
            tpv("2026-11-29T09:00:00.000Z", mode: 1, lat: .nan),
            tpv("2026-11-29T09:00:01.000Z"),
            tpv("2026-11-29T09:00:01.000Z", lat: 60.2),  // the same epoch again: not a new fix
            #"{"class":"SKY","device":"/dev/pts/1","satellites":[]}"#,
            tpv("2026-11-29T09:00:02.000Z", mode: 2, lat: 60.17),
        ])
        for _ in 0..<200 where fixes.count < 2 { try loop.runOnce(timeout: 10_000) }
        #expect(fixes.map(\.coordinate.latitude) == [60.1699, 60.17])
        #expect(fixes.map(\.mode) == [.threeD, .twoD])
        #expect(abs((fixes.first?.accuracy ?? 0) - 5) < 1e-9)
        #expect(fixes.first?.speed == 1.5 && fixes.first?.altitude == nil)
        #expect(states == [.noFix, .fix])

        gpsd.hangUp()
        for _ in 0..<200 where !states.contains(.stale) { try loop.runOnce(timeout: 10_000) }
        #expect(states.last == .stale, "a lost gpsd after fixes makes the data stale")
        try gpsd.accept(driving: loop)  // the source came back on its own, after the backoff
        gpsd.send([tpv("2026-11-29T09:00:03.000Z", lat: 60.171)])
        for _ in 0..<200 where fixes.count < 3 { try loop.runOnce(timeout: 10_000) }
        #expect(fixes.last?.coordinate.latitude == 60.171)
        #expect(states.suffix(2) == [.noFix, .fix])
        source.stop()
    }

    @Test func silenceIsDetectedWithoutAnyTrafficTimer() throws {
        let gpsd = try FakeGPSD()
        let loop = try EventLoop()
        let source = GPSDSource(
            loop: loop,
            configuration: .init(
                host: "127.0.0.1", port: String(gpsd.port), silenceTimeout: 100_000,
                backoff: Backoff(initial: 1_000_000, maximum: 1_000_000)))
        let sink = RecordingSink()
        source.start(delivering: sink)
        var reasons: [String] { sink.reasons }
        try gpsd.accept(driving: loop)
        let start = loop.now
        for _ in 0..<100 where !reasons.contains(where: { $0.hasPrefix("no data from gpsd") }) {
            try loop.runOnce(timeout: 20_000)
        }
        // How long it was quiet is at least the timeout; by how much more depends on the machine's load.
        let silence = reasons.first { $0.hasPrefix("no data from gpsd for ") }
        let seconds = silence.flatMap { Double($0.dropFirst("no data from gpsd for ".count).prefix { $0 != " " }) }
        #expect(silence?.hasSuffix(" s; retrying in 1.00 s") == true, "\(reasons)")
        #expect((seconds ?? 0) >= 0.1, "\(reasons)")
        #expect(loop.now - start >= 100_000)
        source.stop()
    }
}
