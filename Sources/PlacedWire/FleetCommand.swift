import PlacedCore
import PlacedJSON

/// A command from the fleet (`[Fleet] AcceptCommands=yes`): own places to put or delete, read from an
/// MQTT message's bytes and checked whole before anything is applied. Pure: no I/O, so it can be fuzzed.
///
/// placed's own form, on `placed/<device>/cmd`:
///
///     {"id": "req-42", "put": [<GeoJSON Feature>, ...], "delete": ["own:old-depot", ...]}
///
/// `id` (the request id, 1 to 128 bytes) makes the command idempotent: the device remembers it and
/// applies a command of the same id once. `put` holds Features as PutPlaces takes them, `delete` place
/// ids; one of them at least, no id in both. Nothing else is allowed at the top level.
///
/// OwnTracks' form, on `owntracks/<user>/<device>/cmd` (`OwnTracks=yes`):
///
///     {"_type": "cmd", "action": "setWaypoints",
///      "waypoints": {"_type": "waypoints", "waypoints": [
///         {"_type": "waypoint", "desc": "Depot", "lat": 60.17, "lon": 24.94, "rad": 50, "tst": 1437552714,
///          "rid": "Dp0t"}]}}
///
/// `waypoints` may also be the list itself, or sit under `payload` as older OwnTracks versions send it.
/// Each waypoint becomes a circle named `desc`, id `own:<rid>` (the rid must be a valid key), or
/// `own:<tst>` without a rid, since OwnTracks keys a waypoint by its `tst`. The request id is the
/// message's `_id` when it has one, else `owntracks:` and a 64-bit FNV-1a digest of its bytes: the same
/// message delivered again is the same request.
public struct FleetCommand: Sendable, Equatable {
    public enum Origin: String, Sendable { case placed, ownTracks }

    public var origin: Origin
    public var request: String
    public var put: [OwnPlace]
    public var delete: [String]
    /// The `tst` of each OwnTracks waypoint by place id: its `wtst` in the transitions it causes.
    public var waypointTimes: [String: Int64]

    public init(
        origin: Origin, request: String, put: [OwnPlace] = [], delete: [String] = [],
        waypointTimes: [String: Int64] = [:]
    ) {
        self.origin = origin
        self.request = request
        self.put = put
        self.delete = delete
        self.waypointTimes = waypointTimes
    }

    /// Largest command read, bytes: a writer's varlink message may be as large (10,000 sites are about
    /// 2.5 MB of GeoJSON).
    public static let maximumSize = 16 << 20
    public static let maximumRequestLength = 128

    /// Reads and checks one message's payload.
    public static func parse(_ payload: [UInt8], origin: Origin) throws(FleetCommandError) -> FleetCommand {
        guard payload.count <= maximumSize else {
            throw FleetCommandError(
                .tooLarge, "more than the \(maximumSize) bytes a command may have")
        }
        let document: JSON
        do {
            document = try JSON(parsing: payload)
        } catch {
            throw FleetCommandError(.malformed, "not JSON: \(error)")
        }
        guard let object = document.object else { throw FleetCommandError(.malformed, "not a JSON object") }
        switch origin {
        case .placed: return try placed(object)
        case .ownTracks: return try ownTracks(object, payload: payload)
        }
    }

    private static func placed(_ object: [String: JSON]) throws(FleetCommandError) -> FleetCommand {
        guard let requestValue = object["id"] else { throw FleetCommandError(.malformed, "no id (the request id)") }
        let request = try requestID(requestValue)
        func fail(_ kind: FleetCommandError.Kind, _ reason: String) -> FleetCommandError {
            FleetCommandError(kind, reason, request: request)
        }
        if let unknown = object.keys.sorted().first(where: { !["id", "put", "delete"].contains($0) }) {
            throw fail(.malformed, "unknown key \"\(unknown)\" (a command has id, put and delete)")
        }
        var put: [OwnPlace] = []
        if let value = object["put"] {
            guard let features = value.array else { throw fail(.malformed, "put is not a list of GeoJSON Features") }
            do {
                put = try OwnPlace.readFeatures(features)
            } catch {
                throw fail(.invalidOwnPlace, error.description)
            }
        }
        var delete: [String] = []
        if let value = object["delete"] {
            guard let ids = value.array else { throw fail(.malformed, "delete is not a list of place ids") }
            var seen: Set<String> = []
            for (number, item) in ids.enumerated() {
                guard let id = item.string, OwnPlace.key(ofID: id) != nil else {
                    throw fail(
                        .invalidOwnPlace,
                        OwnPlaceError(feature: number, id: item.string, .badID(item.string ?? "\(item)")).description)
                }
                guard seen.insert(id).inserted else { throw fail(.malformed, "delete lists \(id) twice") }
                delete.append(id)
            }
        }
        guard !put.isEmpty || !delete.isEmpty else { throw fail(.malformed, "nothing to put or delete") }
        let putIDs = Set(put.map(\.id))
        if let both = delete.first(where: putIDs.contains) {
            throw fail(.malformed, "\(both) is both put and deleted")
        }
        return FleetCommand(origin: .placed, request: request, put: put, delete: delete)
    }

