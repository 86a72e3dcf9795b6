// placed-bench fleet: the fleet export against a mosquitto it starts on loopback. Markers per second
// through the outbox (each its own durable transaction) to PUBACK, beside mosquitto_pub sending as many
// QoS 1 messages of the same size from memory; the drain rate of a 100,000-event backlog; and the
// wake-ups of a connected, idle exporter (strace, keepalive only).
import Foundation
import PlacedCore
import PlacedFleet
import PlacedStore
import PlacedSystem

/// `placed-bench fleet [--markers N] [--backlog N] [--idle SECONDS] [--keepalive SECONDS]`
func fleetBenchmark(_ arguments: [String]) throws {
    if arguments.first == "--idle-child" { return try idleChild(Array(arguments.dropFirst())) }
    var markers = 5_000
    var backlog = 100_000
    var idleSeconds = 30
    var keepAlive = 10
    var rest = arguments[...]
    while let flag = rest.popFirst() {
        guard let value = rest.popFirst().flatMap(Int.init) else {
            throw BenchmarkUsage(
                "placed-bench fleet [--markers N] [--backlog N] [--idle SECONDS] [--keepalive SECONDS]")
        }
        switch flag {
        case "--markers": markers = value
        case "--backlog": backlog = value
        case "--idle": idleSeconds = value
        case "--keepalive": keepAlive = value
        default: throw BenchmarkUsage("placed-bench fleet: unknown option \(flag)")
        }
    }
    let broker = try BenchBroker()
    defer { broker.stop() }
    print("fleet: mosquitto \(broker.version) on 127.0.0.1:\(broker.port), libmosquitto, QoS 1, release build\n")

    // 1. Markers through the outbox: recorded one by one, each in its selection transaction
    // (synchronous=FULL), sent as they come, until the last PUBACK.
    var reference = 0.0
    do {
        // Rounds in turn, with export and without, so both meet the same disk (it is shared, and fsync
        // times drift).
        let plain = try FleetRun(broker: nil, device: "bench-plain")
        let through = try FleetRun(broker: broker, device: "bench-markers")
        try through.select()
        let payloadSize = through.firstPayloadSize
        var withoutFleet = 0.0
        var recorded = 0.0
        var total = 0.0
        let rounds = 5
        for _ in 0..<rounds {
            withoutFleet += try BenchClock.seconds {
                for _ in 0..<markers / rounds { try plain.select(exported: false) }
            }
            let start = BenchClock.now()
            for _ in 0..<markers / rounds {
                try through.select()
                _ = try? through.loop.runOnce(timeout: 0)
            }
            recorded += BenchClock.seconds(since: start)
            try through.waitDrained(seconds: 120)
            total += BenchClock.seconds(since: start)
        }
        reference = try broker.mosquittoPubRate(messages: markers * 2, size: payloadSize)
        let rate = Double(markers) / total
        print("markers through the outbox to PUBACK  \(Int(rate)) markers/s (\(markers) markers, each with its state)")
        print("  recorded (selection + outbox rows)  \(Int(Double(markers) / recorded)) markers/s")
        print("  selection log alone, no export      \(Int(Double(markers) / withoutFleet)) markers/s (one fsync each)")
        print("  mosquitto_pub -q 1 from memory      \(Int(reference)) messages/s (\(payloadSize)-byte payloads)")
        print(
            "  ratio                               \((rate * 2 / reference).formatted(decimals: 3))x "
                + "(messages/s of placed / mosquitto_pub)")
    }

    // 2. A backlog made while no broker was there, drained once one is.
    do {
        let drain = try FleetRun(broker: nil, device: "bench-drain", backlog: backlog + 10)
        let fill = try BenchClock.seconds { try drain.fill(events: backlog) }
        print("\nbacklog of \(backlog) events written in \(fill.formatted(decimals: 2)) s")
        let start = BenchClock.now()
        try drain.connect(to: broker)
        try drain.waitDrained(seconds: 600)
        let seconds = BenchClock.seconds(since: start)
        let rate = Double(backlog) / seconds
        print("drain of a \(backlog)-event backlog     \(Int(rate)) events/s (\(seconds.formatted(decimals: 2)) s)")
        print("  ratio to mosquitto_pub -q 1         \((rate / reference).formatted(decimals: 2))x")
    }

    // 3. Idle and connected: a child process, counted by strace.
    do {
        let wakeups = try countIdleWakeups(broker: broker, seconds: idleSeconds, keepAlive: keepAlive)
        let intervals = Double(idleSeconds) / Double(keepAlive)
        print(
            "\nidle, connected, keepalive \(keepAlive) s, \(idleSeconds) s under strace (\(wakeups.syscalls) syscalls):"
        )
        print(wakeups.table)
        print(
            "idle wake-ups                        \(wakeups.wakeups) in \(idleSeconds) s, "
                + "\((Double(wakeups.wakeups) / intervals).formatted(decimals: 1)) per keepalive interval "
                + "(the ping timer, the broker's reply)")
    }
}

