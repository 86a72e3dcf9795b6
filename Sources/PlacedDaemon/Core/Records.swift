import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

/// What the interfaces send, built once here so D-Bus (a{sv}) and varlink (JSON objects) carry the
/// same keys: places `id, name, kind, address, address_source, latitude, longitude, distance,
/// likelihood, attribution`; markers `place, location, time, generation, selection, automatic` (a
/// marker's place without `address_source`); visits `id, started, ended, duration, latitude,
/// longitude, accuracy, fixes, generation, places, place, selection, automatic`. Unknown values are
/// left out. Every accuracy is the 95 % radius in metres. A field mask (`FieldMask`, `PlaceRecords`)
/// chooses a place's keys among these and its details.
public struct Record: Equatable, Sendable {
    /// Not `indirect`: a nested record is held by its fields array, and boxing every value would
    /// cost an allocation per field.
    public enum Value: Equatable, Sendable {
        case string(String)
        case double(Double)
        case int(Int64)
        case uint(UInt64)
        case bool(Bool)
        /// A list of texts (a place's phones, websites, cuisines).
        case strings([String])
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

/// How the places of one reply are written: for a reader of `language`, with the keys `fields` asks for,
/// opening hours evaluated at `time` (Unix seconds) in the service's zone. The standard mask writes the
/// very record `Record.place(_:language:)` writes, so a client that asks for no fields sees no change.
struct PlaceRecords {
    var language: String?
    var fields = FieldMask.standard
    var time = 0
    unowned let service: PlacesService

    func record(_ ranked: RankedPlace) -> Record {
        if fields.isStandard { return Record.place(ranked, language: language) }
        return record(ranked.place, distance: ranked.distance, likelihood: ranked.likelihood)
    }

    /// A place outside any ranking (Details) has no distance or likelihood.
    func record(_ place: Place, distance: Double? = nil, likelihood: Double? = nil) -> Record {
        var r = Record()
        func set(_ key: String, _ value: @autoclosure () -> Record.Value?) {
            if fields.includes(key) { r.set(key, value()) }
        }
        set("id", .string(place.id))
        set("name", .string(place.name(forLanguage: language)))
        set("kind", .string(place.kind))
        set("address", place.address.map(Record.Value.string))
        set("address_source", .string(place.addressSource.rawValue))
        set("latitude", .double(place.coordinate.latitude))
        set("longitude", .double(place.coordinate.longitude))
        set("distance", distance.map(Record.Value.double))
        set("likelihood", likelihood.map(Record.Value.double))
        set("attribution", .string(Place.attribution))
        let details = place.details
        guard !details.isEmpty, fields.includesDetails else { return r }
        for key in ["wheelchair", "brand", "operator", "outdoor_seating", "takeaway", "opening_hours"] {
            set(key, details.value(key).map(Record.Value.string))
        }
        set("brand_wikidata", details.value("brand:wikidata").map(Record.Value.string))
        set("description", details.description(forLanguage: language).map(Record.Value.string))
        for key in ["phone", "website", "email", "cuisine", "level", "internet_access"] where fields.includes(key) {
            let items = details.list(key)
            set(key, items.isEmpty ? nil : .strings(items))
        }
        set("diet", Self.object(details.diet))
        set("payment", Self.object(details.payment))
        if fields.needsHours, let hours = service.hours(of: place, at: time) {
            set("open_now", hours.openNow.map(Record.Value.bool))
            let zone = service.timeZone
            set(
                "next_change",
                hours.nextChange.map { .string(RFC3339.format($0, utcOffset: zone.period(at: $0).utcOffset)) })
            set("intervals", .records(hours.intervals.map(Self.interval)))
        }
        return r
    }

    /// `{"vegan": "yes"}`; nil for none.
    private static func object(_ values: [String: String]) -> Record.Value? {
        guard !values.isEmpty else { return nil }
        var r = Record()
        for (key, value) in values.sorted(by: { $0.key < $1.key }) { r.set(key, .string(value)) }
        return .record(r)
    }

    /// `{"start": "09:00", "end": "17:00", "state": "open"}`: wall-clock times of the day, `end` up to
    /// `24:00`; state `open` or `unknown`, with the value's comment if it has one.
    private static func interval(_ interval: OpeningHoursInterval) -> Record {
        var r = Record()
        r.set("start", .string(RFC3339.clock(minutes: interval.start)))
        r.set("end", .string(RFC3339.clock(minutes: interval.end)))
        r.set("state", .string(interval.state == .open ? "open" : "unknown"))
        r.set("comment", interval.comment.map(Record.Value.string))
        return r
    }
}
