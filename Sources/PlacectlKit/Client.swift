import PlacedCore
import PlacedJSON
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A connection to placed, over its varlink socket or D-Bus. Every result is a JSON object shaped
/// like the varlink method's reply (`etc/io.placed.Places.varlink`), whichever transport carried
/// it, so output and `--json` are the same on both.
public protocol PlacesClient: AnyObject {
    /// The reader's language ("sv", "fi_FI.UTF-8"), sent with every call whose reply names places
    /// (`Current`, `Rank`, `Watch`, `Map`); nil: placed's `Language=`.
    var language: String? { get set }
    /// The keys of each place (`--fields`), sent with `Current`, `Rank`, `Watch` and `Details`; nil: the
    /// standard keys (every key for `Details`).
    var fields: [String]? { get set }
    /// `Current`: `generation, stale, location?, places`.
    func current(limit: Int?) throws(ClientError) -> [String: JSON]
    /// `Rank`: `places`.
    func rank(latitude: Double, longitude: Double, accuracy: Double?, limit: Int?) throws(ClientError)
        -> [String: JSON]
    /// `Details`: `place`, one place by id, its opening hours evaluated at `time` (RFC 3339; nil: now).
    func details(id: String, time: String?) throws(ClientError) -> [String: JSON]
    /// `Select`: `marker`.
    func select(id: String) throws(ClientError) -> [String: JSON]
    /// `Refresh`: reloads the places if their file changed and ranks again; needs group placed.
    func refresh() throws(ClientError)
    /// `History`: `markers`, newest first.
    func history(limit: Int?, before: Int?) throws(ClientError) -> [String: JSON]
    /// `Status`: `source, location?, generation, stale, places, distance_filter, marker?`.
    func status() throws(ClientError) -> [String: JSON]
    /// `Watch`: calls `onUpdate` with the current state, then with each ranking and marker, until
    /// SIGINT or SIGTERM (then it returns) or the daemon ends the stream (then it throws).
    func watch(_ onUpdate: @escaping ([String: JSON]) -> Void) throws(ClientError)
}

/// Where placed is reached.
public enum Endpoint: Equatable, Sendable {
    case socket(path: String)
    case bus(Bus)

    public enum Bus: Equatable, Sendable {
        /// `$DBUS_SYSTEM_BUS_ADDRESS` or the well-known system bus.
        case system
        /// The user's session bus.
        case user
        case address(String)
    }

    public static let defaultSocketPath = "/run/placed/io.placed.Places"

    /// From `--socket PATH`, `--bus`, `--system`, `--user`, `--address ADDR` (each of the last three
    /// implies `--bus`).
    public init(_ arguments: ParsedArguments) throws(UsageError) {
        let busChoices = ["system", "user", "address"].filter {
            arguments.has($0) || arguments.value($0) != nil
        }
        if busChoices.count > 1 {
            throw UsageError(
                "choose one bus: " + busChoices.map { "--\($0)" }.joined(separator: " or "),
                command: arguments.command)
        }
        let wantsBus = arguments.has("bus") || !busChoices.isEmpty
        if wantsBus {
            if arguments.value("socket") != nil {
                throw UsageError("--socket is for varlink; it cannot go with D-Bus", command: arguments.command)
            }
            if let address = arguments.value("address") {
                guard !address.isEmpty else {
                    throw UsageError("--address needs a bus address", command: arguments.command)
                }
                self = .bus(.address(address))
            } else {
                self = .bus(arguments.has("user") ? .user : .system)
            }
        } else {
            let path = arguments.value("socket") ?? Endpoint.defaultSocketPath
            guard !path.isEmpty else { throw UsageError("--socket needs a path", command: arguments.command) }
            self = .socket(path: path)
        }
    }

    /// For messages: `socket /run/placed/io.placed.Places`, `the system bus`.
    public var description: String {
        switch self {
        case .socket(let path): "socket \(path)"
        case .bus(.system): "the system bus"
        case .bus(.user): "the user bus"
        case .bus(.address(let address)): "bus \(address)"
        }
    }

    /// Connects. Throws `unreachable` with a hint when placed is not there.
    public func connect(timeout: Double = 15, language: String? = nil) throws(ClientError) -> any PlacesClient {
        let client: any PlacesClient =
            switch self {
            case .socket(let path): try VarlinkClient(socketPath: path, timeout: timeout)
            case .bus(let bus): try BusClient(bus: bus, timeout: timeout)
            }
        client.language = language
        return client
    }
}

/// Why a request failed: the daemon said no (named error), or it could not be reached or understood.
public enum ClientError: Error, Equatable, CustomStringConvertible {
    /// A named error reply: `io.placed.Places.UnknownPlace {"id": "x"}`, or a D-Bus error with the
    /// daemon's own message.
    case daemon(name: String, parameters: [String: JSON], message: String?)
    /// Connecting failed: no socket, nobody listening, no permission, no bus.
    case unreachable(endpoint: String, reason: String, hint: String?)
    case timedOut(endpoint: String, seconds: Double)
    /// The daemon closed the connection before it answered.
    case disconnected(endpoint: String)
    /// A reply that is not what the protocol promises.
    case protocolViolation(String)
    /// A system or sd-bus call failed mid-conversation.
    case system(SystemError)
    /// The request cannot be made over this transport.
    case unsupported(String)

