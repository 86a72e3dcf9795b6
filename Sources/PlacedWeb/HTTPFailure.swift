import PlacedJSON

/// A request placed-web refuses or cannot serve: an HTTP status and a short JSON body naming the
/// reason (`{"error":"forbidden-origin","message":"..."}`), the same for every route.
public struct HTTPFailure: Error, Equatable, Sendable {
    public let status: Int
    /// A stable name clients and tests match on.
    public let name: String
    public let message: String
    /// Extra headers, such as `Allow` on a 405.
    public let headers: [HTTPHeader]

    public init(_ status: Int, _ name: String, _ message: String, headers: [HTTPHeader] = []) {
        self.status = status
        self.name = name
        self.message = message
        self.headers = headers
    }

    public var body: [UInt8] {
        let json: JSON = ["error": .string(name), "message": .string(message)]
        return (try? json.encoded()) ?? Array("{\"error\":\"\(name)\"}".utf8)
    }

    public static func badRequest(_ message: String) -> HTTPFailure { HTTPFailure(400, "bad-request", message) }
    public static let forbiddenHost = HTTPFailure(
        403, "forbidden-host", "the Host header names no address placed-web serves")
    public static let forbiddenOrigin = HTTPFailure(
        403, "forbidden-origin", "a POST must come from the kiosk page's own origin")
    public static let badToken = HTTPFailure(
        403, "bad-token", "the X-Placed-Token header is missing or was not issued with a page; reload the page")
    public static let notFound = HTTPFailure(404, "not-found", "no such path")
    public static func methodNotAllowed(_ allowed: [String]) -> HTTPFailure {
        HTTPFailure(
            405, "method-not-allowed", "use \(allowed.joined(separator: " or "))",
            headers: [HTTPHeader("Allow", allowed.joined(separator: ", "))])
    }
    public static func tooLarge(limit: Int) -> HTTPFailure {
        HTTPFailure(413, "too-large", "a request body is at most \(limit) bytes")
    }
    public static let unsupportedMediaType = HTTPFailure(
        415, "unsupported-media-type", "the body must be application/json")
    public static func tooManyEventClients(limit: Int) -> HTTPFailure {
        HTTPFailure(
            503, "too-many-event-clients", "at most \(limit) pages may follow the events at once",
            headers: [HTTPHeader("Retry-After", "10")])
    }
    public static func placedUnreachable(_ reason: String) -> HTTPFailure {
        HTTPFailure(
            503, "placed-unreachable", "placed is unreachable: \(reason)", headers: [HTTPHeader("Retry-After", "2")])
    }
    public static let placedTimedOut = HTTPFailure(504, "placed-timed-out", "placed did not answer in time")
}

/// One response header.
public struct HTTPHeader: Equatable, Sendable {
    public let name: String
    public let value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}