/// An exporter on its own event loop and selection log, for one measurement.
private final class FleetRun {
    let loop: EventLoop
    let selections: SelectionLog
    var exporter: FleetExporter
    let directory: String
    let settings: FleetSettings
    private var made = 0

    init(broker: BenchBroker?, device: String, backlog: Int = 100_000) throws {
        var template = Array("/tmp/placed-bench-fleet-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        var settings = FleetSettings()
        // Without a broker: a closed port, so the backlog builds.
        try settings.set("Broker", to: broker.map { "mqtt://127.0.0.1:\($0.port)" } ?? "mqtt://127.0.0.1:1")
        try settings.set("DeviceId", to: device)
        try settings.set("Backlog", to: String(backlog))
        self.settings = settings
        loop = try EventLoop()
        selections = try SelectionLog(path: directory + "/selections.db")
        exporter = try FleetExporter(loop: loop, settings: settings, selections: selections)
        if broker != nil {
            exporter.start()
            try pump(seconds: 10) { exporter.status.state == .connected }
        }
    }

    deinit {
        exporter.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Records the next marker: through the exporter (selection and outbox rows in one transaction), or
    /// with `exported` false into the selection log alone, as placed does without fleet export.
    func select(exported: Bool = true) throws {
        made += 1
        let place = Place(
            id: "osm:node/\(made)", name: "Place \(made)", kind: "amenity=cafe", address: "Aleksanterinkatu \(made)",
            coordinate: Coordinate(latitude: 60.1695, longitude: 24.9525))
        let fix = Fix(
            time: SystemClock.now(), coordinate: Coordinate(latitude: 60.1695, longitude: 24.9525), mode: .threeD,
            accuracy: 4, speed: 1.2, heading: 90)
        let marker = Marker(
            place: RankedPlace(place: place, distance: 5, likelihood: 0.5), location: fix, time: SystemClock.now(),
            generation: UInt64(made))
        guard exported else {
            _ = try selections.append(marker)
            return
        }
        _ = try exporter.append(marker, to: selections) { recorded in
            // The shape of the daemon's varlink marker record.
            [
                "place": [
                    "id": .string(place.id), "name": .string(place.name), "kind": .string(place.kind),
                    "address": .string(place.address ?? ""), "latitude": 60.1695, "longitude": 24.9525,
                    "distance": 5, "likelihood": 0.5, "attribution": .string(Place.attribution),
                ],
                "location": ["latitude": 60.1695, "longitude": 24.9525, "accuracy": 9.8, "mode": "3d"],
                "time": .string(ISO8601.utc(recorded.time, milliseconds: true)),
                "generation": .number(Double(recorded.generation)), "selection": .number(Double(recorded.selection)),
            ]
        }
    }

    /// The size of the first marker's payload, while it is still in the outbox.
    var firstPayloadSize: Int {
        (try? exporter.outbox.pending(after: 0, limit: 1).first?.message.payload.count) ?? nil ?? 0
    }

    /// `events` location updates written while no broker is there (as a device out of reach for hours).
    func fill(events: Int) throws {
        var left = events
        while left > 0 {
            let batch = min(left, 1000)
            for _ in 0..<batch {
                exporter.moved(
                    to: Fix(coordinate: Coordinate(latitude: 60.1695, longitude: 24.9525), accuracy: 4),
                    location: ["latitude": 60.1695, "longitude": 24.9525, "accuracy": 9.8], top: nil)
            }
            _ = try? loop.runOnce(timeout: 0)
            left -= batch
        }
        try pump(seconds: 10) { exporter.status.backlog >= events }
    }

    /// Starts the exporter on the same outbox, now with the broker.
    func connect(to broker: BenchBroker) throws {
        var settings = self.settings
        try settings.set("Broker", to: "")
        try settings.set("Broker", to: "mqtt://127.0.0.1:\(broker.port)")
        exporter = try FleetExporter(loop: loop, settings: settings, selections: selections)
        exporter.start()
    }

    func waitDrained(seconds: Double) throws {
        try pump(seconds: seconds) { exporter.status.backlog == 0 && exporter.status.inFlight == 0 }
    }

    func pump(seconds: Double, until condition: () -> Bool) throws {
        let start = BenchClock.now()
        while !condition() {
            guard BenchClock.seconds(since: start) < seconds else {
                throw BenchmarkFailure("fleet: timed out: \(exporter.status.summary)")
            }
            _ = try? loop.runOnce(timeout: 10_000)
        }
    }
}

/// mosquitto on a free loopback port, in a directory of its own.
private final class BenchBroker {
    let port: Int
    let directory: String
    private let process = Process()

    init() throws {
        var template = Array("/tmp/placed-bench-mosquitto-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        port = Int.random(in: 20_000..<60_000)
        var config = ["listener \(port) 127.0.0.1", "allow_anonymous true", "max_queued_messages 0"]
        if getuid() == 0 { config.append("user root") }
        try config.joined(separator: "\n").appending("\n").write(
            toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/mosquitto")
        process.arguments = ["-c", directory + "/mosquitto.conf"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw BenchmarkFailure("fleet: cannot start mosquitto (apt-get install mosquitto): \(error)")
        }
        let start = BenchClock.now()
        while !Self.listening(port) {
            guard process.isRunning, BenchClock.seconds(since: start) < 10 else {
                throw BenchmarkFailure("fleet: mosquitto did not listen on \(port)")
            }
            usleep(10_000)
        }
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var version: String {
        (try? run("/usr/sbin/mosquitto", ["-h"]).split(separator: "\n").first.map(String.init)?
            .split(separator: " ").last.map(String.init)) ?? nil ?? "?"
    }

    /// QoS 1 messages/s of mosquitto_pub sending `messages` lines of `size` bytes on one connection.
    func mosquittoPubRate(messages: Int, size: Int) throws -> Double {
        let line = String(repeating: "x", count: max(1, size)) + "\n"
        let input = directory + "/lines"
        try String(repeating: line, count: messages).write(toFile: input, atomically: true, encoding: .utf8)
        let seconds = try BenchClock.seconds {
            _ = try run(
                "/bin/sh", ["-c", "mosquitto_pub -h 127.0.0.1 -p \(port) -q 1 -t bench/ref -l < \(input)"])
        }
        return Double(messages) / seconds
    }

    private func run(_ path: String, _ arguments: [String]) throws -> String {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: path)
        child.arguments = arguments
        let output = Pipe()
        child.standardOutput = output
        child.standardError = output
        try child.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        child.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    static func listening(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// Runs `placed-bench fleet --idle-child PORT KEEPALIVE` (connects, then idles) and counts its system
/// calls for `seconds` with strace once it is connected.
private func countIdleWakeups(broker: BenchBroker, seconds: Int, keepAlive: Int) throws -> (
    wakeups: Int, syscalls: Int, table: String
) {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    child.arguments = ["fleet", "--idle-child", String(broker.port), String(keepAlive)]
    let ready = Pipe()
    child.standardOutput = ready
    try child.run()
    defer {
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
    }
    // The child prints one line once connected.
    _ = ready.fileHandleForReading.availableData
    let strace = Process()
    strace.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
    strace.arguments = ["-c", "-f", "-p", String(child.processIdentifier)]
    let report = Pipe()
    strace.standardError = report
    strace.standardOutput = FileHandle.nullDevice
    do {
        try strace.run()
    } catch {
        throw BenchmarkFailure("fleet: cannot run strace (apt-get install strace): \(error)")
    }
    sleep(UInt32(seconds))
    kill(strace.processIdentifier, SIGINT)
    let text = String(decoding: report.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    strace.waitUntilExit()
    var wakeups = 0
    var total = 0
    var table: [String] = []
    for line in text.split(separator: "\n") {
        if line.contains("%") || line.contains("---") || line.contains("total") || line.first == " " {
            table.append("  " + line)
        }
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 5, let calls = Int(fields[3]) else { continue }
        if fields.last == "total" {
            total = calls
        } else if fields.last == "epoll_wait" {
            wakeups = calls
        }
    }
    guard total > 0 || text.contains("total") else { throw BenchmarkFailure("fleet: no strace summary: \(text)") }
    return (wakeups, total, table.joined(separator: "\n"))
}

/// The idle child: connected, nothing to send.
private func idleChild(_ arguments: [String]) throws {
    guard arguments.count == 2, let port = Int(arguments[0]), let keepAlive = Int(arguments[1]) else {
        throw BenchmarkUsage("placed-bench fleet --idle-child PORT KEEPALIVE")
    }
    var template = Array("/tmp/placed-bench-idle-XXXXXX".utf8CString)
    let directory = String(cString: mkdtemp(&template)!)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var settings = FleetSettings()
    try settings.set("Broker", to: "mqtt://127.0.0.1:\(port)")
    try settings.set("DeviceId", to: "bench-idle")
    try settings.set("KeepAlive", to: String(keepAlive))
    let loop = try EventLoop()
    let exporter = try FleetExporter(
        loop: loop, settings: settings, selections: try SelectionLog(path: directory + "/selections.db"))
    exporter.start()
    while exporter.status.state != .connected { _ = try? loop.runOnce(timeout: 100_000) }
    // Let the connection settle (the online message acknowledged), then say so and idle.
    for _ in 0..<20 { _ = try? loop.runOnce(timeout: 10_000) }
    writeAll(1, "connected\n")
    try loop.run()
}