    /// The qualified error name, for a daemon error.
    public var name: String? {
        if case .daemon(let name, _, _) = self { return name }
        return nil
    }

    public var description: String {
        switch self {
        case let .daemon(name, parameters, message):
            return "\(message ?? ClientError.explain(name, parameters)) (\(name))"
        case let .unreachable(endpoint, reason, hint):
            return (hint.map { "\($0) " } ?? "") + "\(endpoint): \(reason)"
        case let .timedOut(endpoint, seconds):
            return "no answer from placed on \(endpoint) within \(seconds.formatted(decimals: 0)) s"
        case let .disconnected(endpoint):
            return "placed closed the connection on \(endpoint)"
        case let .protocolViolation(what):
            return "unexpected reply from placed: \(what)"
        case let .system(error):
            return error.description
        case let .unsupported(what):
            return what
        }
    }

    /// A sentence for a varlink error reply, which carries a name and parameters but no text.
    static func explain(_ name: String, _ parameters: [String: JSON]) -> String {
        func text(_ key: String) -> String {
            guard let value = parameters[key] else { return "?" }
            if let string = value.string { return string }
            if let number = value.double { return number.rounded() == number ? String(Int(number)) : "\(number)" }
            return value.description
        }
        let member = name.split(separator: ".").last.map(String.init) ?? name
        switch (name.hasPrefix("org.varlink.service.") ? "varlink." : "") + member {
        case "UnknownPlace": return "no place has the id '\(text("id"))'"
        case "NotInRanking": return "place '\(text("id"))' is not in the current ranking or the last few"
        case "InvalidLimit":
            return parameters["maximum"] != nil
                ? "invalid limit \(text("limit")): ask for 1 to \(text("maximum"))"
                : "invalid limit \(text("limit"))"
        case "InvalidPosition":
            // Without coordinates it was the accuracy that was wrong.
            guard parameters["latitude"]?.double != nil else { return "invalid accuracy: a number of metres >= 0" }
            return "invalid position \(text("latitude")),\(text("longitude")): "
                + "latitude within ±90, longitude within ±180"
        case "PermissionDenied" where parameters["operation"] != nil:
            return "permission denied: \(text("operation")) needs \(text("requirement"))"
        case "PermissionDenied", "varlink.PermissionDenied":
            return "permission denied: reading needs root or membership of group placed or placed-read, "
                + "selecting and refreshing root or group placed"
        case "StoreFailed": return text("reason")
        case "NoPlaces": return "no places are loaded; import some with placectl import"
        case "InvalidRadius": return "invalid radius \(text("radius")) m: placed draws at most \(text("maximum")) m"
        case "TooManyFeatures": return "more than \(text("maximum")) map features there: ask for a smaller radius"
        case "NoMapLayer": return "the places file has no map layer: import it again without --no-map"
        case "InvalidField" where text("field") == "": return "no fields asked for: name at least one, or * for all"
        case "InvalidField": return "no place field is named '\(text("field"))'"
        case "InvalidTime":
            return "invalid time '\(text("time"))': an RFC 3339 instant with a zone, e.g. 2026-12-06T18:30:00+02:00"
        case "varlink.InvalidParameter": return "placed rejected the parameter '\(text("parameter"))'"
        case "varlink.MethodNotFound", "varlink.MethodNotImplemented":
            return "this placed does not offer \(text("method"))"
        case "varlink.InterfaceNotFound": return "this placed does not offer the interface \(text("interface"))"
        case "varlink.ExpectedMore": return "placed expected a streaming call"
        default:
            return parameters.isEmpty
                ? "placed answered an error" : "placed answered an error \(JSON.object(parameters))"
        }
    }
}

/// The event loop of a watch: it ends with status 0 on SIGINT or SIGTERM. sd-event reads those
/// signals from a signalfd, so they are blocked while the loop lives; the caller's signal mask
/// comes back when it is released.
final class WatchLoop {
    let loop: EventLoop
    private var signals: [EventSource] = []
    private var savedMask = sigset_t()

    init() throws(ClientError) {
        pthread_sigmask(SIG_SETMASK, nil, &savedMask)
        do {
            loop = try EventLoop()
            for signal in [SIGINT, SIGTERM] {
                signals.append(try loop.onSignal(signal) { [unowned loop] in loop.exit(0) })
            }
        } catch {
            pthread_sigmask(SIG_SETMASK, &savedMask, nil)
            throw .system(error)
        }
    }

    deinit {
        signals.forEach { $0.cancel() }
        pthread_sigmask(SIG_SETMASK, &savedMask, nil)
    }

    /// Runs until a signal (0) or `exit(_:)`; returns the exit code.
    @discardableResult
    func run() throws(ClientError) -> Int32 {
        do {
            return try loop.run()
        } catch {
            throw .system(error)
        }
    }

    func exit(_ status: Int32) { loop.exit(status) }
}
