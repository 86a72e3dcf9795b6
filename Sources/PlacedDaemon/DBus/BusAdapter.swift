import PlacedCore
import PlacedJSON
import PlacedSystem
import PlacedWire

/// The `io.placed.Placed1` D-Bus object: the same operations as the varlink interface, sd-bus
/// attached to the daemon's event loop and dispatching through the object's vtable. Every change of
/// a property is announced with PropertiesChanged; rankings and markers with PlacesChanged and
/// MarkerPlaced.
final class BusAdapter: DaemonSubscriber {
    static let name = "io.placed.Placed1"
    static let path = "/io/placed/Placed1"
    static let errorPrefix = "io.placed.Placed1.Error."

    private unowned let service: PlacesService
    private let loop: EventLoop
    private let bus: Bus
    private let object: BusObject
    /// Callers' credentials by unique name: the bus driver reports what it took when the connection
    /// was made, and a unique name is never reused, so asking once per connection is asking enough.
    private var callers: [String: Credentials] = [:]
    private static let maximumCallers = 1024
    /// The fleet export's status for the `Fleet` property (empty when it is off).
    var fleetStatus: (() -> Record?)?

    init(service: PlacesService, loop: EventLoop, address: Bus.Address) throws {
        self.service = service
        self.loop = loop
        bus = try Bus(address)
        object = BusObject(path: Self.path, interface: Self.name)
        declareMembers()
        try bus.register(object)
        try bus.attach(to: loop)
        // Without its connection placed would go on, unreachable over D-Bus and warning at every fix.
        try bus.exitLoopOnDisconnect()
        try bus.requestName(Self.name)
    }

    /// False once the bus has gone away, which ends the event loop with status 1.
    var isConnected: Bool { bus.isOpen }

