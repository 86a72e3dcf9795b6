import PlacedCore
import PlacedJSON
import PlacedSystem
import PlacedVarlink

/// The `io.placed.Places` varlink interface on the daemon's Unix socket. Each method reads its
/// parameters (wrong types are the client's InvalidParameter), calls the daemon operation and
/// replies; watchers get every ranking and marker as it happens.
final class VarlinkService: DaemonObserver {
    static let interfaceName = "io.placed.Places"
    static let watch = interfaceName + ".Watch"

    private unowned let daemon: Daemon
    let server: VarlinkServer

    /// Where the server listens: a socket placed binds itself, or one systemd passed.
    enum Listener {
        case path(String)
        case passed(SocketActivation.Passed)
    }

    init(daemon: Daemon, listener: Listener) throws {
        self.daemon = daemon
        let configuration = VarlinkServer.Configuration(
            vendor: "placed", product: "placed", version: placedVersion, url: "https://placed.invalid",
            errorInterface: Self.interfaceName)
        switch listener {
        case .path(let path):
            server = try VarlinkServer(loop: daemon.loop, path: path, mode: 0o660, configuration: configuration)
        case .passed(let socket):
            server = try VarlinkServer(loop: daemon.loop, listening: socket.fd, configuration: configuration)
        }
        server.register(VarlinkInterface(description: InterfaceDescriptions.varlink)!) { [unowned self] call in
            try handle(call)
        }
        daemon.addObserver(self)
    }

    func close() { server.close() }

    // MARK: Methods

    private func handle(_ call: VarlinkCall) throws {
        do {
            switch call.member {
            case "Current":
                try call.rejectUnknownParameters(allowing: ["limit"])
                let ranking = try daemon.current(limit: try call.optional("limit", \.int))
                try call.reply(rankingParameters(ranking, places: true))
            case "Rank":
                try call.rejectUnknownParameters(allowing: ["latitude", "longitude", "accuracy", "limit"])
                let places = try daemon.rank(
                    latitude: try call.required("latitude", \.double),
                    longitude: try call.required("longitude", \.double),
                    accuracy: try call.optional("accuracy", \.double), limit: try call.optional("limit", \.int))
                try call.reply(["places": .array(places.map { Record.place($0).json })])
            case "Select":
                try call.rejectUnknownParameters(allowing: ["id"])
                let marker = try daemon.select(id: try call.required("id", \.string), by: call.credentials)
                try call.reply(["marker": Record.marker(marker).json])
            case "Refresh":
                try call.rejectUnknownParameters(allowing: [])
                try daemon.refresh(by: call.credentials)
                try call.reply()
            case "History":
                try call.rejectUnknownParameters(allowing: ["limit", "before"])
                let markers = try daemon.history(
                    limit: try call.optional("limit", \.int), before: try call.optional("before", \.int).map(Int64.init)
                )
                try call.reply(["markers": .array(markers.map { Record.marker($0).json })])
            case "Status":
                try call.rejectUnknownParameters(allowing: [])
                try call.reply(statusParameters())
            case "Watch":
                try call.rejectUnknownParameters(allowing: [])
                try call.requireMore()
                var first = rankingParameters(try daemon.current(limit: nil), places: true)
                if let marker = daemon.marker { first["marker"] = Record.marker(marker).json }
                try call.reply(first, continues: true)
            default:
                throw VarlinkError.methodNotFound(call.method)
            }
        } catch let error as ServiceError {
            throw VarlinkError(Self.interfaceName + "." + error.name, parameters(of: error))
        }
    }

    private func rankingParameters(_ ranking: Ranking?, places: Bool) -> [String: JSON] {
        var parameters: [String: JSON] = [
            "generation": .number(Double(ranking?.generation ?? 0)),
            "stale": .bool(ranking?.isStale ?? false),
        ]
        if let fix = daemon.location { parameters["location"] = Record.location(fix, now: daemon.loop.now).json }
        if places { parameters["places"] = .array((ranking?.places ?? []).map { Record.place($0).json }) }
        return parameters
    }

    private func statusParameters() -> [String: JSON] {
        var parameters: [String: JSON] = [
            "source": .string(daemon.sourceState.rawValue),
            "generation": .number(Double(daemon.generation)),
            "stale": .bool(daemon.latestRanking?.isStale ?? false),
            "places": .number(Double(daemon.placeCount)),
            "distance_filter": .number(daemon.distanceFilter),
        ]
        if let fix = daemon.location { parameters["location"] = Record.location(fix, now: daemon.loop.now).json }
        if let marker = daemon.marker { parameters["marker"] = Record.marker(marker).json }
        return parameters
    }

    private func parameters(of error: ServiceError) -> [String: JSON] {
        switch error {
        case let .unknownPlace(id), let .notInRanking(id): ["id": .string(id)]
        case let .invalidLimit(limit, maximum): ["limit": .number(Double(limit)), "maximum": .number(Double(maximum))]
        case let .invalidPosition(lat, lon): ["latitude": .finite(lat), "longitude": .finite(lon)]
        case let .invalidAccuracy(lat, lon, accuracy):
            ["latitude": .finite(lat), "longitude": .finite(lon), "accuracy": .finite(accuracy)]
        case let .storeFailed(reason): ["reason": .string(reason)]
        case .permissionDenied, .noPlaces: [:]
        }
    }

    // MARK: Broadcasts

    func daemon(_ daemon: Daemon, published ranking: Ranking) {
        _ = try? server.broadcast(rankingParameters(ranking, places: true), toStreamsOf: Self.watch)
    }

    func daemon(_ daemon: Daemon, placed marker: Marker) {
        var parameters = rankingParameters(daemon.latestRanking, places: false)
        parameters["marker"] = Record.marker(marker).json
        _ = try? server.broadcast(parameters, toStreamsOf: Self.watch)
    }

    func daemon(_ daemon: Daemon, changed properties: Set<DaemonProperty>) {
        // Watchers learn when the ranking turns stale or fresh without a new generation.
        guard properties.contains(.sourceState) else { return }
        _ = try? server.broadcast(rankingParameters(daemon.latestRanking, places: false), toStreamsOf: Self.watch)
    }
}

extension JSON {
    /// JSON has no NaN or infinity.
    static func finite(_ value: Double) -> JSON { value.isFinite ? .number(value) : .null }
}

extension Record {
    var json: JSON {
        var object: [String: JSON] = [:]
        for (key, value) in fields { object[key] = value.json }
        return .object(object)
    }
}

extension Record.Value {
    var json: JSON {
        switch self {
        case let .string(s): .string(s)
        case let .double(d): .finite(d)
        case let .int(i): .number(Double(i))
        case let .uint(u): .number(Double(u))
        case let .bool(b): .bool(b)
        case let .record(r): r.json
        case let .records(rs): .array(rs.map(\.json))
        }
    }
}
