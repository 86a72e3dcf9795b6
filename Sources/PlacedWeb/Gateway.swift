import PlacedJSON
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// placed-web: the kiosk page's files, its live events and its two calls, in front of placed.
///
/// Routes: `GET /` the page (with a fresh token), its files and Leaflet's; `GET /events` the state
/// as Server-Sent Events; `GET /state` the same once as JSON; `GET /map?latitude=&longitude=&radius=`
/// the map layer around a position; `GET /details?id=&time=` one place's details (its hours at
/// `time`); `POST /select` `{"id": ...}` with the page's token.
public final class Gateway {
    public static let bodyLimit = 4096
    public static let tokenHeader = "X-Placed-Token"
    static let tokenPlaceholder = "@PLACED_TOKEN@"
    /// `default-src 'self'`: no inline script or style, nothing from another origin.
    public static let contentSecurityPolicy =
        "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    private let options: WebOptions
    private let policy: RequestPolicy
    private let loop: EventLoop
    private var upstream: Upstream!
    private var server: HTTPServer!
    private var tokens = PageTokens()
    private var clients: [ObjectIdentifier: EventStream] = [:]
    private var eventID = 0
    private var keepAlive: EventSource?
    private let files: [String: (path: String, type: String)]

    /// Serves on `listeningSocket`, bound to `address`.
    public init(options: WebOptions, loop: EventLoop, listeningSocket: Int32, address: ListenAddress) throws {
        self.options = options
        self.loop = loop
        policy = RequestPolicy(address: address, machineName: Self.machineName())
        let web = options.webDirectory
        let leaflet = options.leafletDirectory
        var files: [String: (path: String, type: String)] = [
            "/app.js": (web + "/app.js", "text/javascript; charset=utf-8"),
            "/app.css": (web + "/app.css", "text/css; charset=utf-8"),
            "/favicon.svg": (web + "/favicon.svg", "image/svg+xml"),
            "/leaflet/leaflet.js": (leaflet + "/leaflet.js", "text/javascript; charset=utf-8"),
            "/leaflet/leaflet.css": (leaflet + "/leaflet.css", "text/css; charset=utf-8"),
        ]
        for image in ["marker-icon.png", "marker-icon-2x.png", "marker-shadow.png", "layers.png", "layers-2x.png"] {
            files["/leaflet/images/" + image] = (leaflet + "/images/" + image, "image/png")
        }
        self.files = files
        upstream = Upstream(loop: loop, socketPath: options.socketPath) { [unowned self] state in
            self.broadcast(state)
        }
        server = try HTTPServer(
            loop: loop, listeningSocket: listeningSocket, maximumConnections: options.maximumConnections,
            maximumBodySize: Self.bodyLimit,
            commonHeaders: [
                HTTPHeader("Content-Security-Policy", Self.contentSecurityPolicy),
                HTTPHeader("X-Content-Type-Options", "nosniff"), HTTPHeader("Referrer-Policy", "no-referrer"),
                HTTPHeader("X-Frame-Options", "DENY"), HTTPHeader("Cross-Origin-Resource-Policy", "same-origin"),
            ]
        ) { [unowned self] request, responder in self.handle(request, responder) }
        keepAlive = try loop.after(.max / 2) { [unowned self] in self.sendKeepAlive() }
        try keepAlive!.setEnabled(false)
        upstream.start()
    }

