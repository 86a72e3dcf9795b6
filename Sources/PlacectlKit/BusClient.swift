import PlacedCore
import PlacedJSON
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A client of placed's D-Bus object (`io.placed.Placed1` at `/io/placed/Placed1`), turning each
/// reply into the JSON object the varlink method of the same meaning returns.
public final class BusClient: PlacesClient {
    public static let service = "io.placed.Placed1"
    public static let objectPath = "/io/placed/Placed1"
    public static let interface = "io.placed.Placed1"

    /// Asked with GetPlacesLocalized and RankLocalized; nil: GetPlaces and Rank, in placed's Language=.
    public var language: String?
    /// Set: GetPlacesWith, RankWith (and the Watch's rankings fetched again with them).
    public var fields: [String]?
    private let bus: Bus
    private let endpoint: String
    private let timeout: Double

    public init(bus choice: Endpoint.Bus, timeout: Double = 15) throws(ClientError) {
        endpoint = Endpoint.bus(choice).description
        self.timeout = timeout
        let address: Bus.Address =
            switch choice {
            case .system: .system
            case .user: .session
            case .address(let address): .custom(address)
            }
        do {
            bus = try Bus(address)
        } catch {
            throw .unreachable(endpoint: endpoint, reason: error.reason, hint: "is D-Bus running?")
        }
    }

    // MARK: PlacesClient
    // On D-Bus, 0 asks for the default limit and NaN for the default accuracy (no optional arguments).

    public func current(limit: Int?) throws(ClientError) -> [String: JSON] {
        try current(limit: limit, properties: allProperties())
    }

    /// `Current` from GetPlaces and the object's properties, read once by the caller.
    private func current(limit: Int?, properties: [String: BusValue]) throws(ClientError) -> [String: JSON] {
        var result = Self.freshness(properties)
        result.merge(try places(limit: limit)) { $1 }
        return result
    }

    /// `generation` and `places`: GetPlaces, or GetPlacesLocalized for a reader's language.
    private func places(limit: Int?) throws(ClientError) -> [String: JSON] {
        let limit = BusValue.uint32(UInt32(limit ?? 0))
        let reply =
            if fields != nil {
                try call("GetPlacesWith", [options(["limit": limit])], returns: 2)
            } else if let language {
                try call("GetPlacesLocalized", [limit, .string(language)], returns: 2)
            } else {
                try call("GetPlaces", [limit], returns: 2)
            }
        return ["generation": JSON(reply[0]), "places": JSON(reply[1])]
    }

    /// `stale` and `location`, which both `Current` and `Status` carry.
    private static func freshness(_ properties: [String: BusValue]) -> [String: JSON] {
        var result: [String: JSON] = ["stale": .bool(properties["SourceState"]?.string == "stale")]
        result["location"] = properties["Location"].flatMap(nonEmpty)
        return result
    }

    public func rank(latitude: Double, longitude: Double, accuracy: Double?, limit: Int?) throws(ClientError)
        -> [String: JSON]
    {
        let position: [BusValue] = [
            .double(latitude), .double(longitude), .double(accuracy ?? .nan), .uint32(UInt32(limit ?? 0)),
        ]
        let reply =
            if fields != nil {
                try call("RankWith", position.dropLast() + [options(["limit": position[3]])], returns: 1)
            } else if let language {
                try call("RankLocalized", position + [.string(language)], returns: 1)
            } else {
                try call("Rank", position, returns: 1)
            }
        return ["places": JSON(reply[0])]
    }

    public func details(id: String, time: String?) throws(ClientError) -> [String: JSON] {
        var given: [String: BusValue] = [:]
        given["time"] = time.map(BusValue.string)
        return ["place": JSON(try call("GetDetails", [.string(id), options(given)], returns: 1)[0])]
    }

    /// The options of a `…With` call: `given`, and the client's language and fields.
    private func options(_ given: [String: BusValue]) -> BusValue {
        var options = given
        options["language"] = language.map(BusValue.string)
        options["fields"] = fields.map(BusValue.strings)
        return .dictionary(options)
    }

