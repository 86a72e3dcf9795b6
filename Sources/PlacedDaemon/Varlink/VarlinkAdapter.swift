import PlacedCore
import PlacedJSON
import PlacedSystem
import PlacedVarlink
import PlacedWire

/// The `io.placed.Places` varlink interface on the daemon's Unix socket. Each method reads its
/// parameters (wrong types are the client's InvalidParameter), calls the service's operation and
/// replies; watchers get every ranking and marker as it happens.
final class VarlinkAdapter: DaemonSubscriber {
    static let interfaceName = "io.placed.Places"
    static let watch = interfaceName + ".Watch"

    private unowned let service: PlacesService
    let server: VarlinkServer
    private let loop: EventLoop
    /// After a Map reply or a batch of own places.
    private lazy var heapRelease = IdleHeapRelease(loop: loop)
    /// The fleet export's status for `Status` (`fleet`), when it is configured.
    var fleetStatus: (() -> Record?)?

    /// Where the server listens: a socket placed binds itself, or one systemd passed.
    enum Listener {
        case path(String)
        case passed(SocketActivation.Passed)
    }

    init(service: PlacesService, loop: EventLoop, listener: Listener) throws {
        self.service = service
        self.loop = loop
        var configuration = VarlinkServer.Configuration(
            vendor: "placed", product: "placed", version: placedVersion, url: "https://placed.invalid",
            errorInterface: Self.interfaceName)
        configuration.maxQueuedBytes = Self.maxQueuedBytes
        switch listener {
        case .path(let path):
            // Anyone may connect, as to systemd's own varlink services: placed checks each peer's
            // credentials (SO_PEERCRED) and answers the others PermissionDenied by name.
            server = try VarlinkServer(loop: loop, path: path, mode: 0o666, configuration: configuration)
        case .passed(let socket):
            server = try VarlinkServer(loop: loop, listening: socket.fd, configuration: configuration)
        }
        server.register(VarlinkInterface(description: InterfaceDescriptions.varlink)!) { [unowned self] call in
            try handle(call)
        }
        server.limits = { [unowned service] credentials in
            if (try? service.authorize(credentials, to: .write, "")) != nil { return Self.writerLimits }
            if (try? service.authorize(credentials, to: .read, "")) != nil { return Self.readerLimits }
            return nil
        }
    }

    /// A writer's PutPlaces of 10,000 own places is about 2.5 MB, and its OwnPlaces reply the same:
    /// writers may send 16 MiB, and readers and writers queue 8 MiB (an OwnPlaces reply of about
    /// 30,000 sites); everyone else keeps the server's 64 KiB and `maxQueuedBytes`. A stalled watcher
    /// holds at most that much, of broadcasts every watcher shares.
    static let writerLimits = VarlinkServer.Limits(maxMessageSize: 16 << 20, maxQueuedBytes: 8 << 20)
    static let readerLimits = VarlinkServer.Limits(maxMessageSize: 64 << 10, maxQueuedBytes: 8 << 20)

    /// Serves on the socket systemd passed (placed.socket), else on a socket of its own at `socketPath`.
    static func start(service: PlacesService, loop: EventLoop, socketPath: String) throws -> VarlinkAdapter {
        let passed: SocketActivation.Passed?
        do {
            passed = try SocketActivation.varlinkSocket()
        } catch {
            throw StartupError("cannot serve varlink: \(error)")
        }
        let adapter: VarlinkAdapter
        do {
            adapter = try VarlinkAdapter(
                service: service, loop: loop, listener: passed.map { .passed($0) } ?? .path(socketPath))
        } catch {
            throw StartupError("cannot serve varlink on \(passed?.path ?? socketPath): \(error)")
        }
        if let passed {
            Log.info("varlink: serving on \(passed.path), the socket systemd passed")
            if passed.path != socketPath {
                Log.warning("Socket=\(socketPath) is not used: systemd passed \(passed.path)")
            }
        }
        return adapter
    }

    func close() { server.close() }