    /// The members, in the order introspection lists them (etc/dbus-1/interfaces/io.placed.Placed1.xml
    /// is generated from the live object by scripts/gen-bus-introspection).
    private func declareMembers() {
        let places = BusArgument("places", "aa{sv}")
        // GetPlaces and Rank name places in Language=; their *Localized forms take the reader's
        // language as a last argument ("": Language=, "C": the name tags), since D-Bus has no
        // optional arguments and a method's signature never changes once shipped.
        let getPlaces = { [unowned self] (call: BusMethodCall, language: String?) throws(BusError) -> [BusValue] in
            let limit = try call.arguments()[0].uint32!
            let caller = try credentials(of: call)
            let ranking = try serve { try service.current(limit: limit == 0 ? nil : Int(limit), by: caller) }
            let language = service.language(asked: language)
            return [
                .uint64(ranking?.generation ?? 0),
                .dictionaries((ranking?.places ?? []).map { $0.busRecord(language: language) }),
            ]
        }
        object.addMethod(
            "GetPlaces", arguments: [BusArgument("limit", "u")], returns: [BusArgument("generation", "t"), places]
        ) { call in try getPlaces(call, nil) }
        object.addMethod(
            "GetPlacesLocalized", arguments: [BusArgument("limit", "u"), BusArgument("language", "s")],
            returns: [BusArgument("generation", "t"), places]
        ) { call in try getPlaces(call, try call.arguments()[1].string!) }
        let rank = { [unowned self] (call: BusMethodCall, language: String?) throws(BusError) -> [BusValue] in
            let arguments = try call.arguments()
            let accuracy = arguments[2].double!, limit = arguments[3].uint32!
            let caller = try credentials(of: call)
            let ranked = try serve {
                try service.rank(
                    latitude: arguments[0].double!, longitude: arguments[1].double!,
                    accuracy: accuracy.isNaN ? nil : accuracy, limit: limit == 0 ? nil : Int(limit), by: caller)
            }
            let language = service.language(asked: language)
            return [.dictionaries(ranked.map { $0.busRecord(language: language) })]
        }
        let position = [
            BusArgument("latitude", "d"), BusArgument("longitude", "d"), BusArgument("accuracy", "d"),
            BusArgument("limit", "u"),
        ]
        object.addMethod("Rank", arguments: position, returns: [places]) { call in try rank(call, nil) }
        object.addMethod(
            "RankLocalized", arguments: position + [BusArgument("language", "s")], returns: [places]
        ) { call in try rank(call, try call.arguments()[4].string!) }
        declareMethodsWithOptions(places: places)
        declareOwnPlaceMethods()
        object.addMethod("Select", arguments: [BusArgument("id", "s")], returns: [BusArgument("marker", "a{sv}")]) {
            [unowned self] call in
            let id = try call.arguments()[0].string!
            let caller = try credentials(of: call)
            let marker = try serve { try service.select(id: id, by: caller) }
            return [Record.marker(marker).bus]
        }
        object.addMethod("Refresh", arguments: [], returns: []) { [unowned self] call in
            let caller = try credentials(of: call)
            try serve { try service.refresh(by: caller) }
            return []
        }
        object.addMethod(
            "GetHistory", arguments: [BusArgument("limit", "u")], returns: [BusArgument("markers", "aa{sv}")]
        ) { [unowned self] call in
            let limit = try call.arguments()[0].uint32!
            let caller = try credentials(of: call)
            let markers = try serve {
                try service.history(limit: limit == 0 ? nil : Int(limit), before: nil, by: caller)
            }
            return [.dictionaries(markers.map { Record.marker($0).busDictionary })]
        }
        object.addSignal("PlacesChanged", arguments: [BusArgument("generation", "t"), places])
        object.addSignal("MarkerPlaced", arguments: [BusArgument("marker", "a{sv}")])
        object.addSignal("VisitStarted", arguments: [BusArgument("visit", "a{sv}")])
        object.addSignal("VisitEnded", arguments: [BusArgument("visit", "a{sv}")])
        object.addSignal("Entered", arguments: [BusArgument("transition", "a{sv}")])
        object.addSignal("Left", arguments: [BusArgument("transition", "a{sv}")])
        object.addProperty(Property.location, signature: "a{sv}") { [unowned self] call throws(BusError) in
            try authorizeReading(call)
            return service.location.map { Record.location($0, now: service.now).bus } ?? .dictionary([:])
        }
        object.addProperty(Property.generation, signature: "t") { [unowned self] call throws(BusError) in
            try authorizeReading(call)
            return .uint64(service.generation)
        }
        object.addProperty(Property.marker, signature: "a{sv}") { [unowned self] call throws(BusError) in
            try authorizeReading(call)
            return service.marker.map { Record.marker($0).bus } ?? .dictionary([:])
        }
        object.addProperty(Property.distanceFilter, signature: "d") { [unowned self] call throws(BusError) in
            try authorizeReading(call)
            return .double(service.distanceFilter)
        }
        object.addProperty(Property.sourceState, signature: "s") { [unowned self] call throws(BusError) in
            try authorizeReading(call)
            return .string(service.sourceState.rawValue)
        }
        object.addProperty(Property.visit, signature: "a{sv}") { [unowned self] call throws(BusError) in
            try authorizeReading(call)
            guard let open = service.openVisit else { return .dictionary([:]) }
            return Record.visit(open.visit, clock: service.clock, place: open.place, language: service.language).bus
        }
        object.addProperty(Property.fleet, signature: "a{sv}") { [unowned self] call throws(BusError) in
            try authorizeReading(call)
            return fleetStatus?()?.bus ?? .dictionary([:])
        }
    }

    /// The methods that take their parameters as one `a{sv}` of options (`limit` u, `language` s,
    /// `fields` as, `time` s), as systemd's newer interfaces do: a parameter added later is one more
    /// option, not one more method. An option the method does not take, or of another type, is
    /// InvalidArgs.
    private func declareMethodsWithOptions(places: BusArgument) {
        let options = BusArgument("options", "a{sv}")
        object.addMethod("GetPlacesWith", arguments: [options], returns: [BusArgument("generation", "t"), places]) {
            [unowned self] call in
            let given = try Self.options(try call.arguments()[0], allowing: ["limit", "language", "fields"])
            let caller = try credentials(of: call)
            let ranking = try serve { () throws in
                let records = try placeRecords(given)
                return (try service.current(limit: given.limit, by: caller), records)
            }
            return [
                .uint64(ranking.0?.generation ?? 0),
                .dictionaries((ranking.0?.places ?? []).map { ranking.1.record($0).busDictionary }),
            ]
        }
        object.addMethod(
            "RankWith",
            arguments: [
                BusArgument("latitude", "d"), BusArgument("longitude", "d"), BusArgument("accuracy", "d"), options,
            ],
            returns: [places]
        ) { [unowned self] call in
            let arguments = try call.arguments()
            let given = try Self.options(arguments[3], allowing: ["limit", "language", "fields"])
            let accuracy = arguments[2].double!
            let caller = try credentials(of: call)
            let records = try serve { try placeRecords(given) }
            let ranked = try serve {
                try service.rank(
                    latitude: arguments[0].double!, longitude: arguments[1].double!,
                    accuracy: accuracy.isNaN ? nil : accuracy, limit: given.limit, by: caller)
            }
            return [.dictionaries(ranked.map { records.record($0).busDictionary })]
        }
        object.addMethod(
            "GetDetails", arguments: [BusArgument("id", "s"), options], returns: [BusArgument("place", "a{sv}")]
        ) { [unowned self] call in
            let arguments = try call.arguments()
            let id = arguments[0].string!
            let given = try Self.options(arguments[1], allowing: ["fields", "language", "time"])
            let caller = try credentials(of: call)
            let place = try serve { () throws in
                var records = try placeRecords(given, default: .all)
                records.time = try ServiceError.checkTime(given.time, now: service.clock.wall)
                return records.record(try service.place(id: id, by: caller))
            }
            return [place.bus]
        }
    }

