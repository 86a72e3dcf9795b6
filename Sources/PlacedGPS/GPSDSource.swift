import CGPS
import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Position reports from gpsd over libgps, read when gpsd's socket is readable from the daemon's
/// event loop. Survives gpsd going away (read error, EOF) or going silent: it reconnects with capped
/// exponential backoff and reports its state, and never spins.
public final class GPSDSource: LocationSource {
    public struct Configuration: Sendable, Equatable {
        public var host: String
        public var port: String
        /// No data at all for this long (microseconds) means gpsd is gone: reconnect.
        public var silenceTimeout: UInt64
        public var backoff: Backoff

        public init(
            host: String = "localhost", port: String = "2947", silenceTimeout: UInt64 = 30_000_000,
            backoff: Backoff = Backoff()
        ) {
            self.host = host
            self.port = port
            self.silenceTimeout = silenceTimeout
            self.backoff = backoff
        }
    }

    public let name = "gpsd"
    public private(set) var state: SourceState = .connecting
    private weak var sink: LocationSink?

    private let loop: EventLoop
    private let configuration: Configuration
    private var backoff: Backoff
    private var data = gps_data_t()
    /// Opened at the first connection (`GPSLibrary`).
    private var library: GPSLibrary?
    private var connected = false
    private var reader: EventSource?
    private var retryTimer: EventSource?
    private var silenceTimer: EventSource?
    private var lastDataAt: UInt64 = 0
    /// gps_read copies each raw JSON message here, so TPVs are recognised by their class, not by
    /// guessing from the `set` mask.
    private var message = [CChar](repeating: 0, count: 8192)

    public init(loop: EventLoop, configuration: Configuration) {
        self.loop = loop
        self.configuration = configuration
        backoff = configuration.backoff
    }

    deinit { disconnect() }

    public func start(delivering sink: LocationSink) {
        self.sink = sink
        connect()
    }

    public func stop() {
        disconnect()
        retryTimer = nil
    }

    // MARK: Connection

    private func connect() {
        retryTimer = nil
        let library: GPSLibrary
        do {
            library = try GPSLibrary.shared()
        } catch {
            scheduleReconnect(reason: "\(error)")
            return
        }
        self.library = library
        guard library.open(configuration.host, configuration.port, &data) == 0 else {
            // errno is a socket's or one of libgps's own (negative) codes: gps_errstr knows both.
            let error = SystemError("gps_open")
            let reason = library.errorString(error.errno).map { String(cString: $0) } ?? "error \(error.errno)"
            scheduleReconnect(reason: "cannot connect to gpsd at \(endpoint): \(reason)")
            return
        }
        connected = true
        do {
            try UnixSocket.setNonBlocking(data.gps_fd)
        } catch {
            scheduleReconnect(reason: "cannot make the gpsd socket non-blocking: \(error)")
            return
        }
        guard library.stream(&data, UInt32(WATCH_ENABLE | WATCH_JSON), nil) == 0 else {
            scheduleReconnect(reason: "gpsd at \(endpoint) refused WATCH")
            return
        }
        do {
            reader = try loop.onIO(fd: data.gps_fd) { [unowned self] _ in readAvailable() }
            lastDataAt = loop.now
            silenceTimer = try loop.after(configuration.silenceTimeout) { [unowned self] in checkSilence()
            }
        } catch {
            scheduleReconnect(reason: "cannot watch gpsd socket: \(error)")
            return
        }
        setState(.noFix, "connected to gpsd at \(endpoint)")
    }

    private func disconnect() {
        reader = nil
        silenceTimer = nil
        if connected, let library { _ = library.close(&data) }
        connected = false
    }

    private func scheduleReconnect(reason: String) {
        disconnect()
        let delay = backoff.next()
        setState(
            state == .fix || state == .stale ? .stale : .connecting,
            "\(reason); retrying in \((Double(delay) / 1e6).formatted(decimals: 2)) s")
        retryTimer = try? loop.after(delay) { [unowned self] in connect() }
    }

    private var endpoint: String { "\(configuration.host):\(configuration.port)" }

    // MARK: Reading

    /// Drains every complete message libgps can give without blocking: after one readiness event it
    /// may hold several lines in its buffer, which epoll will not report again. The socket is
    /// non-blocking, so libgps answers 0 once neither its buffer nor the socket has a whole line.
    /// (gps_waiting() would do, but it uses select(), which breaks for descriptors above 1023 —
    /// and a daemon serving a thousand clients has those.)
    private func readAvailable() {
        while connected {
            guard let library else { return }
            let status = library.read(&data, &message, Int32(message.count))
            if status < 0 {
                scheduleReconnect(reason: status == -1 ? "gpsd closed the connection" : "read error from gpsd")
                return
            }
            if status == 0 { return }
            lastDataAt = loop.now
            handleMessage()
        }
    }

    private func handleMessage() {
        guard isTPV else { return }
        let fix = data.fix
        let time =
            fix.time.tv_sec == 0 && fix.time.tv_nsec == 0
            ? nil : Double(fix.time.tv_sec) + Double(fix.time.tv_nsec) / 1e9
        let report = TPVReport(
            time: time, mode: Int(fix.mode), latitude: fix.latitude, longitude: fix.longitude,
            eph: fix.eph, altitude: fix.altHAE, speed: fix.speed, track: fix.track)
        if FixGate.isUsable(report) {
            backoff.reset()
            if state != .fix { setState(.fix, "fix") }
        } else if report.mode == 1, state == .fix {
            setState(.noFix, "gpsd reports no fix")
        }
        sink?.receive(report, at: loop.now)
    }

    private static let tpvPrefix = Array(#"{"class":"TPV""#.utf8).map { CChar(bitPattern: $0) }

    /// Compared in place: no string is made for the many messages that are not TPVs.
    private var isTPV: Bool {
        message.starts(with: Self.tpvPrefix)
    }

    /// One timer for silence, re-armed for the remainder instead of on every message: no timer
    /// syscalls on the fix path.
    private func checkSilence() {
        let quietFor = loop.now &- lastDataAt
        if quietFor >= configuration.silenceTimeout {
            scheduleReconnect(reason: "no data from gpsd for \((Double(quietFor) / 1e6).formatted(decimals: 1)) s")
        } else {
            try? silenceTimer?.schedule(after: configuration.silenceTimeout - quietFor)
        }
    }

    private func setState(_ new: SourceState, _ reason: String) {
        state = new
        sink?.locationSource(self, changedTo: new, reason: reason)
    }
}