    /// Each client's backlog of unsent replies, past which it is dropped. A Map reply must fit whole:
    /// the 2,923 features within 1000 m of Helsinki's centre are 706 kB (242 B each; the bundled
    /// extract's whole layer, 3,082 features, 742 kB), so the 5,000 `Daemon.maximumMapFeatures` lets
    /// through come to about 1.2 MB, of which the kernel's socket buffer takes about 200 kB at once.
    /// 2 MiB holds that with room to spare, so a reader that reads at any pace gets its map; one that
    /// stops reading is still dropped, later than the server's default 256 KiB (a few hundred
    /// rankings). Bounding the reply to what the default queue holds instead would refuse a 1000 m
    /// map of a city centre. Only readers (root, placed, placed-read) get a Map reply, so only they
    /// can make placed hold that much per connection; stalled watchers queue broadcasts, whose bytes
    /// all watchers share, so a thousand of them still hold about one queue's worth in all.
    /// (Tests/integration/test_varlink.py: the largest reply reaches a slow reader.)
    static let maxQueuedBytes = 2 * 1024 * 1024

    // MARK: Methods

    private func handle(_ call: VarlinkCall) throws {
        do {
            switch call.member {
            case "Current":
                try call.rejectUnknownParameters(allowing: ["limit", "language", "fields"])
                let places = try placeRecords(of: call)
                let ranking = try service.current(limit: try call.optional("limit", \.int), by: call.credentials)
                let language = places.language
                var parameters = rankingParameters(ranking, places: places)
                parameters.set("visit", openVisit(language: language))
                call.reply(parameters)
            case "Rank":
                try call.rejectUnknownParameters(
                    allowing: ["latitude", "longitude", "accuracy", "limit", "language", "fields"])
                let records = try placeRecords(of: call)
                let places = try service.rank(
                    latitude: try call.required("latitude", \.double),
                    longitude: try call.required("longitude", \.double),
                    accuracy: try call.optional("accuracy", \.double), limit: try call.optional("limit", \.int),
                    by: call.credentials)
                var parameters = Record()
                parameters.set("places", .records(places.map(records.record)))
                call.reply(parameters)
            case "Details":
                try call.rejectUnknownParameters(allowing: ["id", "fields", "language", "time"])
                let id = try call.required("id", \.string)
                var records = try placeRecords(of: call, default: .all)
                records.time = try ServiceError.checkTime(try call.optional("time", \.string), now: service.clock.wall)
                let place = try service.place(id: id, by: call.credentials)
                var parameters = Record()
                parameters.set("place", .record(records.record(place)))
                call.reply(parameters)
            case "Map":
                try call.rejectUnknownParameters(allowing: ["latitude", "longitude", "radius", "language"])
                let language = try language(of: call)
                let features = try service.map(
                    latitude: try call.required("latitude", \.double),
                    longitude: try call.required("longitude", \.double),
                    radius: try call.required("radius", \.double), by: call.credentials)
                try call.reply(["features": .array(features.map { $0.geoJSON(language: language) })])
                heapRelease.schedule()
            case "Select":
                try call.rejectUnknownParameters(allowing: ["id"])
                let marker = try service.select(id: try call.required("id", \.string), by: call.credentials)
                var parameters = Record()
                parameters.set("marker", .record(.marker(marker)))
                call.reply(parameters)
            case "Refresh":
                try call.rejectUnknownParameters(allowing: [])
                try service.refresh(by: call.credentials)
                try call.reply()
            case "History":
                try call.rejectUnknownParameters(allowing: ["limit", "before"])
                let markers = try service.history(
                    limit: try call.optional("limit", \.int),
                    before: try call.optional("before", \.int).map(Int64.init),
                    by: call.credentials)
                var parameters = Record()
                parameters.set("markers", .records(markers.map(Record.marker)))
                call.reply(parameters)
            case "Status":
                try call.rejectUnknownParameters(allowing: [])
                try service.authorize(call.credentials, to: .read, "Status")
                call.reply(statusParameters())
            case "Watch":
                try call.rejectUnknownParameters(allowing: ["language", "fields"])
                try call.requireMore()
                let places = try placeRecords(of: call)
                let language = places.language
                var first = rankingParameters(try service.current(limit: nil, by: call.credentials), places: places)
                first.set("marker", service.marker.map { .record(.marker($0)) })
                first.set("visit", openVisit(language: language))
                call.reply(first, continues: true)
            case "PutPlaces":
                try call.rejectUnknownParameters(allowing: ["places"])
                let features = try call.required("places", \.array)
                let places: [OwnPlace]
                do {
                    places = try OwnPlace.readFeatures(features)
                } catch {
                    throw ServiceError.invalidOwnPlace(error)
                }
                let count = try service.putPlaces(places, by: call.credentials)
                try call.reply(["count": .number(Double(count))])
                heapRelease.schedule()  // a batch's parse is megabytes of short-lived values, as a Map reply
            case "DeletePlaces":
                try call.rejectUnknownParameters(allowing: ["ids"])
                var ids: [String] = []
                for value in try call.required("ids", \.array) {
                    guard let id = value.string else {
                        throw ServiceError.invalidOwnPlace(
                            OwnPlaceError(feature: ids.count, id: nil, .badID("\(value)")))
                    }
                    ids.append(id)
                }
                let count = try service.deletePlaces(ids, by: call.credentials)
                try call.reply(["count": .number(Double(count))])
            case "OwnPlaces":
                try call.rejectUnknownParameters(allowing: [])
                let places = try service.ownPlaces(by: call.credentials)
                try call.reply(["places": .array(places.map(\.geoJSON))])
                heapRelease.schedule()
            default:
                throw VarlinkError.methodNotFound(call.method)
            }
        } catch let error as ServiceError {
            throw VarlinkError(Self.interfaceName + "." + error.name, parameters(of: error))
        }
    }

