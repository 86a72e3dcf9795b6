import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// syslog priorities, as journald stores them.
public enum LogPriority: Int32, Sendable, CaseIterable {
    case error = 3
    case warning = 4
    case notice = 5
    case info = 6
    case debug = 7

    /// The name systemd's `LogLevel=` and `journalctl -p` use.
    public var name: String {
        switch self {
        case .error: "err"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }

    /// From a name as `LogLevel=` takes it (`err`, `warning`, `notice`, `info`, `debug`).
    public init?(name: String) {
        guard let found = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = found
    }
}

/// Logging to journald when stderr is connected to it (a systemd service), readable lines on a
/// terminal or pipe otherwise.
public enum Log {
    /// Whether messages go to journald with priorities and structured fields.
    public static let toJournal: Bool = {
        // systemd sets JOURNAL_STREAM=dev:inode of the stream it connected stderr to.
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        var status = stat()
        guard fstat(2, &status) == 0 else { return false }
        return value == "\(status.st_dev):\(status.st_ino)"
    }()

    // Set once at start-up, before the event loop runs; the daemon is single-threaded.
    nonisolated(unsafe) public static var minimumPriority: LogPriority = .info
    nonisolated(unsafe) public static var identifier = "placed"

    /// With PLACED_LOG_TIMESTAMPS set, terminal lines start with the wall-clock time in seconds and
    /// microseconds, as `gpspipe -uu` prints them, so latencies can be compared across programs.
    public static let timestamps = getenv("PLACED_LOG_TIMESTAMPS") != nil

    /// Whether messages of `priority` are written: check before building an expensive message.
    public static func isEnabled(_ priority: LogPriority) -> Bool { priority.rawValue <= minimumPriority.rawValue }

    public static func error(_ message: String) { log(.error, message) }
    public static func warning(_ message: String) { log(.warning, message) }
    public static func notice(_ message: String) { log(.notice, message) }
    public static func info(_ message: String) { log(.info, message) }
    public static func debug(_ message: String) { log(.debug, message) }

    /// One entry; `fields` are extra journal fields (`PLACE_ID`, `MESSAGE_ID`...), ignored on a terminal.
    public static func log(
        _ priority: LogPriority, _ message: String, fields: [(String, String)] = []
    ) {
        guard isEnabled(priority) else { return }
        if toJournal {
            send(
                ["MESSAGE=\(message)", "PRIORITY=\(priority.rawValue)", "SYSLOG_IDENTIFIER=\(identifier)"]
                    + fields.map { "\($0.0)=\($0.1)" })
        } else {
            let prefix =
                switch priority {
                case .error: "error: "
                case .warning: "warning: "
                default: ""
                }
            let line = "\(timestamps ? realtimeStamp() + " " : "")\(identifier): \(prefix)\(message)\n"
            writeAll(2, line)
        }
    }

    /// Sends a journal entry through sd_journal_sendv (sd_journal_send is variadic).
    @discardableResult
    public static func send(_ fields: [String]) -> Int32 {
        var storage = fields.map { Array($0.utf8) }
        var vectors: [iovec] = []
        vectors.reserveCapacity(storage.count)
        return storage.withUnsafeMutableBufferPointer { buffers in
            for index in buffers.indices {
                buffers[index].withUnsafeMutableBytes { bytes in
                    vectors.append(iovec(iov_base: bytes.baseAddress, iov_len: bytes.count))
                }
            }
            // The pointers stay valid: `storage` is neither mutated nor reallocated until we return.
            return sd_journal_sendv(vectors, Int32(vectors.count))
        }
    }
}

private func realtimeStamp() -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    var micros = String(now.tv_nsec / 1000)
    while micros.count < 6 { micros = "0" + micros }
    return "\(now.tv_sec).\(micros)"
}

/// Writes the whole string to a file descriptor, unbuffered: a log line is never lost in a stdio
/// buffer when the process is killed.
public func writeAll(_ fd: Int32, _ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = try? retryingOnInterrupt("write") { write(fd, bytes.baseAddress! + offset, bytes.count - offset) }
            guard let n, n > 0 else { return }
            offset += n
        }
    }
}
