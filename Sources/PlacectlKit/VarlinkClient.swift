import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The varlink wire format: JSON objects, each terminated by a NUL byte.
public enum VarlinkWire {
    /// A call, framed: `{"method":"io.placed.Places.Watch","more":true,"parameters":{...}}\0`.
    public static func call(_ method: String, parameters: [String: JSON] = [:], more: Bool = false)
        throws(JSONError) -> [UInt8]
    {
        var message: [String: JSON] = ["method": .string(method), "parameters": .object(parameters)]
        if more { message["more"] = true }
        return try VarlinkServer.frame(.object(message))
    }

    /// One reply: its parameters, or the error it names; `continues` while more replies follow.
    public struct Reply: Equatable, Sendable {
        public var parameters: [String: JSON]
        public var error: String?
        public var continues: Bool

        public init(parameters: [String: JSON], error: String? = nil, continues: Bool = false) {
            self.parameters = parameters
            self.error = error
            self.continues = continues
        }

        /// Reads a reply message; anything but an object with an object (or absent) `parameters`
        /// is a protocol violation.
        public init(_ message: JSON) throws(ClientError) {
            guard let object = message.object else { throw .protocolViolation("a reply that is not an object") }
            switch object["parameters"] {
            case nil, .null?: parameters = [:]
            case .object(let members)?: parameters = members
            default: throw .protocolViolation("reply parameters that are not an object")
            }
            switch object["error"] {
            case nil, .null?: error = nil
            case .string(let name)?: error = name
            default: throw .protocolViolation("an error name that is not a string")
            }
            continues = object["continues"]?.bool ?? false
        }
    }

    /// Splits a byte stream into messages at NUL bytes, holding a partial message until the rest
    /// arrives. A message longer than `maximumMessageSize` is an error, not unbounded memory.
    public struct Framer: Sendable {
        public let maximumMessageSize: Int
        private var buffer: [UInt8] = []
        private var scanned = 0

        public init(maximumMessageSize: Int = 16 << 20) { self.maximumMessageSize = maximumMessageSize }

        public mutating func append(_ bytes: some Sequence<UInt8>) { buffer.append(contentsOf: bytes) }

        /// The next complete message, parsed; nil until one is complete.
        public mutating func next() throws(ClientError) -> JSON? {
            guard let end = buffer[scanned...].firstIndex(of: 0) else {
                scanned = buffer.count
                if buffer.count > maximumMessageSize {
                    throw .protocolViolation("a message longer than \(maximumMessageSize) bytes")
                }
                return nil
            }
            defer {
                buffer.removeSubrange(...end)
                scanned = 0
            }
            do {
                return try JSON(parsing: buffer[..<end])
            } catch {
                throw .protocolViolation("\(error)")
            }
        }

        /// Bytes of a message not yet complete.
        public var pendingCount: Int { buffer.count }
    }
}

/// A client of placed's varlink socket: blocking calls with a timeout, one at a time.
public final class VarlinkClient: PlacesClient {
    public static let interface = "io.placed.Places"

    public let socketPath: String
    private let fd: Int32
    private let timeout: Double
    private var framer = VarlinkWire.Framer()
    private let endpoint: String