    /// varlink's PutPlaces, DeletePlaces and OwnPlaces. The places travel as one GeoJSON text (a
    /// FeatureCollection, or one Feature), the form `placectl own import` reads and `own export` writes:
    /// a busctl user types `PutPlaces sa{sv} "$(cat sites.geojson)" 0`, where `aa{sv}` would need a
    /// polygon's rings as nested variants no one types by hand. Each takes an `a{sv}` of options (none
    /// yet) for what comes later.
    private func declareOwnPlaceMethods() {
        let options = BusArgument("options", "a{sv}")
        let count = BusArgument("count", "u")
        object.addMethod("PutPlaces", arguments: [BusArgument("places", "s"), options], returns: [count]) {
            [unowned self] call in
            let arguments = try call.arguments()
            _ = try Self.options(arguments[1], allowing: [])
            let caller = try credentials(of: call)
            let put = try serve { () throws in
                // Refused before the parse: a reader's megabytes are not read at all.
                try service.authorize(caller, to: .write, "PutPlaces")
                let places: [OwnPlace]
                do throws(OwnPlaceError) {
                    places = try OwnPlace.readCollection(Array(arguments[0].string!.utf8))
                } catch {
                    throw ServiceError.invalidOwnPlace(error)
                }
                return try service.putPlaces(places, by: caller)
            }
            heapRelease.schedule()
            return [.uint32(UInt32(put))]
        }
        object.addMethod("DeletePlaces", arguments: [BusArgument("ids", "as"), options], returns: [count]) {
            [unowned self] call in
            let arguments = try call.arguments()
            _ = try Self.options(arguments[1], allowing: [])
            let caller = try credentials(of: call)
            let deleted = try serve { try service.deletePlaces(arguments[0].strings!, by: caller) }
            return [.uint32(UInt32(deleted))]
        }
        object.addMethod("OwnPlaces", arguments: [options], returns: [BusArgument("places", "s")]) {
            [unowned self] call in
            _ = try Self.options(try call.arguments()[0], allowing: [])
            let caller = try credentials(of: call)
            let text = try serve { try OwnPlace.collection(try service.ownPlaces(by: caller)).serialized() }
            heapRelease.schedule()
            return [.string(text)]
        }
    }

    /// A batch's parse or an export's text is megabytes of short-lived values.
    private lazy var heapRelease = IdleHeapRelease(loop: loop)

    /// The options of a call, as `declareMethodsWithOptions` reads them.
    private struct CallOptions {
        var limit: Int?
        var language: String?
        var fields: [String]?
        var time: String?
    }

    private static func options(_ value: BusValue, allowing names: [String]) throws(BusError) -> CallOptions {
        var options = CallOptions()
        for (key, value) in value.dictionary ?? [:] {
            guard names.contains(key) else {
                let taken = names.isEmpty ? "none" : names.joined(separator: ", ")
                throw .invalidArgs("unknown option '\(key)': this method takes \(taken)")
            }
            func wrongType(_ expected: String) -> BusError {
                .invalidArgs("option '\(key)' must be of type \(expected), not \(value.signature)")
            }
            switch key {
            case "limit":
                guard let limit = value.uint32 else { throw wrongType("u") }
                options.limit = limit == 0 ? nil : Int(limit)
            case "language":
                guard let language = value.string else { throw wrongType("s") }
                options.language = language
            case "fields":
                guard let fields = value.strings else { throw wrongType("as") }
                options.fields = fields
            default:
                guard let time = value.string else { throw wrongType("s") }
                options.time = time
            }
        }
        return options
    }

    /// How a call's places are written: its language (else Language=) and fields (else `default`).
    private func placeRecords(_ options: CallOptions, default: FieldMask = .standard) throws(ServiceError)
        -> PlaceRecords
    {
        PlaceRecords(
            language: service.language(asked: options.language),
            fields: try FieldMask.parse(options.fields, default: `default`),
            time: Int(service.clock.wall.rounded(.down)), service: service)
    }

