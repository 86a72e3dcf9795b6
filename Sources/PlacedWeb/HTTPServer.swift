import CMicroHTTPD
import PlacedJSON
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A request whose headers and body have arrived.
public struct HTTPRequest {
    public let method: String
    public let path: String
    public let body: [UInt8]
    /// A header (`.HEADER_KIND`, any case) or query argument (`.GET_ARGUMENT_KIND`) by name.
    private let lookup: (MHD_ValueKind, String) -> String?

    public func header(_ name: String) -> String? { lookup(.HEADER_KIND, name) }
    /// A query argument (`/map?latitude=...`), decoded.
    public func query(_ name: String) -> String? { lookup(.GET_ARGUMENT_KIND, name) }

    /// A request as libmicrohttpd parsed it: its values are looked up on the connection.
    fileprivate init(method: String, path: String, body: [UInt8], connection: OpaquePointer) {
        self.init(method: method, path: path, body: body) { kind, name in
            MHD_lookup_connection_value(connection, kind, name).map { String(cString: $0) }
        }
    }

    /// A request without a connection, its headers and query arguments given (the fuzz target and the
    /// tests hand the gateway requests this way; headers are matched in any case, as libmicrohttpd does).
    init(method: String, path: String, body: [UInt8] = [], headers: [(String, String)], query: [(String, String)]) {
        self.init(method: method, path: path, body: body) { kind, name in
            if kind == .HEADER_KIND {
                return headers.first { $0.0.lowercased() == name.lowercased() }?.1
            }
            return query.first { $0.0 == name }?.1
        }
    }

    private init(
        method: String, path: String, body: [UInt8], lookup: @escaping (MHD_ValueKind, String) -> String?
    ) {
        self.method = method
        self.path = path
        self.body = body
        self.lookup = lookup
    }
}

/// What to send back: a status, a type and a body from memory or from a file.
public struct HTTPResponse {
    public enum Body {
        case bytes([UInt8])
        /// A file sent by the kernel (sendfile); a file that cannot be opened is a 404.
        case file(String)
    }

    public var status: Int
    public var contentType: String
    public var body: Body
    public var headers: [HTTPHeader]

    public init(status: Int = 200, contentType: String, body: Body, headers: [HTTPHeader] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers
    }

    public static func json(_ value: JSON, status: Int = 200) -> HTTPResponse {
        HTTPResponse(
            status: status, contentType: "application/json", body: .bytes((try? value.encoded()) ?? Array("null".utf8)),
            headers: [HTTPHeader("Cache-Control", "no-store")])
    }

    public static func failure(_ failure: HTTPFailure) -> HTTPResponse {
        HTTPResponse(
            status: failure.status, contentType: "application/json", body: .bytes(failure.body),
            headers: failure.headers + [HTTPHeader("Cache-Control", "no-store")])
    }
}

/// Answers one request, now or later (after placed replied): `respond` or `stream`, once.
public final class HTTPResponder {
    /// What answering does: for a request from libmicrohttpd, hand the answer to its exchange.
    private let answer: (HTTPAnswer) -> Void

    /// A responder that gives its answer to `answer` (the fuzz target's and the tests' requests).
    init(answer: @escaping (HTTPAnswer) -> Void) { self.answer = answer }

    fileprivate convenience init(_ exchange: Exchange) {
        self.init { [unowned exchange] answer in
            guard !exchange.isFinished, exchange.answer == nil else { return }
            exchange.answer = answer
            exchange.resume()
        }
    }

    public func respond(_ response: HTTPResponse) { answer(.response(response)) }

    /// Answers with an event stream (text/event-stream) that stays open until either side ends it.
    public func stream(_ stream: EventStream, headers: [HTTPHeader] = []) { answer(.stream(stream, headers)) }
}

/// A request's answer: a response, or an event stream with its headers.
enum HTTPAnswer {
    case response(HTTPResponse)
    case stream(EventStream, [HTTPHeader])
}

/// A text/event-stream response: bytes sent as the page takes them. While nothing is queued the
/// connection is suspended (libmicrohttpd leaves it alone); `send` resumes it.
public final class EventStream {
    /// Bytes queued for the page; the first `sent` of them have gone out.
    private var buffer: [UInt8] = []
    private var sent = 0
    fileprivate var connection: OpaquePointer?
    fileprivate var wakeServer: (() -> Void)?
    /// Watches the socket for the page hanging up: libmicrohttpd does not while the stream is suspended.
    fileprivate var hangUpWatch: EventSource?
    private var suspended = false
    private var ending = false
    private var abandoned = false
    private(set) public var isClosed = false
    /// Runs once when the connection is gone (the page left, or `end`).
    public var onClose: (() -> Void)?
    /// A page that stops reading is dropped past this many unsent bytes.
    public let maximumBacklog: Int