    public func select(id: String) throws(ClientError) -> [String: JSON] {
        ["marker": JSON(try call("Select", [.string(id)], returns: 1)[0])]
    }

    public func refresh() throws(ClientError) { _ = try call("Refresh", returns: 0) }

    // Own places have no D-Bus methods yet.
    /// PutPlaces, DeletePlaces and OwnPlaces carry the places as GeoJSON text; the replies become
    /// varlink's `count` and `places` (the Features).
    public func putPlaces(_ features: [JSON]) throws(ClientError) -> [String: JSON] {
        let collection: JSON = ["type": "FeatureCollection", "features": .array(features)]
        let text: String
        do {
            text = try collection.serialized()
        } catch {
            throw .unsupported("the own places do not serialize: \(error)")
        }
        return ["count": JSON(try call("PutPlaces", [.string(text), .dictionary([:])], returns: 1)[0])]
    }

    public func deletePlaces(_ ids: [String]) throws(ClientError) -> [String: JSON] {
        ["count": JSON(try call("DeletePlaces", [.strings(ids), .dictionary([:])], returns: 1)[0])]
    }

    public func ownPlaces() throws(ClientError) -> [String: JSON] {
        guard let text = try call("OwnPlaces", [.dictionary([:])], returns: 1)[0].string,
            let collection = try? JSON(parsing: Array(text.utf8)), let features = collection["features"]
        else { throw .protocolViolation("OwnPlaces did not return a GeoJSON FeatureCollection") }
        return ["places": features]
    }

    public func history(limit: Int?, before: Int?) throws(ClientError) -> [String: JSON] {
        if before != nil { throw .unsupported("--before needs the varlink socket (GetHistory has no such argument)") }
        return ["markers": JSON(try call("GetHistory", [.uint32(UInt32(limit ?? 0))], returns: 1)[0])]
    }

    public func status() throws(ClientError) -> [String: JSON] {
        let properties = try allProperties()
        var result = Self.freshness(properties)
        result["source"] = properties["SourceState"].map(JSON.init) ?? .null
        result["generation"] = properties["Generation"].map(JSON.init) ?? .null
        result["distance_filter"] = properties["DistanceFilter"].map(JSON.init) ?? .null
        result["marker"] = properties["Marker"].flatMap(Self.nonEmpty)
        result["visit"] = properties["Visit"].flatMap(Self.nonEmpty)
        result["fleet"] = properties["Fleet"].flatMap(Self.nonEmpty)
        return result
    }

    public func watch(_ onUpdate: @escaping ([String: JSON]) -> Void) throws(ClientError) {
        let loop = try WatchLoop()
        var failure: ClientError?
        let subscriptions: [BusSubscription]
        // PlacesChanged names places in placed's Language=: a reader of another language asks
        // for the same ranking in its own (a newer one already out keeps the signal's names).
        let localized = { [unowned self] (update: [String: JSON]) -> [String: JSON] in
            guard language != nil || fields != nil, let fetched = try? places(limit: nil),
                fetched["generation"] == update["generation"]
            else { return update }
            return fetched
        }
        // Subscribe before reading the state, so nothing that happens in between is missed.
        do {
            subscriptions = [
                try bus.subscribe(sender: Self.service, path: Self.objectPath, interface: Self.interface) { signal in
                    switch (signal.member, signal.arguments.count) {
                    case ("PlacesChanged", 2):
                        onUpdate(
                            localized(["generation": JSON(signal.arguments[0]), "places": JSON(signal.arguments[1])]))
                    case ("MarkerPlaced", 1):
                        let marker = JSON(signal.arguments[0])
                        onUpdate(["generation": marker["generation"] ?? .null, "marker": marker])
                    case ("VisitStarted", 1), ("VisitEnded", 1):
                        onUpdate(["visit": JSON(signal.arguments[0])])
                    default: break
                    }
                },
                try bus.subscribe(
                    sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                    member: "NameOwnerChanged"
                ) { [endpoint] signal in
                    // (name, old owner, new owner): placed left the bus.
                    let arguments = signal.arguments.map(\.string)
                    guard arguments.count == 3, arguments[0] == Self.service, arguments[2] == "" else { return }
                    failure = .disconnected(endpoint: "\(Self.service) on \(endpoint)")
                    loop.exit(1)
                },
            ]
        } catch {
            throw .system(error)
        }
        let properties = try allProperties()
        var first = try current(limit: nil, properties: properties)
        first["marker"] = properties["Marker"].flatMap(Self.nonEmpty)
        first["visit"] = properties["Visit"].flatMap(Self.nonEmpty)
        onUpdate(first)

        do {
            try bus.attach(to: loop.loop)
            try bus.exitLoopOnDisconnect()
        } catch {
            throw .system(error)
        }
        let status = try loop.run()
        withExtendedLifetime(subscriptions) {}
        if let failure { throw failure }
        // sd-bus ends the loop with a failure status when the bus connection is lost.
        if status != 0 { throw .disconnected(endpoint: endpoint) }
    }