    /// The properties' names, as they are declared and announced.
    private enum Property {
        static let location = "Location"
        static let generation = "Generation"
        static let marker = "Marker"
        static let distanceFilter = "DistanceFilter"
        static let sourceState = "SourceState"
        static let visit = "Visit"
        static let fleet = "Fleet"
    }

    /// The fleet export's state, broker or last error changed.
    func fleetChanged() { send { try object.emitPropertiesChanged([Property.fleet]) } }

    /// The caller of `call`, asked of the bus driver once per connection.
    private func credentials(of call: BusMethodCall) throws(BusError) -> Credentials {
        if let sender = call.sender, let known = callers[sender] { return known }
        let credentials = try call.credentials()
        if let sender = call.sender {
            if callers.count >= Self.maximumCallers { callers = [:] }
            callers[sender] = credentials
        }
        return credentials
    }

    /// A `Get`/`GetAll` shows state only to a reader; an announcement (no call) goes where the bus
    /// policy lets placed's signals go.
    private func authorizeReading(_ call: BusMethodCall?) throws(BusError) {
        guard let call else { return }
        let caller = try credentials(of: call)
        try serve { try service.authorize(caller, to: .read, "reading \(Self.name) properties") }
    }

    /// Runs a daemon operation, turning its named error into the D-Bus error of the same name.
    private func serve<Result>(_ operation: () throws -> Result) throws(BusError) -> Result {
        do {
            return try operation()
        } catch let error as ServiceError {
            throw BusError(Self.errorPrefix + error.name, error.description)
        } catch {
            throw BusError.failed("\(error)")
        }
    }

    // MARK: Broadcasts

    func handle(_ event: DaemonEvent, from service: PlacesService) {
        switch event {
        case .located:
            send { try object.emitPropertiesChanged([Property.location]) }
        case .ranked(let ranking):
            // One signal for every listener: the names in Language= (GetPlacesLocalized for others).
            let places = ranking.places.map { $0.busRecord(language: service.language) }
            send { try object.emitSignal("PlacesChanged", [.uint64(ranking.generation), .dictionaries(places)]) }
            send { try object.emitPropertiesChanged([Property.generation]) }
        case .markerPlaced(let marker):
            send { try object.emitSignal("MarkerPlaced", [Record.marker(marker).bus]) }
            send { try object.emitPropertiesChanged([Property.marker]) }
        case .sourceChanged:
            send { try object.emitPropertiesChanged([Property.sourceState]) }
        case .distanceFilterChanged:
            send { try object.emitPropertiesChanged([Property.distanceFilter]) }
        case let .visitStarted(visit, ranking):
            let record = Record.visit(visit, clock: service.clock, ranking: ranking, language: service.language)
            send { try object.emitSignal("VisitStarted", [record.bus]) }
            send { try object.emitPropertiesChanged([Property.visit]) }
        case let .visitEnded(visit, place, selection):
            let record = Record.visit(
                visit, clock: service.clock, place: place, selection: selection, language: service.language)
            send { try object.emitSignal("VisitEnded", [record.bus]) }
            send { try object.emitPropertiesChanged([Property.visit]) }
        case let .boundaryCrossed(crossing):
            let record = Record.transition(crossing, clock: service.clock, language: service.language)
            send { try object.emitSignal(crossing.transition == .entered ? "Entered" : "Left", [record.bus]) }
        case .moved:
            break
        }
    }

    private func send(_ emit: () throws -> Void) {
        do { try emit() } catch { Log.warning("D-Bus: \(error)") }
    }
}

extension RankedPlace {
    fileprivate func busRecord(language: String?) -> [String: BusValue] {
        Record.place(self, language: language).busDictionary
    }
}

extension Record {
    var busDictionary: [String: BusValue] {
        var dictionary: [String: BusValue] = [:]
        for (key, value) in fields { dictionary[key] = value.bus }
        return dictionary
    }

    var bus: BusValue { .dictionary(busDictionary) }
}

extension Record.Value {
    var bus: BusValue {
        switch self {
        case let .string(s): .string(s)
        case let .double(d): .double(d)
        case let .int(i): .int64(i)
        case let .uint(u): .uint64(u)
        case let .bool(b): .bool(b)
        case let .strings(items): .strings(items)
        case let .record(r): r.bus
        case let .records(rs): .dictionaries(rs.map(\.busDictionary))
        }
    }
}