    public init(maximumBacklog: Int = 1 << 20) { self.maximumBacklog = maximumBacklog }

    public func send(_ bytes: [UInt8]) {
        guard !isClosed, !ending else { return }
        buffer += bytes
        if buffer.count - sent > maximumBacklog {
            Log.warning("an event page fell \(buffer.count - sent) bytes behind; dropping it")
            buffer.removeAll()
            sent = 0
            ending = true
        }
        wake()
    }

    /// Ends the stream once what is queued has gone out.
    public func end() {
        ending = true
        wake()
    }

    private func wake() {
        guard suspended, let connection else { return }
        suspended = false
        MHD_resume_connection(connection)
        wakeServer?()
    }

    /// The page hung up: the connection goes now, not at the next write.
    fileprivate func peerLeft() {
        hangUpWatch?.cancel()
        hangUpWatch = nil
        abandoned = true
        wake()
    }

    /// What the stream holds in memory, sent or not (for tests).
    var bufferedByteCount: Int { buffer.count }

    /// libmicrohttpd asks for the next bytes.
    func read(into destination: UnsafeMutablePointer<CChar>, maximum: Int) -> Int {
        if abandoned { return Int(MHD_CONTENT_READER_END_WITH_ERROR) }
        let available = buffer.count - sent
        if available == 0 {
            if ending { return Int(MHD_CONTENT_READER_END_OF_STREAM) }
            buffer.removeAll(keepingCapacity: false)
            sent = 0
            suspended = true
            MHD_suspend_connection(connection)
            return 0
        }
        let count = min(available, maximum)
        buffer.withUnsafeBytes { bytes in
            UnsafeMutableRawPointer(destination).copyMemory(from: bytes.baseAddress! + sent, byteCount: count)
        }
        sent += count
        // A page that never quite catches up would otherwise keep every byte ever sent: once the sent part
        // is the larger, it goes (each byte is moved at most once per halving, so the cost stays linear).
        if sent * 2 > buffer.count {
            buffer.removeFirst(sent)
            sent = 0
        }
        return count
    }

    /// The connection is gone (the fuzz target's and the tests' streams: their request is over).
    func closed() {
        guard !isClosed else { return }
        isClosed = true
        hangUpWatch?.cancel()
        hangUpWatch = nil
        connection = nil
        buffer = []
        onClose?()
        onClose = nil
    }
}

/// One request on its way through libmicrohttpd: from the first call of the access handler (headers
/// in) to the completion callback.
fileprivate final class Exchange {

    let connection: OpaquePointer
    /// Has libmicrohttpd look at the connection again soon (it does not wake up for a resume by itself).
    let wake: () -> Void
    var body: [UInt8] = []
    var bodyTooLarge = false
    var dispatched = false
    var answer: HTTPAnswer?
    var queued = false
    var suspended = false
    var isFinished = false

    init(connection: OpaquePointer, wake: @escaping () -> Void) {
        self.connection = connection
        self.wake = wake
    }

    /// Wakes a connection suspended while waiting for its answer.
    func resume() {
        guard suspended, !isFinished else { return }
        suspended = false
        MHD_resume_connection(connection)
        wake()
    }
}

/// HTTP/1.1 through libmicrohttpd on the sd-event loop: libmicrohttpd runs in external polling mode
/// with epoll, the loop waits on its epoll descriptor and on a timer for its next timeout, and calls
/// `MHD_run` when either fires. No thread of its own; no HTTP parsing here.
public final class HTTPServer {
    public typealias Handler = (HTTPRequest, HTTPResponder) -> Void

    public let maximumBodySize: Int
    private let loop: EventLoop
    private var daemon: OpaquePointer?
    private var readable: EventSource?
    private var timer: EventSource?
    /// Runs libmicrohttpd on the next loop iteration: after a resume, which its epoll set does not
    /// report in external polling mode.
    private var soon: EventSource?
    private var soonArmed = false
    private let handler: Handler
    /// Headers every response carries (the Content-Security-Policy and its kin).
    private let commonHeaders: [HTTPHeader]
    private var exchanges: [ObjectIdentifier: Exchange] = [:]
    private var streams: [ObjectIdentifier: EventStream] = [:]