    /// The language a call's names are given in: its `language`, else `Language=`.
    private func language(of call: VarlinkCall) throws(VarlinkError) -> String? {
        service.language(asked: try call.optional("language", \.string))
    }

    /// How a call's places are written: its language and `fields` (absent: `default`), hours evaluated now.
    /// A mask that names an unknown field is `InvalidField`, checked before anything else is done.
    private func placeRecords(of call: VarlinkCall, default: FieldMask = .standard) throws -> PlaceRecords {
        let names = try call.optional("fields") { json in
            json.array.flatMap { items in
                let names = items.compactMap(\.string)
                return names.count == items.count ? names : nil
            }
        }
        return PlaceRecords(
            language: try language(of: call), fields: try FieldMask.parse(names, default: `default`),
            time: Int(service.clock.wall.rounded(.down)), service: service)
    }

    // A reply's parameters are a record too: one writer for every reply that carries records.

    /// `places`: how the ranking's places are written; nil: the reply carries none.
    private func rankingParameters(_ ranking: Ranking?, places: PlaceRecords?) -> Record {
        var parameters = Record()
        parameters.set("generation", .uint(ranking?.generation ?? 0))
        parameters.set("stale", .bool(ranking?.isStale ?? false))
        parameters.set("location", service.location.map { .record(.location($0, now: service.now)) })
        if let places {
            parameters.set("places", .records((ranking?.places ?? []).map(places.record)))
        }
        return parameters
    }

    private func statusParameters() -> Record {
        var parameters = Record()
        parameters.set("source", .string(service.sourceState.rawValue))
        parameters.set("generation", .uint(service.generation))
        parameters.set("stale", .bool(service.latestRanking?.isStale ?? false))
        parameters.set("places", .int(Int64(service.placeCount)))
        parameters.set("distance_filter", .double(service.distanceFilter))
        parameters.set("location", service.location.map { .record(.location($0, now: service.now)) })
        parameters.set("marker", service.marker.map { .record(.marker($0)) })
        parameters.set("visit", openVisit(language: service.language))
        parameters.set("fleet", fleetStatus?().map(Record.Value.record))
        return parameters
    }

    /// The open visit's record, with its place so far named for a reader of `language`.
    private func openVisit(language: String?) -> Record.Value? {
        service.openVisit.map {
            .record(.visit($0.visit, clock: service.clock, place: $0.place, language: language))
        }
    }

    private func parameters(of error: ServiceError) -> [String: JSON] {
        switch error {
        case let .unknownPlace(id), let .notInRanking(id): ["id": .string(id)]
        case let .invalidLimit(limit, maximum): ["limit": .number(Double(limit)), "maximum": .number(Double(maximum))]
        case let .invalidPosition(lat, lon): ["latitude": .finite(lat), "longitude": .finite(lon)]
        case let .invalidAccuracy(lat, lon, accuracy):
            ["latitude": .finite(lat), "longitude": .finite(lon), "accuracy": .finite(accuracy)]
        case let .storeFailed(reason): ["reason": .string(reason)]
        case let .permissionDenied(operation, requirement):
            ["operation": .string(operation), "requirement": .string(requirement)]
        case let .invalidRadius(radius, maximum): ["radius": .finite(radius), "maximum": .number(maximum)]
        case let .tooManyFeatures(maximum): ["maximum": .number(Double(maximum))]
        case let .invalidField(field): ["field": .string(field)]
        case let .invalidTime(time): ["time": .string(time)]
        case .noPlaces, .noMapLayer: [:]
        case let .invalidOwnPlace(error): Self.parameters(of: error)
        }
    }

