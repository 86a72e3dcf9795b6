import PlacedSystem
import PlacedThreads

#if canImport(Glibc)
    import Glibc
#endif

/// A broker's host name looked up without stalling the event loop: `getaddrinfo()` blocks for as long as
/// the resolver waits on a DNS server (seconds per attempt when one is unreachable), so it runs on a
/// thread of its own that lives for that one lookup, and its answer comes back through a socket the loop
/// watches. Cancelling (or dropping) a lookup leaves its thread to finish and exit by itself.
final class HostLookup {
    enum Outcome: Equatable {
        /// Numeric addresses, in the resolver's order of preference.
        case addresses([String])
        case failed(String)
    }

    /// The name being looked up.
    let host: String
    private var io: EventSource?
    private var readEnd: Int32
    private let job: Job
    private let onDone: (Outcome) -> Void

    /// Starts looking `host` up; `onDone` hears the outcome on the loop, once, unless cancelled first.
    ///
    /// Each end of the socket pair is closed once, by one owner: the write end by the thread when it is
    /// done (or here, when no thread started: before this object is whole, so no deinit runs), the read end
    /// by `cancel` (at the latest from deinit, which also runs when the loop cannot watch it).
    init(loop: EventLoop, host: String, port: Int, onDone: @escaping (Outcome) -> Void) throws(FleetError) {
        var ends: [Int32] = [-1, -1]
        do {
            try checkPOSIX(
                socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends), "socketpair")
        } catch {
            throw .client("cannot look \(host) up: \(error)")
        }
        let job = Job(host: host, port: String(port), writeEnd: ends[1])
        // The answer waits in the socket until the loop watches it.
        guard job.start() else {
            close(ends[0])
            close(ends[1])
            throw .client("cannot look \(host) up: the system gives no thread to run the lookup on")
        }
        self.host = host
        readEnd = ends[0]
        self.job = job
        self.onDone = onDone
        do {
            io = try loop.onIO(fd: readEnd, events: .readable) { [unowned self] _ in finish() }
        } catch {
            throw .client("cannot look \(host) up: \(error)")
        }
    }

    deinit { cancel() }

    /// Hears nothing more; the thread finishes its lookup and exits.
    func cancel() {
        io = nil
        if readEnd >= 0 { close(readEnd) }
        readEnd = -1
    }

    private func finish() {
        var byte: UInt8 = 0
        _ = read(readEnd, &byte, 1)
        cancel()
        // The thread wrote its answer before the byte it sent: what it wrote is there to read.
        onDone(job.error.map(Outcome.failed) ?? .addresses(job.addresses))
    }

    /// Whether `host` is an IPv4 or IPv6 address already (no lookup needed).
    static func isNumeric(_ host: String) -> Bool {
        var buffer = in6_addr()
        return inet_pton(AF_INET, host, &buffer) == 1 || inet_pton(AF_INET6, host, &buffer) == 1
    }

    /// What the thread works on: written by the thread only, then read by the loop after the wake-up.
    private final class Job {
        let host: String
        let port: String
        let writeEnd: Int32
        var addresses: [String] = []
        var error: String?

        init(host: String, port: String, writeEnd: Int32) {
            self.host = host
            self.port = port
            self.writeEnd = writeEnd
        }

        /// Starts the thread (detached; it holds the job until it is done); false when the system gives none.
        func start() -> Bool {
            // The resolver and its NSS modules need little stack; 256 kB instead of the 8 MB default.
            guard let thread = startThread(stackSize: 256 * 1024, run) else { return false }
            pthread_detach(thread)
            return true
        }

        /// On the thread: the blocking lookup, then one byte to wake the loop.
        private func run() {
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            hints.ai_flags = AI_ADDRCONFIG
            var list: UnsafeMutablePointer<addrinfo>?
            let rc = getaddrinfo(host, port, &hints, &list)
            if rc != 0 {
                error =
                    "cannot resolve \(host): "
                    + (rc == EAI_SYSTEM ? SystemError("getaddrinfo").reason : String(cString: gai_strerror(rc)))
            } else {
                var entry = list
                while let info = entry?.pointee {
                    if let text = Self.numeric(info), !addresses.contains(text) { addresses.append(text) }
                    entry = info.ai_next
                }
                freeaddrinfo(list)
                if addresses.isEmpty { error = "cannot resolve \(host): no address" }
            }
            var byte: UInt8 = 1
            // The loop may have given up on the answer (closed its end): no SIGPIPE for that.
            _ = send(writeEnd, &byte, 1, Int32(MSG_NOSIGNAL))
            close(writeEnd)
        }

        private static func numeric(_ info: addrinfo) -> String? {
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            let ok = getnameinfo(
                info.ai_addr, info.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST)
            return ok == 0 ? text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : nil
        }
    }
}
