import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

/// What the interfaces send, built once here so D-Bus (a{sv}) and varlink (JSON objects) carry the
/// same keys: places `id, name, kind, address, address_source, latitude, longitude, distance,
/// likelihood, attribution`; markers `place, location, time, generation, selection, automatic` (a
/// marker's place without `address_source`); visits `id, started, ended, duration, latitude,
/// longitude, accuracy, fixes, generation, places, place, selection, automatic`. Unknown values are
/// left out. Every accuracy is the 95 % radius in metres.
public struct Record: Equatable, Sendable {
    /// Not `indirect`: a nested record is held by its fields array, and boxing every value would
    /// cost an allocation per field.
    public enum Value: Equatable, Sendable {
        case string(String)
        case double(Double)
        case int(Int64)
        case uint(UInt64)
        case bool(Bool)
        case record(Record)
        case records([Record])
    }

    public var fields: [(key: String, value: Value)] = []

    public static func == (a: Record, b: Record) -> Bool {
        a.fields.elementsEqual(b.fields) { $0.key == $1.key && $0.value == $1.value }
    }

    mutating func set(_ key: String, _ value: Value?) {
        if let value { fields.append((key, value)) }
    }

    public subscript(key: String) -> Value? { fields.first { $0.key == key }?.value }
}

extension Record {
    /// A ranked place, named for a reader of `language` (nil: its `name` tag), with where its
    /// address came from.
    static func place(_ ranked: RankedPlace, language: String?) -> Record {
        var r = recordedPlace(ranked, name: ranked.place.name(forLanguage: language))
        r.set("address_source", .string(ranked.place.addressSource.rawValue))
        return r
    }

    /// The keys a place has in rankings and markers alike. A marker's place keeps the name the log
    /// recorded (its `name` tag) and has no `address_source`, which the log does not keep.
    private static func recordedPlace(_ ranked: RankedPlace, name: String) -> Record {
        let place = ranked.place
        var r = Record()
        r.fields.reserveCapacity(10)
        r.set("id", .string(place.id))
        r.set("name", .string(name))
        r.set("kind", .string(place.kind))
        r.set("address", place.address.map(Value.string))
        r.set("latitude", .double(place.coordinate.latitude))
        r.set("longitude", .double(place.coordinate.longitude))
        r.set("distance", .double(ranked.distance))
        r.set("likelihood", .double(ranked.likelihood))
        r.set("attribution", .string(Place.attribution))
        return r
    }

    /// `now`: monotonic microseconds, for the fix's age; nil for a fix restored from the log.
    static func location(_ fix: Fix, now: UInt64?) -> Record {
        var r = Record()
        r.set("latitude", .double(fix.coordinate.latitude))
        r.set("longitude", .double(fix.coordinate.longitude))
        r.set("accuracy", fix.radius95.map(Value.double))
        r.set("speed", fix.speed.map(Value.double))
        r.set("heading", fix.heading.map(Value.double))
        r.set("altitude", fix.altitude.map(Value.double))
        r.set("mode", .string(fix.mode == .threeD ? "3d" : "2d"))
        if let now, fix.receivedAt > 0 { r.set("age", .double(Double(now &- fix.receivedAt) / 1e6)) }
        return r
    }

    static func marker(_ marker: Marker) -> Record {
        var r = Record()
        r.set("place", .record(.recordedPlace(marker.place, name: marker.place.place.name)))
        r.set("location", .record(.location(marker.location, now: nil)))
        r.set("time", .string(ISO8601.utc(marker.time, milliseconds: true)))
        r.set("generation", .uint(marker.generation))
        r.set("selection", .int(marker.selection))
        r.set("automatic", .bool(marker.automatic))
        return r
    }

    /// A visit: open (no `ended`), started (with the `ranking` at its averaged position) or ended (with
    /// its `place` and the `selection` made during it). Its position and accuracy are the averaged ones.
    /// Places named for a reader of `language`, as in rankings.
    static func visit(
        _ visit: Visit, clock: ServiceClock, ranking: Ranking? = nil, place: RankedPlace? = nil,
        selection: Marker? = nil, language: String?
    ) -> Record {
        var r = Record()
        r.set("id", .uint(visit.id))
        r.set("started", .string(ISO8601.utc(clock.wall(at: visit.startedAt), milliseconds: true)))
        r.set("ended", visit.endedAt.map { .string(ISO8601.utc(clock.wall(at: $0), milliseconds: true)) })
        r.set("duration", .double(visit.duration))
        r.set("latitude", .double(visit.centre.latitude))
        r.set("longitude", .double(visit.centre.longitude))
        r.set("accuracy", .double(Fix.radius95(fromSigma: visit.accuracy)))
        r.set("fixes", .uint(UInt64(visit.fixes)))
        r.set("generation", ranking.map { .uint($0.generation) })
        r.set("places", ranking.map { .records($0.places.map { Record.place($0, language: language) }) })
        r.set("place", place.map { .record(.place($0, language: language)) })
        r.set("selection", selection.map { .int($0.selection) })
        r.set("automatic", selection.map { .bool($0.automatic) })
        return r
    }

}