    /// Serves on `listeningSocket` (placed-web owns it from here on). `idleTimeout` in seconds.
    public init(
        loop: EventLoop, listeningSocket: Int32, maximumConnections: Int, maximumBodySize: Int,
        idleTimeout: Int = 30, memoryPerConnection: Int = 16 * 1024, commonHeaders: [HTTPHeader],
        handler: @escaping Handler
    ) throws(SystemError) {
        self.maximumBodySize = maximumBodySize
        self.loop = loop
        self.handler = handler
        self.commonHeaders = commonHeaders
        try UnixSocket.setNonBlocking(listeningSocket)
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard
            let daemon = placed_mhd_start(
                listeningSocket, UInt32(maximumConnections), UInt32(idleTimeout), memoryPerConnection,
                { context, connection, url, method, _, data, size, requestContext in
                    Unmanaged<HTTPServer>.fromOpaque(context!).takeUnretainedValue().access(
                        connection!, url: url!, method: method!, data: data, size: size!,
                        requestContext: requestContext!)
                }, context,
                { context, _, requestContext, _ in
                    Unmanaged<HTTPServer>.fromOpaque(context!).takeUnretainedValue().completed(requestContext!)
                }, context)
        else {
            // libmicrohttpd may fail without setting errno (an option it refuses): EINVAL then.
            let failure = SystemError("MHD_start_daemon")
            throw failure.errno != 0 ? failure : SystemError(failure.call, errno: EINVAL)
        }
        self.daemon = daemon
        let epoll = placed_mhd_epoll_fd(daemon)
        guard epoll >= 0 else {
            MHD_stop_daemon(daemon)
            self.daemon = nil
            throw SystemError("MHD_get_daemon_info(EPOLL_FD)", errno: ENOTSUP)
        }
        readable = try loop.onIO(fd: epoll, events: .readable) { [unowned self] _ in self.run() }
        timer = try loop.after(.max / 2) { [unowned self] in self.run() }
        try timer!.setEnabled(false)
        soon = try loop.onNextIteration { [unowned self] in
            self.soonArmed = false
            try? self.soon?.setEnabled(false)
            self.run()
        }
        soonArmed = true
    }

    private func runSoon() {
        guard !soonArmed else { return }
        soonArmed = true
        try? soon?.setEnabled(true)
    }

    deinit { stop() }

    /// Ends every event stream and connection and stops libmicrohttpd.
    public func stop() {
        guard let daemon else { return }
        for stream in streams.values { stream.end() }
        for exchange in exchanges.values where exchange.suspended {
            exchange.answer = .response(.failure(.placedUnreachable("placed-web is stopping")))
            exchange.resume()
        }
        MHD_run(daemon)
        readable?.cancel()
        timer?.cancel()
        soon?.cancel()
        MHD_stop_daemon(daemon)
        self.daemon = nil
    }

    /// Lets libmicrohttpd do what is ready, then waits for its next timeout (if any).
    private func run() {
        guard let daemon else { return }
        MHD_run(daemon)
        // A second pass: libmicrohttpd puts its listening socket back into its epoll set (after the
        // connection limit took it out) only at the start of a run, and connections that closed in
        // this run would otherwise leave nothing to wake us for it.
        MHD_run(daemon)
        var milliseconds: UInt64 = 0
        if MHD_get_timeout(daemon, &milliseconds) == MHD_Result.YES {
            try? timer?.schedule(after: milliseconds * 1000)
        } else {
            try? timer?.setEnabled(false)
        }
    }

    // MARK: libmicrohttpd callbacks

    private func access(
        _ connection: OpaquePointer, url: UnsafePointer<CChar>, method: UnsafePointer<CChar>,
        data: UnsafePointer<CChar>?, size: UnsafeMutablePointer<Int>,
        requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let opaque = requestContext.pointee else {
            // Headers are in. A declared body over the limit is refused before it is read.
            let exchange = Exchange(connection: connection) { [unowned self] in self.runSoon() }
            requestContext.pointee = Unmanaged.passRetained(exchange).toOpaque()
            exchanges[ObjectIdentifier(exchange)] = exchange
            if let length = MHD_lookup_connection_value(connection, .HEADER_KIND, "Content-Length"),
                let declared = Int(String(cString: length)), declared > maximumBodySize
            {
                return queue(.failure(.tooLarge(limit: maximumBodySize)), on: exchange)
            }
            return MHD_Result.YES
        }
        let exchange = Unmanaged<Exchange>.fromOpaque(opaque).takeUnretainedValue()
        if size.pointee > 0 {
            if exchange.body.count + size.pointee > maximumBodySize {
                exchange.bodyTooLarge = true
            } else if let data {
                exchange.body.append(
                    contentsOf: UnsafeRawBufferPointer(start: UnsafeRawPointer(data), count: size.pointee))
            }
            size.pointee = 0
            return MHD_Result.YES
        }
        if exchange.queued { return MHD_Result.YES }
        if exchange.bodyTooLarge { return queue(.failure(.tooLarge(limit: maximumBodySize)), on: exchange) }
        if !exchange.dispatched {
            exchange.dispatched = true
            let request = HTTPRequest(
                method: String(cString: method), path: String(cString: url), body: exchange.body,
                connection: connection)
            handler(request, HTTPResponder(exchange))
        }
        switch exchange.answer {
        case .response(let response)?:
            return queue(response, on: exchange)
        case .stream(let stream, let headers)?:
            return queue(stream, headers: headers, on: exchange)
        case nil:
            // Waiting for placed: libmicrohttpd leaves the connection alone until `resume`.
            exchange.suspended = true
            MHD_suspend_connection(connection)
            return MHD_Result.YES
        }
    }