    // MARK: Calls

    private func call(
        interface: String = BusClient.interface, _ member: String, _ arguments: [BusValue] = [], returns count: Int
    ) throws(ClientError) -> [BusValue] {
        let reply: [BusValue]
        do {
            reply = try bus.call(
                destination: Self.service, path: Self.objectPath, interface: interface, member: member, arguments,
                timeout: UInt64(timeout * 1e6))
        } catch {
            throw clientError(error)
        }
        guard reply.count == count else {
            throw .protocolViolation("\(member) returned \(reply.count) values instead of \(count)")
        }
        return reply
    }

    /// Sorts a D-Bus error into placed's own (named), unreachable, timeout or lost connection.
    private func clientError(_ error: BusError) -> ClientError {
        switch error.name {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            .unreachable(endpoint: "\(Self.service) on \(endpoint)", reason: error.message, hint: "is placed running?")
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout":
            .timedOut(endpoint: endpoint, seconds: timeout)
        case "org.freedesktop.DBus.Error.Disconnected", "System.Error.ECONNRESET", "System.Error.ENOTCONN":
            .disconnected(endpoint: endpoint)
        default:
            .daemon(name: error.name, parameters: [:], message: error.message)
        }
    }

    /// `org.freedesktop.DBus.Properties.GetAll` of placed's interface.
    private func allProperties() throws(ClientError) -> [String: BusValue] {
        let reply = try call(
            interface: "org.freedesktop.DBus.Properties", "GetAll", [.string(Self.interface)], returns: 1)
        guard let properties = reply[0].dictionary else { throw .protocolViolation("GetAll did not return a{sv}") }
        return properties
    }

    /// An empty a{sv} stands for "none yet" on D-Bus, which has no null.
    private static func nonEmpty(_ value: BusValue) -> JSON? {
        value.dictionary?.isEmpty == true ? nil : JSON(value)
    }
}

extension JSON {
    /// A D-Bus value as JSON: numbers of every width as numbers (NaN and infinities, which JSON
    /// cannot spell, as null), `a{sv}` as an object, arrays as arrays.
    public init(_ value: BusValue) {
        switch value {
        case .bool(let v): self = .bool(v)
        case .int32(let v): self = .number(Double(v))
        case .uint32(let v): self = .number(Double(v))
        case .int64(let v): self = .number(Double(v))
        case .uint64(let v): self = .number(Double(v))
        case .double(let v): self = v.isFinite ? .number(v) : .null
        case .string(let v), .objectPath(let v): self = .string(v)
        case .strings(let v): self = .array(v.map(JSON.string))
        case .uint32s(let v): self = .array(v.map { .number(Double($0)) })
        case .dictionary(let v): self = .object(v.mapValues(JSON.init))
        case .dictionaries(let v): self = .array(v.map { .object($0.mapValues(JSON.init)) })
        }
    }
}