    private static func ownTracks(_ object: [String: JSON], payload: [UInt8]) throws(FleetCommandError)
        -> FleetCommand
    {
        let request = try object["_id"].map(requestID) ?? "owntracks:" + digest(payload)
        func fail(_ kind: FleetCommandError.Kind, _ reason: String) -> FleetCommandError {
            FleetCommandError(kind, reason, request: request)
        }
        guard object["_type"]?.string == "cmd" else { throw fail(.malformed, "_type is not \"cmd\"") }
        guard let action = object["action"]?.string else { throw fail(.malformed, "no action") }
        guard action == "setWaypoints" else {
            throw fail(.unsupported, "action \(action): placed takes only setWaypoints")
        }
        let container = object["waypoints"] ?? object["payload"]?["waypoints"]
        guard let list = container?.array ?? container?["waypoints"]?.array else {
            throw fail(.malformed, "no waypoints list")
        }
        guard !list.isEmpty else { throw fail(.malformed, "the waypoints list is empty") }
        var places: [OwnPlace] = []
        var times: [String: Int64] = [:]
        for (index, waypoint) in list.enumerated() {
            func bad(_ what: String) -> FleetCommandError { fail(.invalidOwnPlace, "waypoint \(index): \(what)") }
            guard waypoint.object != nil else { throw bad("not an object") }
            if let type = waypoint["_type"], type.string != "waypoint" { throw bad("_type is not \"waypoint\"") }
            guard let desc = waypoint["desc"]?.string else { throw bad("no desc (a string)") }
            // A beacon region (uuid, major, minor) has no position in OwnTracks' list: nothing placed can
            // measure a fix against, so it is left out rather than refusing its neighbours.
            if waypoint["uuid"] != nil, waypoint["lat"] == nil || waypoint["lon"] == nil { continue }
            guard let latitude = number(waypoint["lat"]), let longitude = number(waypoint["lon"]) else {
                throw bad("lat and lon must be numbers")
            }
            guard let radius = number(waypoint["rad"]) else { throw bad("no rad (metres)") }
            guard let tstValue = number(waypoint["tst"]), tstValue.rounded() == tstValue,
                (0...1e12).contains(tstValue)
            else { throw bad("tst must be a whole number of seconds") }
            let tst = Int64(tstValue)
            let key: String
            if let rid = waypoint["rid"], !rid.isNull {
                guard let text = rid.string, OwnPlace.isValidKey(text) else {
                    throw bad("rid must be 1 to 64 of A-Z a-z 0-9 . _ - (it becomes the place's key)")
                }
                key = text
            } else {
                key = String(tst)
            }
            let place = OwnPlace(
                id: OwnPlace.idPrefix + key, name: desc,
                geometry: .circle(centre: Coordinate(latitude: latitude, longitude: longitude), radius: radius))
            places.append(place)
            times[place.id] = tst
        }
        do {
            try OwnPlace.validate(places)
        } catch {
            throw fail(.invalidOwnPlace, "waypoint " + error.description.dropFirst("feature ".count))
        }
        return FleetCommand(origin: .ownTracks, request: request, put: places, waypointTimes: times)
    }

    private static func requestID(_ value: JSON) throws(FleetCommandError) -> String {
        guard let text = value.string, !text.isEmpty, text.utf8.count <= maximumRequestLength,
            !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "\u{FFFD}" })
        else {
            throw FleetCommandError(
                .malformed, "the request id must be a string of 1 to \(maximumRequestLength) printable bytes")
        }
        return text
    }

    /// OwnTracks writes numbers, and some of its versions numbers in strings.
    private static func number(_ value: JSON?) -> Double? {
        guard let value else { return nil }
        if let number = value.double { return number.isFinite ? number : nil }
        if let text = value.string, let number = Double(text), number.isFinite { return number }
        return nil
    }

    static func digest(_ bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// Why a fleet command was refused: nothing of it was applied. `request` when the command had one.
public struct FleetCommandError: Error, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Not JSON, not a command, a key missing or of the wrong type.
        case malformed
        /// Larger than `FleetCommand.maximumSize`.
        case tooLarge
        /// An OwnTracks action other than setWaypoints.
        case unsupported
        /// A place (a Feature, a waypoint, an id) that is not a valid own place.
        case invalidOwnPlace
        /// The change could not be stored.
        case storeFailed
    }

    public var kind: Kind
    public var reason: String
    public var request: String?

    public init(_ kind: Kind, _ reason: String, request: String? = nil) {
        self.kind = kind
        self.reason = reason
        self.request = request
    }

    public var description: String { "\(kind.rawValue): \(reason)" }
}

/// What became of a command, as `placed/<device>/cmd/result` says it.
public struct FleetCommandResult: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        /// Applied now: places put, and places deleted (of those asked, the ones there were).
        case applied(put: Int, deleted: Int)
        /// Applied before (the same request id): not again. The counts are the first time's.
        case duplicate(put: Int, deleted: Int)
        case refused(FleetCommandError)
    }

    public var request: String?
    public var origin: FleetCommand.Origin
    public var outcome: Outcome

    public init(request: String?, origin: FleetCommand.Origin, outcome: Outcome) {
        self.request = request
        self.origin = origin
        self.outcome = outcome
    }

    /// The result's keys: `request` (null when the command had none that could be read), `source`
    /// (`placed` or `owntracks`), `ok`, then `put`, `deleted` and `duplicate`, or `error` (its kind) and
    /// `reason`.
    public var record: [String: JSON] {
        var record: [String: JSON] = [
            "request": request.map(JSON.string) ?? .null,
            "source": .string(origin == .placed ? "placed" : "owntracks"),
        ]
        switch outcome {
        case let .applied(put, deleted), let .duplicate(put, deleted):
            record["ok"] = true
            record["put"] = .number(Double(put))
            record["deleted"] = .number(Double(deleted))
            if case .duplicate = outcome { record["duplicate"] = true } else { record["duplicate"] = false }
        case .refused(let error):
            record["ok"] = false
            record["error"] = .string(error.kind.rawValue)
            record["reason"] = .string(error.reason)
        }
        return record
    }
}