    /// InvalidOwnPlace's: the whole message, and the feature's number and id when known.
    private static func parameters(of error: OwnPlaceError) -> [String: JSON] {
        var fields: [String: JSON] = ["reason": .string(error.description)]
        if let feature = error.feature { fields["feature"] = .number(Double(feature)) }
        if let id = error.id { fields["id"] = .string(id) }
        return fields
    }

    // MARK: Broadcasts

    func handle(_ event: DaemonEvent, from service: PlacesService) {
        switch event {
        case .ranked(let ranking):
            broadcastRanking(ranking)
        case .markerPlaced(let marker):
            var parameters = rankingParameters(service.latestRanking, places: nil)
            parameters.set("marker", .record(.marker(marker)))
            broadcast(parameters)
        case .sourceChanged:
            // Watchers learn when the ranking turns stale or fresh without a new generation.
            broadcast(rankingParameters(service.latestRanking, places: nil))
        case let .visitStarted(visit, ranking):
            broadcastNamed { language in
                var parameters = rankingParameters(service.latestRanking, places: nil)
                parameters.set(
                    "visit", .record(.visit(visit, clock: service.clock, ranking: ranking, language: language)))
                return parameters
            }
        case let .visitEnded(visit, place, selection):
            broadcastNamed { language in
                var parameters = rankingParameters(service.latestRanking, places: nil)
                parameters.set(
                    "visit",
                    .record(
                        .visit(visit, clock: service.clock, place: place, selection: selection, language: language)))
                return parameters
            }
        case let .boundaryCrossed(crossing):
            broadcastNamed { language in
                var parameters = rankingParameters(service.latestRanking, places: nil)
                parameters.set(
                    "transition", .record(.transition(crossing, clock: service.clock, language: language)))
                return parameters
            }
        case .located, .moved, .distanceFilterChanged:
            break
        }
    }

    /// A ranking goes to each watcher with its places written as its Watch asked (language and fields),
    /// each group of watchers that asked alike getting one message encoded once.
    private func broadcastRanking(_ ranking: Ranking) {
        let time = Int(service.clock.wall.rounded(.down))
        var groups: [RankingAudience: (records: PlaceRecords, streams: [VarlinkCall])] = [:]
        for stream in server.openStreams(of: Self.watch) {
            let language = service.language(asked: stream.parameters["language"]?.string)
            // The mask was checked when the Watch began.
            let names = stream.parameters["fields"]?.array?.compactMap(\.string)
            let fields = (try? FieldMask.parse(names)) ?? .standard
            let key = RankingAudience(names: language.map(LocalizedName.candidates) ?? [], fields: fields.fields)
            groups[key, default: (PlaceRecords(language: language, fields: fields, time: time, service: service), [])]
                .streams.append(stream)
        }
        for (records, streams) in groups.values {
            server.broadcast(rankingParameters(ranking, places: records), to: streams)
        }
    }

    /// Watchers whose rankings read the same: the name keys their language tries, and their fields.
    private struct RankingAudience: Hashable {
        var names: [String]
        var fields: Set<String>?
    }

    private func broadcast(_ parameters: Record) {
        server.broadcast(parameters, to: server.openStreams(of: Self.watch))
    }

    /// What names places (a ranking, a visit) goes to each watcher with the names in its language:
    /// its Watch's own, else `Language=` as it is now. Watchers are grouped by the name keys their
    /// language tries ("sv_FI.UTF-8" and "sv-fi" alike), and each group's message is built and
    /// encoded once.
    private func broadcastNamed(_ parameters: (_ language: String?) -> Record) {
        var groups: [[String]: (language: String?, streams: [VarlinkCall])] = [:]
        for stream in server.openStreams(of: Self.watch) {
            let language = service.language(asked: stream.parameters["language"]?.string)
            let key = language.map(LocalizedName.candidates) ?? []
            groups[key, default: (language, [])].streams.append(stream)
        }
        for (language, streams) in groups.values {
            server.broadcast(parameters(language), to: streams)
        }
    }
}

extension JSON {
    /// An error's number: JSON has no NaN or infinity.
    fileprivate static func finite(_ value: Double) -> JSON { value.isFinite ? .number(value) : .null }
}
