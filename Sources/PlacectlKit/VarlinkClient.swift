import PlacedCore
import PlacedJSON
import PlacedSystem
import PlacedVarlink

#if canImport(Glibc)
    import Glibc
#endif

/// A client of placed's varlink socket: blocking calls with a timeout, one at a time.
public final class VarlinkClient: PlacesClient {
    public static let interface = "io.placed.Places"

    public let socketPath: String
    public var language: String?
    public var fields: [String]?
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
                case EACCES, EPERM: "not allowed to connect to placed's socket."
                default: nil
                }
            throw .unreachable(endpoint: endpoint, reason: error.reason, hint: hint)
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
        try call(
            "Current",
            Self.present([
                "limit": limit.map(JSON.init(integerLiteral:)), "language": language.map(JSON.string),
                "fields": fieldsJSON,
            ]))
    }

    public func rank(latitude: Double, longitude: Double, accuracy: Double?, limit: Int?) throws(ClientError)
        -> [String: JSON]
    {
        try call(
            "Rank",
            Self.present([
                "latitude": .number(latitude), "longitude": .number(longitude), "accuracy": accuracy.map(JSON.number),
                "limit": limit.map(JSON.init(integerLiteral:)), "language": language.map(JSON.string),
                "fields": fieldsJSON,
            ]))
    }

    public func select(id: String) throws(ClientError) -> [String: JSON] {
        try call("Select", ["id": .string(id)])
    }

    public func refresh() throws(ClientError) { _ = try call("Refresh") }

    public func details(id: String, time: String?) throws(ClientError) -> [String: JSON] {
        try call(
            "Details",
            Self.present([
                "id": .string(id), "language": language.map(JSON.string), "fields": fieldsJSON,
                "time": time.map(JSON.string),
            ]))
    }

    private var fieldsJSON: JSON? { fields.map { .array($0.map(JSON.string)) } }

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
        try send("Watch", Self.present(["language": language.map(JSON.string), "fields": fieldsJSON]), more: true)

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
                    while let reply = try self.nextReply() {
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
            do {
                let n = try retryingOnInterrupt("send(\(socketPath))") {
                    bytes.withUnsafeBytes {
                        Glibc.send(fd, $0.baseAddress! + done, $0.count - done, Int32(MSG_NOSIGNAL))
                    }
                }
                done += n
            } catch {
                switch error.errno {
                case EAGAIN, EWOULDBLOCK: throw .timedOut(endpoint: endpoint, seconds: timeout)
                case EPIPE, ECONNRESET: throw .disconnected(endpoint: endpoint)
                default: throw .system(error)
                }
            }
        }
    }

    /// The next reply, waiting at most `timeout` for each chunk.
    private func receive() throws(ClientError) -> VarlinkWire.Reply {
        while true {
            if let reply = try nextReply() {
                if let name = reply.error { throw .daemon(name: name, parameters: reply.parameters, message: nil) }
                return reply
            }
            guard try readChunk() else { throw .disconnected(endpoint: endpoint) }
        }
    }

    /// The next complete reply in what was read; nil until one is complete.
    private func nextReply() throws(ClientError) -> VarlinkWire.Reply? {
        do {
            guard let message = try framer.next() else { return nil }
            return try VarlinkWire.Reply(message)
        } catch {
            throw .protocolViolation(error.description)
        }
    }

    /// Reads what the socket has into the framer; false at end of stream.
    private func readChunk() throws(ClientError) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let n: Int
        do {
            n = try retryingOnInterrupt("read(\(socketPath))") {
                chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            }
        } catch {
            switch error.errno {
            case EAGAIN, EWOULDBLOCK: throw .timedOut(endpoint: endpoint, seconds: timeout)
            case ECONNRESET: return false
            default: throw .system(error)
            }
        }
        guard n > 0 else { return false }
        framer.append(chunk[..<n])
        return true
    }

    /// Leaves out absent optional parameters instead of sending null.
    private static func present(_ parameters: [String: JSON?]) -> [String: JSON] {
        parameters.compactMapValues { $0 }
    }
}
