import PlacedJSON
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A varlink server (https://varlink.org) on a listening Unix stream socket, driven by an
/// `EventLoop`: NUL-framed JSON messages, `org.varlink.service` answered here, every other call
/// handed to the handler registered for its interface.
///
/// Robustness: messages are limited to `maxMessageSize` bytes (larger: a named error, then
/// disconnect); input that is not a varlink call gets a named error and a disconnect; each client's
/// unsent output is bounded by `maxQueuedBytes` and a client that stops reading is dropped when it
/// fills. None of it touches other clients. Loop thread only.
public final class VarlinkServer {
    public struct Configuration: Sendable {
        /// `GetInfo` fields.
        public var vendor: String
        public var product: String
        public var version: String
        public var url: String
        /// Largest accepted message, in bytes, without its NUL terminator.
        public var maxMessageSize = 64 * 1024
        /// Largest backlog of unsent replies per client before it is dropped.
        public var maxQueuedBytes = 256 * 1024
        /// Connections beyond this many are closed at once.
        public var maxConnections = 4096
        /// Connections of one user beyond this many are closed at once, so that no one user (the
        /// socket is open to all) can take every connection: sd-varlink's quarter of the whole.
        public var maxConnectionsPerUser = 1024
        /// Error sent before disconnecting a client whose message exceeds `maxMessageSize`
        /// (parameters: `limit`).
        public var messageTooLargeError: String
        /// Error sent before disconnecting a client that sent malformed JSON or a message that is not a
        /// call (parameters: `reason`).
        public var invalidMessageError: String
        /// Error replied when a handler throws something other than a `VarlinkError`.
        public var internalError: String

        /// `errorInterface` qualifies the server's own errors: `<errorInterface>.MessageTooLarge`,
        /// `.InvalidMessage`, `.InternalError` (declare them in that interface's description).
        public init(
            vendor: String, product: String, version: String, url: String, errorInterface: String
        ) {
            self.vendor = vendor
            self.product = product
            self.version = version
            self.url = url
            messageTooLargeError = errorInterface + ".MessageTooLarge"
            invalidMessageError = errorInterface + ".InvalidMessage"
            internalError = errorInterface + ".InternalError"
        }
    }

    /// Handles one call: reply now or keep the call and reply later. A thrown `VarlinkError`
    /// becomes the reply; any other error becomes `configuration.internalError`.
    public typealias Handler = (VarlinkCall) throws -> Void

    public let configuration: Configuration
    /// Larger limits for some peers, by their credentials, set when they connect: a writer's batch of
    /// own places is megabytes. nil, or nil for a peer: the configuration's.
    public var limits: ((Credentials) -> Limits?)?
    private let loop: EventLoop
    private let listener: Int32
    /// The socket file this server created and removes on `close()`; nil for an inherited socket.
    private let boundFile: UnixSocket.BoundFile?
    private var acceptSource: EventSource?
    private var acceptRetry: EventSource?
    private var interfaces: [(interface: VarlinkInterface, handler: Handler)] = []
    private var connections: [Int32: VarlinkConnection] = [:]
    /// How many of `connections` each user has.
    private var connectionsByUser: [uid_t: Int] = [:]
    private var needProcessing: [VarlinkConnection] = []
    private var processingSource: EventSource?
    /// One read buffer for all connections: the loop reads one socket at a time.
    var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    /// Listens on a new socket at `path` (see `UnixSocket.listen` for the stale-socket rules).
    public convenience init(
        loop: EventLoop, path: String, mode: mode_t = 0o660, configuration: Configuration
    ) throws(SystemError) {
        let fd = try UnixSocket.listen(path: path, mode: mode)
        try self.init(
            loop: loop, listening: fd, boundFile: UnixSocket.BoundFile(path: path), configuration: configuration)
    }

    /// Serves on an already listening socket (e.g. from systemd socket activation). The server owns
    /// and closes it.
    public convenience init(loop: EventLoop, listening fd: Int32, configuration: Configuration)
        throws(SystemError)
    {
        try self.init(loop: loop, listening: fd, boundFile: nil, configuration: configuration)
    }

    private init(
        loop: EventLoop, listening fd: Int32, boundFile: UnixSocket.BoundFile?, configuration: Configuration
    )
        throws(SystemError)
    {
        self.loop = loop
        self.listener = fd
        self.boundFile = boundFile
        self.configuration = configuration
        // Thousands of clients need thousands of descriptors; failing to raise is not fatal.
        _ = try? ProcessLimits.raiseOpenFileLimit()
        do {
            try UnixSocket.configureAccepted(fd)
            acceptSource = try loop.onIO(fd: fd) { [weak self] _ in self?.acceptClients() }
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    deinit { close() }

    /// Adds an interface: its calls go to `handler`. The first one registered after
    /// `org.varlink.service` is listed first by `GetInfo`.
    public func register(_ interface: VarlinkInterface, handler: @escaping Handler) {
        interfaces.removeAll { $0.interface.name == interface.name }
        interfaces.append((interface, handler))
    }

    /// Open client connections.
    public var connectionCount: Int { connections.count }

    /// Calls made with `more` to `method` (fully qualified) that are still open: the watchers.
    public func openStreams(of method: String) -> [VarlinkCall] {
        connections.values.compactMap { connection in
            guard let call = connection.currentCall, call.more, call.method == method, !call.isFinished
            else {
                return nil
            }
            return call
        }
    }

    /// Sends `parameters` as a `continues` reply to every open stream of `method`, encoding once.
    /// Returns how many clients it was queued for; a client whose queue is full is dropped.
    @discardableResult
    public func broadcast(_ parameters: [String: JSON], toStreamsOf method: String) throws(JSONError)
        -> Int
    {
        try broadcast(parameters, to: openStreams(of: method))
    }

    /// Sends `parameters` as a `continues` reply to each of `streams` (some of `openStreams`: the
    /// watchers that asked for the same thing), encoding once.
    @discardableResult
    public func broadcast(_ parameters: [String: JSON], to streams: [VarlinkCall]) throws(JSONError) -> Int {
        guard !streams.isEmpty else { return 0 }
        return send(try VarlinkWire.reply(parameters, continues: true), to: streams)
    }

    /// `broadcast(_:to:)` with parameters written as JSON text by `write`: see
    /// `VarlinkWire.reply(continues:capacity:writingParameters:)`.
    @discardableResult
    public func broadcast(
        to streams: [VarlinkCall], capacity: Int = 256,
        writingParameters write: (inout [UInt8]) throws(JSONError) -> Void
    ) throws(JSONError) -> Int {
        guard !streams.isEmpty else { return 0 }
        let bytes = try VarlinkWire.reply(continues: true, capacity: capacity, writingParameters: write)
        return send(bytes, to: streams)
    }

    private func send(_ bytes: [UInt8], to streams: [VarlinkCall]) -> Int {
        var delivered = 0
        for call in streams where !call.isFinished && call.connection?.send(bytes) == true { delivered += 1 }
        return delivered
    }

    /// Stops listening, disconnects every client (cancelling their calls) and removes the socket file.
    public func close() {
        guard let source = acceptSource else { return }
        source.cancel()
        acceptSource = nil
        acceptRetry = nil
        processingSource = nil
        Glibc.close(listener)
        boundFile?.remove()
        let all = connections.values
        connections = [:]
        connectionsByUser = [:]
        needProcessing = []
        for connection in all { connection.close(reason: .serverClosed) }
    }

    // MARK: Accepting

    private func acceptClients() {
        loop.preconditionInLoop()
        // Bounded per wake-up so a connection storm cannot starve the clients already served.
        for _ in 0..<256 {
            let fd: Int32
            do {
                fd = try retryingOnInterrupt("accept") { accept(listener, nil, nil) }
            } catch {
                switch error.errno {
                case ECONNABORTED: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM: pauseAccepting()
                default: break
                }
                return
            }
            guard connections.count < configuration.maxConnections,
                (try? UnixSocket.configureAccepted(fd)) != nil,
                let credentials = try? Credentials(peerOf: fd),
                connectionsByUser[credentials.uid, default: 0] < configuration.maxConnectionsPerUser,
                let connection = try? VarlinkConnection(
                    fd: fd, credentials: credentials, server: self, loop: loop)
            else {
                Glibc.close(fd)
                continue
            }
            connections[fd] = connection
            connectionsByUser[credentials.uid, default: 0] += 1
        }
    }

    /// Out of descriptors: accepting again at once would spin on the still-readable listener, so
    /// pause it briefly; clients wait in the backlog meanwhile.
    private func pauseAccepting() {
        try? acceptSource?.setEnabled(false)
        acceptRetry = try? loop.after(100_000) { [weak self] in
            guard let self else { return }
            try? self.acceptSource?.setEnabled(true)
            self.acceptRetry = nil
        }
    }

    func connectionClosed(_ connection: VarlinkConnection) {
        loop.preconditionInLoop()
        guard connections[connection.fd] === connection else { return }
        connections[connection.fd] = nil
        let uid = connection.credentials.uid
        connectionsByUser[uid, default: 1] -= 1
        if connectionsByUser[uid] == 0 { connectionsByUser[uid] = nil }
    }

    /// A call finished outside input processing: handle the client's next buffered call on the next
    /// iteration, not inside whatever code finished the call.
    func scheduleProcessing(_ connection: VarlinkConnection) {
        needProcessing.append(connection)
        guard processingSource == nil else { return }
        processingSource = try? loop.onNextIteration { [weak self] in
            guard let self else { return }
            let pending = self.needProcessing
            self.needProcessing = []
            self.processingSource = nil
            for connection in pending where !connection.isClosed { connection.processInput() }
        }
    }

    // MARK: Dispatch

    func dispatch(_ call: VarlinkCall) {
        let interface = call.interface
        guard !interface.isEmpty, !call.member.isEmpty else {
            call.fail(.interfaceNotFound(interface))
            return
        }
        if interface == VarlinkInterface.service.name {
            return serveService(call)
        }
        guard let entry = interfaces.first(where: { $0.interface.name == interface }) else {
            call.fail(.interfaceNotFound(interface))
            return
        }
        guard entry.interface.methods.contains(call.member) else {
            call.fail(.methodNotFound(call.method))
            return
        }
        do {
            try entry.handler(call)
        } catch let error as VarlinkError {
            call.fail(error)
        } catch {
            call.fail(VarlinkError(configuration.internalError))
        }
    }

    private func serveService(_ call: VarlinkCall) {
        do {
            switch call.member {
            case "GetInfo":
                try call.rejectUnknownParameters(allowing: [])
                let names = [VarlinkInterface.service.name] + interfaces.map(\.interface.name)
                try call.reply([
                    "vendor": .string(configuration.vendor), "product": .string(configuration.product),
                    "version": .string(configuration.version), "url": .string(configuration.url),
                    "interfaces": .array(names.map(JSON.string)),
                ])
            case "GetInterfaceDescription":
                try call.rejectUnknownParameters(allowing: ["interface"])
                let name = try call.required("interface", \.string)
                let all = [VarlinkInterface.service] + interfaces.map(\.interface)
                guard let interface = all.first(where: { $0.name == name }) else {
                    throw VarlinkError.interfaceNotFound(name)
                }
                try call.reply(["description": .string(interface.description)])
            default:
                throw VarlinkError.methodNotFound(call.method)
            }
        } catch let error as VarlinkError {
            call.fail(error)
        } catch {
            call.fail(VarlinkError(configuration.internalError))
        }
    }
}

extension VarlinkServer {
    /// One connection's bounds: its largest message (without the NUL) and its backlog of unsent output.
    public struct Limits: Sendable, Equatable {
        public var maxMessageSize: Int
        public var maxQueuedBytes: Int

        public init(maxMessageSize: Int, maxQueuedBytes: Int) {
            self.maxMessageSize = maxMessageSize
            self.maxQueuedBytes = maxQueuedBytes
        }
    }
}