    /// Connects to the socket at `socketPath`; each later read or write waits at most `timeout` seconds.
    public init(socketPath: String, timeout: Double = 15) throws(ClientError) {
        self.socketPath = socketPath
        self.timeout = timeout
        endpoint = Endpoint.socket(path: socketPath).description
        do {
            fd = try UnixSocket.connect(path: socketPath)
        } catch {
            let hint: String? =
                switch error.errno {
                case ENOENT, ECONNREFUSED: "is placed running?"
                case EACCES, EPERM: "not allowed to talk to placed (socket mode 0660, group placed)."
                default: nil
                }
            throw .unreachable(
                endpoint: endpoint, reason: String(cString: strerror(error.errno)),
                hint: hint)
        }
        var interval = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &interval, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Calls `io.placed.Places.MEMBER` and returns the reply's parameters; an error reply throws.
    public func call(_ member: String, _ parameters: [String: JSON] = [:]) throws(ClientError) -> [String: JSON] {
        try send(member, parameters, more: false)
        let reply = try receive()
        if reply.continues { throw .protocolViolation("a streaming reply to \(member), called without more") }
        return reply.parameters
    }

    // MARK: PlacesClient

    public func current(limit: Int?) throws(ClientError) -> [String: JSON] {
        try call("Current", Self.present(["limit": limit.map(JSON.init(integerLiteral:))]))
    }

    public func rank(latitude: Double, longitude: Double, accuracy: Double?, limit: Int?) throws(ClientError)
        -> [String: JSON]
    {
        try call(
            "Rank",
            Self.present([
                "latitude": .number(latitude), "longitude": .number(longitude), "accuracy": accuracy.map(JSON.number),
                "limit": limit.map(JSON.init(integerLiteral:)),
            ]))
    }

    public func select(id: String) throws(ClientError) -> [String: JSON] {
        try call("Select", ["id": .string(id)])
    }

    public func refresh() throws(ClientError) { _ = try call("Refresh") }

    public func history(limit: Int?, before: Int?) throws(ClientError) -> [String: JSON] {
        try call(
            "History",
            Self.present([
                "limit": limit.map(JSON.init(integerLiteral:)), "before": before.map(JSON.init(integerLiteral:)),
            ]))
    }

    public func status() throws(ClientError) -> [String: JSON] { try call("Status") }

    public func watch(_ onUpdate: @escaping ([String: JSON]) -> Void) throws(ClientError) {
        let loop = try WatchLoop()
        try send("Watch", [:], more: true)

        var failure: ClientError?
        let finish = { (error: ClientError?) in
            failure = error
            loop.exit(error == nil ? 0 : 1)
        }
        let readable: EventSource
        do {
            readable = try loop.loop.onIO(fd: fd) { [unowned self] _ in
                do throws(ClientError) {
                    guard try self.readChunk() else { return finish(.disconnected(endpoint: self.endpoint)) }
                    while let message = try self.framer.next() {
                        let reply = try VarlinkWire.Reply(message)
                        if let name = reply.error {
                            return finish(.daemon(name: name, parameters: reply.parameters, message: nil))
                        }
                        onUpdate(reply.parameters)
                        if !reply.continues { return finish(nil) }
                    }
                } catch {
                    finish(error)
                }
            }
        } catch {
            throw .system(error)
        }
        defer { readable.cancel() }
        try loop.run()
        if let failure { throw failure }
    }

    // MARK: I/O

    private func send(_ member: String, _ parameters: [String: JSON], more: Bool) throws(ClientError) {
        let bytes: [UInt8]
        do {
            bytes = try VarlinkWire.call("\(Self.interface).\(member)", parameters: parameters, more: more)
        } catch {
            throw .protocolViolation("cannot encode the call: \(error)")
        }
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + done, $0.count - done, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                done += n
            } else if n < 0 && errno == EINTR {
                continue
            } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                throw .timedOut(endpoint: endpoint, seconds: timeout)
            } else if n < 0 && (errno == EPIPE || errno == ECONNRESET) {
                throw .disconnected(endpoint: endpoint)
            } else {
                throw .system(SystemError("send(\(socketPath))", errno: errno))
            }
        }
    }

    /// The next reply, waiting at most `timeout` for each chunk.
    private func receive() throws(ClientError) -> VarlinkWire.Reply {
        while true {
            if let message = try framer.next() {
                let reply = try VarlinkWire.Reply(message)
                if let name = reply.error { throw .daemon(name: name, parameters: reply.parameters, message: nil) }
                return reply
            }
            guard try readChunk() else { throw .disconnected(endpoint: endpoint) }
        }
    }

    /// Reads what the socket has into the framer; false at end of stream.
    private func readChunk() throws(ClientError) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                framer.append(chunk[..<n])
                return true
            }
            if n == 0 { return false }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: throw .timedOut(endpoint: endpoint, seconds: timeout)
            case ECONNRESET: return false
            default: throw .system(SystemError("read(\(socketPath))", errno: errno))
            }
        }
    }

    /// Leaves out absent optional parameters instead of sending null.
    private static func present(_ parameters: [String: JSON?]) -> [String: JSON] {
        parameters.compactMapValues { $0 }
    }
}