    /// The machine's host name, which a browser on the network may name it by.
    static func machineName() -> String? {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0, name[0] != 0 else { return nil }
        return name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    public func stop() {
        keepAlive?.cancel()
        upstream.stop()
        server.stop()
    }

    public var eventClientCount: Int { clients.count }

    // MARK: Routes

    private func handle(_ request: HTTPRequest, _ responder: HTTPResponder) {
        do throws(HTTPFailure) {
            try policy.checkHost(request.header("Host"))
            let path = String(request.path.prefix { $0 != "?" })
            switch path {
            case "/", "/index.html":
                try allow(request, "GET", "HEAD")
                responder.respond(try page())
            case "/events":
                try allow(request, "GET")
                try follow(responder)
            case "/state":
                try allow(request, "GET", "HEAD")
                responder.respond(.json(upstream.state.snapshot))
            case "/map":
                try allow(request, "GET")
                try map(request, responder)
            case "/details":
                try allow(request, "GET")
                try details(request, responder)
            case "/select":
                try allow(request, "POST")
                try select(request, responder)
            default:
                guard let file = files[path] else { throw .notFound }
                try allow(request, "GET", "HEAD")
                responder.respond(
                    HTTPResponse(
                        contentType: file.type, body: .file(file.path),
                        headers: [HTTPHeader("Cache-Control", "no-cache")]))
            }
        } catch {
            if error.status >= 500 || error.status == 403 {
                Log.info("\(request.method) \(request.path): \(error.status) \(error.name)")
            }
            responder.respond(.failure(error))
        }
    }

    private func allow(_ request: HTTPRequest, _ methods: String...) throws(HTTPFailure) {
        guard methods.contains(request.method) else { throw .methodNotAllowed(methods) }
    }

    /// index.html with a token of its own in `<meta name="placed-token">`.
    private func page() throws(HTTPFailure) -> HTTPResponse {
        let path = options.webDirectory + "/index.html"
        guard let template = readFile(path, limit: 64 * 1024) else {
            Log.warning("cannot read \(path)")
            throw HTTPFailure(500, "page-missing", "the kiosk page is not installed")
        }
        guard let random = readFile("/dev/urandom", limit: 16, count: 16) else {
            throw HTTPFailure(500, "no-randomness", "no random bytes for the page's token")
        }
        let token = tokens.issue(randomBytes: random)
        let placeholder = Array(Self.tokenPlaceholder.utf8)
        guard
            let at = template.indices.first(where: {
                template[$0...].starts(with: placeholder)
            })
        else {
            throw HTTPFailure(500, "page-broken", "the kiosk page has no place for its token")
        }
        var page = template
        page.replaceSubrange(at..<(at + placeholder.count), with: Array(token.utf8))
        return HTTPResponse(
            contentType: "text/html; charset=utf-8", body: .bytes(page),
            headers: [HTTPHeader("Cache-Control", "no-store")])
    }

    // MARK: Events

    private func follow(_ responder: HTTPResponder) throws(HTTPFailure) {
        guard clients.count < options.maximumEventClients else {
            throw .tooManyEventClients(limit: options.maximumEventClients)
        }
        let stream = EventStream()
        let id = ObjectIdentifier(stream)
        clients[id] = stream
        stream.onClose = { [weak self] in
            guard let self else { return }
            self.clients[id] = nil
            Log.debug("an event page left; \(self.clients.count) remain")
            if self.clients.isEmpty { try? self.keepAlive?.setEnabled(false) }
        }
        stream.send(ServerSentEvent.retry(milliseconds: 2000))
        stream.send(stateEvent(upstream.state))
        responder.stream(stream)
        if clients.count == 1 { try? keepAlive?.schedule(after: 15_000_000) }
        Log.debug("an event page joined; \(clients.count) follow")
    }

    private func stateEvent(_ state: KioskState) -> [UInt8] {
        eventID += 1
        return ServerSentEvent.frame(event: "state", id: eventID, data: state.snapshot)
    }

    private func broadcast(_ state: KioskState) {
        guard !clients.isEmpty else { return }
        let event = stateEvent(state)
        for client in clients.values { client.send(event) }
    }

    /// Every 15 s while pages follow: a comment line, so a page that went away is noticed.
    private func sendKeepAlive() {
        for client in clients.values { client.send(ServerSentEvent.keepAlive) }
        if !clients.isEmpty { try? keepAlive?.schedule(after: 15_000_000) }
    }

    // MARK: Calls

    private func map(_ request: HTTPRequest, _ responder: HTTPResponder) throws(HTTPFailure) {
        func number(_ name: String, _ range: ClosedRange<Double>) throws(HTTPFailure) -> Double {
            guard let text = request.query(name), let value = Double(text), value.isFinite, range.contains(value) else {
                throw .badRequest("\(name): a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return value
        }
        var parameters: [String: JSON] = [
            "latitude": .number(try number("latitude", -90...90)),
            "longitude": .number(try number("longitude", -180...180)),
            "radius": .number(try number("radius", 0...1000)),
        ]
        try addLanguage(of: request, to: &parameters)
        upstream.call("Map", parameters) { result in
            switch result {
            case .success(let reply):
                responder.respond(.json(["features": reply["features"] ?? .array([])]))
            case .failure(.replied(let name, _))
            where name.hasSuffix(".NoMapLayer") || name.hasSuffix(".MethodNotFound")
                || name.hasSuffix(".TooManyFeatures"):
                // No map to draw (an older placed, a places file imported with --no-map): the page
                // shows the places without streets.
                responder.respond(.json(["features": .array([]), "unavailable": .string(name)]))
            case .failure(let error):
                responder.respond(.failure(Self.failure(error)))
            }
        }
    }

    private func addLanguage(of request: HTTPRequest, to parameters: inout [String: JSON]) throws(HTTPFailure) {
        guard let language = request.query("language") else { return }
        guard !language.isEmpty, language.utf8.count <= 32,
            language.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.@".contains($0)) })
        else { throw .badRequest("language: a language code such as fi or sv-FI") }
        parameters["language"] = .string(language)
    }

    /// One place's details for the card the page shows of the selected place; `time` (RFC 3339,
    /// placed checks it) for the hours of another day of the week.
    private func details(_ request: HTTPRequest, _ responder: HTTPResponder) throws(HTTPFailure) {
        guard let id = request.query("id"), !id.isEmpty, id.utf8.count <= 256 else {
            throw .badRequest("id: a place's id, such as osm:node/123")
        }
        var parameters: [String: JSON] = ["id": .string(id)]
        if let time = request.query("time") {
            guard !time.isEmpty, time.utf8.count <= 64 else { throw .badRequest("time: an RFC 3339 instant") }
            parameters["time"] = .string(time)
        }
        try addLanguage(of: request, to: &parameters)
        upstream.call("Details", parameters) { result in
            switch result {
            case .success(let reply):
                responder.respond(.json(["place": reply["place"] ?? .null]))
            case .failure(.replied(let name, _)) where name.hasSuffix(".UnknownPlace"):
                responder.respond(.failure(HTTPFailure(404, "unknown-place", "no place has that id")))
            case .failure(.replied(let name, _)) where name.hasSuffix(".InvalidTime"):
                responder.respond(.failure(.badRequest("time: an RFC 3339 instant with a zone")))
            case .failure(let error):
                responder.respond(.failure(Self.failure(error)))
            }
        }
    }

    private func select(_ request: HTTPRequest, _ responder: HTTPResponder) throws(HTTPFailure) {
        let host = request.header("Host")
        try policy.checkOrigin(request.header("Origin"), host: host)
        guard tokens.accept(request.header(Self.tokenHeader)) else { throw .badToken }
        guard RequestPolicy.isJSON(request.header("Content-Type")) else { throw .unsupportedMediaType }
        guard let body = try? JSON(parsing: request.body), let id = body["id"]?.string,
            !id.isEmpty, id.utf8.count <= 256
        else { throw .badRequest("the body must be {\"id\": \"osm:node/...\"}") }
        upstream.call("Select", ["id": .string(id)]) { result in
            switch result {
            case .success(let reply):
                Log.info("selected \(id)")
                responder.respond(.json(["marker": reply["marker"] ?? .null]))
            case .failure(let error):
                responder.respond(.failure(Self.failure(error)))
            }
        }
    }

    static func failure(_ error: Upstream.CallError) -> HTTPFailure {
        switch error {
        case .unreachable(let reason): return .placedUnreachable(reason)
        case .timedOut: return .placedTimedOut
        case .replied(let name, _):
            let short = String(name.split(separator: ".").last ?? "")
            switch short {
            case "NotInRanking", "UnknownPlace":
                return HTTPFailure(409, "not-in-ranking", "that place is no longer among the likely places")
            case "PermissionDenied":
                return HTTPFailure(502, "placed-refused", "placed refused placed-web (\(name)): see its groups")
            case "InvalidRadius", "InvalidPosition", "InvalidParameter":
                return .badRequest("placed refused the request: \(name)")
            default:
                return HTTPFailure(502, "placed-error", "placed answered \(name)")
            }
        }
    }
}

/// A small file's bytes, or nil when it cannot be read or is larger than `limit`; with `count`, its
/// first `count` bytes (random bytes from /dev/urandom).
func readFile(_ path: String, limit: Int, count wanted: Int? = nil) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16 * 1024)
    while true {
        let count = try? retryingOnInterrupt("read") {
            chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        }
        guard let count else { return nil }
        if count == 0 { return wanted == nil || bytes.count == wanted ? bytes : nil }
        bytes += chunk[..<count]
        if let wanted, bytes.count >= wanted { return Array(bytes.prefix(wanted)) }
        if bytes.count > limit { return nil }
    }
}
