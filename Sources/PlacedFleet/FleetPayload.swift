import PlacedCore
import PlacedJSON

/// When an exported event was made, by the two clocks a device has: the system clock (and whether it
/// was synchronized then) and the fix's own GPS time, when the event has a fix with one.
public struct FleetStamp: Sendable, Equatable {
    public var systemTime: Double
    public var gpsTime: Double?
    public var clockSynchronized: Bool

    public init(systemTime: Double, gpsTime: Double?, clockSynchronized: Bool) {
        self.systemTime = systemTime
        self.gpsTime = gpsTime
        self.clockSynchronized = clockSynchronized
    }

    public static func now(gpsTime: Double? = nil) -> FleetStamp {
        FleetStamp(systemTime: SystemClock.now(), gpsTime: gpsTime, clockSynchronized: SystemClock.isSynchronized())
    }
}

/// The JSON of every message the fleet export publishes.
///
/// `placed/<device>/{marker,visit,state}` carry the keys of the varlink records they stand for (the
/// daemon passes its records) and these, the same in each: `id` ("<device>:<seq>", stable, for
/// consumers to drop duplicates), `device`, `seq` (the device's event order, whatever its clocks said),
/// `type`, `systemTime` and `gpsTime` (ISO 8601, UTC, milliseconds), `clockSynchronized`.
public enum FleetPayload {
    public static func messageID(device: String, sequence: Int64) -> String { "\(device):\(sequence)" }

    public static func placed(
        type: String, record: [String: JSON], device: String, sequence: Int64, stamp: FleetStamp
    ) -> [UInt8] {
        var object = record
        object["id"] = .string(messageID(device: device, sequence: sequence))
        object["device"] = .string(device)
        object["seq"] = .number(Double(sequence))
        object["type"] = .string(type)
        object["systemTime"] = .string(ISO8601.utc(stamp.systemTime, milliseconds: true))
        if let gps = stamp.gpsTime, gps.isFinite { object["gpsTime"] = .string(ISO8601.utc(gps, milliseconds: true)) }
        object["clockSynchronized"] = .bool(stamp.clockSynchronized)
        return encode(.object(object))
    }

    /// OwnTracks `_type: location` (https://owntracks.org/booklet/tech/json/): `tst` is the fix's time
    /// when it has one, `acc` the 95 % radius in whole metres, `vel` km/h, `cog` degrees.
    public static func ownTracksLocation(fix: Fix, tid: String, id: String, stamp: FleetStamp) -> [UInt8] {
        var object: [String: JSON] = [
            "_type": "location", "_id": .string(id), "tid": .string(tid),
            "lat": number(fix.coordinate.latitude), "lon": number(fix.coordinate.longitude),
            "tst": .number(Double(Int64(timestamp(fix.time ?? stamp.systemTime)))),
            "created_at": .number(Double(Int64(timestamp(stamp.systemTime)))), "t": "p",
        ]
        if let sigma = fix.accuracy { object["acc"] = .number(accuracyRadius(sigma: sigma).rounded()) }
        if let speed = fix.speed { object["vel"] = .number((speed * 3.6).rounded()) }
        if let heading = fix.heading { object["cog"] = .number(heading.rounded()) }
        if let altitude = fix.altitude { object["alt"] = .number(altitude.rounded()) }
        return encode(.object(object))
    }

    public enum TransitionEvent: String, Sendable { case enter, leave }

    /// OwnTracks `_type: transition` for a visit's start (`enter`) or end (`leave`): `desc` the place,
    /// `wtst` when the visit began, `t: c` (a circular region, the dwell radius).
    public static func ownTracksTransition(
        _ event: TransitionEvent, place: String, coordinate: Coordinate, accuracy: Double?, visitStart: Double,
        tid: String, id: String, stamp: FleetStamp
    ) -> [UInt8] {
        // `wtst` on the clock of `tst`: with a GPS time, the visit's start as far before it as the system
        // clock says, so a device whose clock is hours off still sends a start before its end.
        let start = stamp.gpsTime.map { $0 - (stamp.systemTime - visitStart) } ?? visitStart
        var object: [String: JSON] = [
            "_type": "transition", "_id": .string(id), "event": .string(event.rawValue), "desc": .string(place),
            "lat": number(coordinate.latitude), "lon": number(coordinate.longitude),
            "tst": .number(Double(Int64(timestamp(stamp.gpsTime ?? stamp.systemTime)))),
            "wtst": .number(Double(Int64(timestamp(start)))), "tid": .string(tid), "t": "c",
        ]
        if let accuracy, accuracy.isFinite { object["acc"] = .number(accuracy.rounded()) }
        return encode(.object(object))
    }

    /// OwnTracks `_type: transition` for an own place entered (`enter`) or left (`leave`), as OwnTracks'
    /// apps send one for a region: `desc` the place's name, `rid` its key (what `own:<key>` holds, the
    /// waypoint's rid for a place setWaypoints made), `wtst` the waypoint's `tst` (0 for a place no
    /// waypoint made), `lat`, `lon` and `acc` (the 95 % radius, whole metres) of the fix that confirmed
    /// it, `tst` that fix's time, `t: c` (a region).
    public static func ownTracksRegionTransition(
        _ event: TransitionEvent, place: String, key: String, waypointTime: Int64?, fix: Fix, tid: String,
        id: String, stamp: FleetStamp
    ) -> [UInt8] {
        var object: [String: JSON] = [
            "_type": "transition", "_id": .string(id), "event": .string(event.rawValue), "desc": .string(place),
            "rid": .string(key), "wtst": .number(Double(waypointTime ?? 0)),
            "lat": number(fix.coordinate.latitude), "lon": number(fix.coordinate.longitude),
            "tst": .number(Double(Int64(timestamp(fix.time ?? stamp.systemTime)))), "tid": .string(tid), "t": "c",
        ]
        // At least 1: OwnTracks' consumers (Home Assistant among them) drop a transition whose acc is 0.
        if let sigma = fix.accuracy { object["acc"] = .number(max(1, accuracyRadius(sigma: sigma).rounded())) }
        return encode(.object(object))
    }

    /// OwnTracks' two-character tracker id: the device id's last two characters.
    public static func trackerID(device: String) -> String { String(device.suffix(2)) }

    /// `Fix.accuracy` is σ per axis; every public accuracy is the 95 % radius (σ × 2.448).
    public static func accuracyRadius(sigma: Double) -> Double { sigma * 2.448 }

    static func number(_ value: Double) -> JSON { value.isFinite ? .number(value) : .null }

    private static func timestamp(_ seconds: Double) -> Double { seconds.isFinite ? seconds.rounded(.down) : 0 }

    /// JSON cannot spell NaN or infinity: a record that still holds one has it written as null.
    static func encode(_ value: JSON) -> [UInt8] {
        if let bytes = try? value.encoded() { return bytes }
        return (try? sanitized(value).encoded()) ?? Array("{}".utf8)
    }

    private static func sanitized(_ value: JSON) -> JSON {
        switch value {
        case let .number(number): number.isFinite ? value : .null
        case let .array(items): .array(items.map(sanitized))
        case let .object(members): .object(members.mapValues(sanitized))
        default: value
        }
    }
}