    private func completed(_ requestContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        guard let opaque = requestContext.pointee else { return }
        requestContext.pointee = nil
        let exchange = Unmanaged<Exchange>.fromOpaque(opaque).takeRetainedValue()
        exchange.isFinished = true
        exchanges[ObjectIdentifier(exchange)] = nil
    }

    // MARK: Responses

    private func queue(_ response: HTTPResponse, on exchange: Exchange) -> MHD_Result {
        exchange.queued = true
        let made: OpaquePointer?
        switch response.body {
        case .bytes(let bytes):
            made = bytes.withUnsafeBytes { raw in
                MHD_create_response_from_buffer(
                    raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress), .RESPMEM_MUST_COPY)
            }
        case .file(let path):
            let file: (fd: Int32, size: UInt64)
            do {
                file = try Self.openRegularFile(path)
            } catch {
                Log.warning("cannot serve \(path): \(error.reason)")
                return queue(.failure(.notFound), on: exchange)
            }
            made = MHD_create_response_from_fd64(file.size, file.fd)  // closes fd when done
        }
        guard let made else { return MHD_Result.NO }
        defer { MHD_destroy_response(made) }
        addHeaders([HTTPHeader("Content-Type", response.contentType)] + response.headers, to: made)
        return MHD_queue_response(exchange.connection, UInt32(response.status), made)
    }

    /// `path` open for reading and its size; a file that is not a regular one fails with EINVAL.
    private static func openRegularFile(_ path: String) throws(SystemError) -> (fd: Int32, size: UInt64) {
        let fd = try checkPOSIX(open(path, O_RDONLY | O_CLOEXEC), "open")
        var status = stat()
        do throws(SystemError) {
            try checkPOSIX(fstat(fd, &status), "fstat")
            guard status.st_mode & S_IFMT == S_IFREG else { throw SystemError("open", errno: EINVAL) }
        } catch {
            close(fd)
            throw error
        }
        return (fd, UInt64(status.st_size))
    }

    private func queue(_ stream: EventStream, headers: [HTTPHeader], on exchange: Exchange) -> MHD_Result {
        exchange.queued = true
        stream.connection = exchange.connection
        stream.wakeServer = { [unowned self] in self.runSoon() }
        let opaque = Unmanaged.passRetained(stream).toOpaque()
        guard
            let made = MHD_create_response_from_callback(
                UInt64.max, 16 * 1024,
                { context, _, destination, maximum in
                    Unmanaged<EventStream>.fromOpaque(context!).takeUnretainedValue().read(
                        into: destination!, maximum: maximum)
                }, opaque,
                { context in
                    let stream = Unmanaged<EventStream>.fromOpaque(context!).takeRetainedValue()
                    stream.closed()
                })
        else {
            Unmanaged<EventStream>.fromOpaque(opaque).release()
            return MHD_Result.NO
        }
        defer { MHD_destroy_response(made) }
        let id = ObjectIdentifier(stream)
        streams[id] = stream
        let previous = stream.onClose
        stream.onClose = { [weak self] in
            self?.streams[id] = nil
            previous?()
        }
        addHeaders(
            [
                HTTPHeader("Content-Type", "text/event-stream"), HTTPHeader("Cache-Control", "no-store"),
                HTTPHeader("X-Accel-Buffering", "no"),
            ] + headers, to: made)
        let socket = placed_mhd_connection_fd(exchange.connection)
        if socket >= 0 {
            // The page sends nothing after its request: the only event is its hanging up (EPOLLRDHUP,
            // which Glibc's module does not export).
            stream.hangUpWatch = try? loop.onIO(fd: socket, events: IOEvents(rawValue: 0x2000)) {
                [weak stream] _ in stream?.peerLeft()
            }
        }
        return MHD_queue_response(exchange.connection, 200, made)
    }

    private func addHeaders(_ headers: [HTTPHeader], to response: OpaquePointer) {
        for header in commonHeaders + headers { MHD_add_response_header(response, header.name, header.value) }
    }
}
