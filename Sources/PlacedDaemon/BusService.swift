import PlacedCore
import PlacedSystem

/// The `io.placed.Placed1` D-Bus object: the same operations as the varlink interface, sd-bus
/// attached to the daemon's event loop. Every change of a property is announced with
/// PropertiesChanged; rankings and markers with PlacesChanged and MarkerPlaced.
final class BusService: DaemonObserver {
    static let name = "io.placed.Placed1"
    static let path = "/io/placed/Placed1"
    static let errorPrefix = "io.placed.Placed1.Error."

    private unowned let daemon: Daemon
    private let bus: Bus
    private let object: BusObject

    init(daemon: Daemon, address: Bus.Address) throws {
        self.daemon = daemon
        bus = try Bus(address)
        object = BusObject(
            path: Self.path, interface: Self.name, introspectionXML: InterfaceDescriptions.busIntrospection)
        declareMembers()
        try bus.register(object)
        try bus.attach(to: daemon.loop)
        try bus.requestName(Self.name)
        daemon.addObserver(self)
    }

    private func declareMembers() {
        object.addMethod("GetPlaces", arguments: "u", returns: "taa{sv}") { [unowned self] call in
            let limit = try call.arguments()[0].uint32!
            let ranking = try serve { try daemon.current(limit: limit == 0 ? nil : Int(limit)) }
            return [.uint64(ranking?.generation ?? 0), .dictionaries((ranking?.places ?? []).map(\.busRecord))]
        }
        object.addMethod("Rank", arguments: "dddu", returns: "aa{sv}") { [unowned self] call in
            let arguments = try call.arguments()
            let accuracy = arguments[2].double!, limit = arguments[3].uint32!
            let places = try serve {
                try daemon.rank(
                    latitude: arguments[0].double!, longitude: arguments[1].double!,
                    accuracy: accuracy.isNaN ? nil : accuracy, limit: limit == 0 ? nil : Int(limit))
            }
            return [.dictionaries(places.map(\.busRecord))]
        }
        object.addMethod("Select", arguments: "s", returns: "a{sv}") { [unowned self] call in
            let id = try call.arguments()[0].string!
            let caller = try call.credentials()
            let marker = try serve { try daemon.select(id: id, by: caller) }
            return [Record.marker(marker).bus]
        }
        object.addMethod("Refresh") { [unowned self] call in
            let caller = try call.credentials()
            try serve { try daemon.refresh(by: caller) }
            return []
        }
        object.addMethod("GetHistory", arguments: "u", returns: "aa{sv}") { [unowned self] call in
            let limit = try call.arguments()[0].uint32!
            let markers = try serve { try daemon.history(limit: limit == 0 ? nil : Int(limit), before: nil) }
            return [.dictionaries(markers.map { Record.marker($0).busDictionary })]
        }
        object.addProperty(DaemonProperty.location.rawValue, signature: "a{sv}") { [unowned self] in
            daemon.location.map { Record.location($0, now: daemon.loop.now).bus } ?? .dictionary([:])
        }
        object.addProperty(DaemonProperty.generation.rawValue, signature: "t") { [unowned self] in
            .uint64(daemon.generation)
        }
        object.addProperty(DaemonProperty.marker.rawValue, signature: "a{sv}") { [unowned self] in
            daemon.marker.map { Record.marker($0).bus } ?? .dictionary([:])
        }
        object.addProperty(DaemonProperty.distanceFilter.rawValue, signature: "d") { [unowned self] in
            .double(daemon.distanceFilter)
        }
        object.addProperty(DaemonProperty.sourceState.rawValue, signature: "s") { [unowned self] in
            .string(daemon.sourceState.rawValue)
        }
        object.addSignal("PlacesChanged", signature: "taa{sv}")
        object.addSignal("MarkerPlaced", signature: "a{sv}")
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

    func daemon(_ daemon: Daemon, published ranking: Ranking) {
        let places = ranking.places.map(\.busRecord)
        send { try object.emitSignal("PlacesChanged", [.uint64(ranking.generation), .dictionaries(places)]) }
    }

    func daemon(_ daemon: Daemon, placed marker: Marker) {
        send { try object.emitSignal("MarkerPlaced", [Record.marker(marker).bus]) }
    }

    func daemon(_ daemon: Daemon, changed properties: Set<DaemonProperty>) {
        let names = [DaemonProperty.location, .generation, .marker, .distanceFilter, .sourceState]
            .filter(properties.contains).map(\.rawValue)
        send { try object.emitPropertiesChanged(names) }
    }

    private func send(_ emit: () throws -> Void) {
        do { try emit() } catch { Log.warning("D-Bus: \(error)") }
    }
}

extension RankedPlace {
    fileprivate var busRecord: [String: BusValue] { Record.place(self).busDictionary }
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
        case let .record(r): r.bus
        case let .records(rs): .dictionaries(rs.map(\.busDictionary))
        }
    }
}
