import PlacedCore
import PlacedJSON
import PlacedStore
import PlacedSystem
import PlacedTestSupport
import Testing

@testable import PlacedDaemon

#if canImport(Glibc)
    import Glibc
#endif

private let centre = Coordinate(latitude: 60.1699, longitude: 24.9384)

/// A daemon whose places have details, with `TimeZone=` and holidays as `config` says.
private final class DetailsFixture {
    let directory = makeTemporaryDirectory("placed-details")
    let loop: EventLoop
    let daemon: Daemon

    static let cafe = Place(
        id: "osm:node/1", name: "Kahvila", kind: "amenity=cafe", coordinate: centre,
        details: PlaceDetails(tags: [
            (key: "opening_hours", value: "Mo-Fr 08:00-18:00; PH off"), (key: "phone", value: "+358 1;+358 2"),
            (key: "diet:vegan", value: "yes"), (key: "description", value: "Pieni"),
            (key: "description:sv", value: "Liten"), (key: "brand:wikidata", value: "Q1"),
        ]))
    static let bar = Place(
        id: "osm:node/2", name: "Baari", kind: "amenity=bar",
        coordinate: LocalProjection(origin: centre).coordinate(east: 10, north: 0),
        details: PlaceDetails(tags: [(key: "opening_hours", value: "Seasonal, summer only")]))
    static let kiosk = Place(
        id: "osm:node/3", name: "Kioski", kind: "shop=kiosk",
        coordinate: LocalProjection(origin: centre).coordinate(east: 0, north: 10))

    /// Independence Day is a holiday in Finland; the cafe's `PH off` then knows which days are not.
    init(
        config: String = "[Places]\nTimeZone=Europe/Helsinki\nPublicHolidays=2026-12-06\n",
        places: [Place] = [DetailsFixture.cafe, DetailsFixture.bar, DetailsFixture.kiosk]
    ) throws {
        try PlaceDatabase.replace(at: directory + "/places.db", with: places)
        let file = directory + "/placed.conf"
        let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        writeAll(fd, config)
        close(fd)
        let loader = ConfigurationLoader(arguments: [
            "--config", file, "--db", directory + "/places.db", "--static", "60.1699,24.9384,8", "--bus", "none",
        ])
        loop = try EventLoop()
        daemon = try Daemon(configuration: try loader.reload(), loop: loop)
    }

    deinit {
        for name in ["placed.conf", "places.db", "selections.db", "selections.db-wal", "selections.db-shm"] {
            unlink(directory + "/" + name)
        }
        rmdir(directory)
    }

    /// The place's record as Details writes it, at `time` (RFC 3339).
    func details(_ id: String, fields: [String]? = nil, language: String? = nil, at time: String) throws -> [String:
        JSON]
    {
        let records = PlaceRecords(
            language: language, fields: try FieldMask.parse(fields, default: .all),
            time: try ServiceError.checkTime(time, now: 0), service: daemon)
        var bytes: [UInt8] = []
        records.record(try daemon.place(id: id, by: .root)).encodeJSON(into: &bytes)
        return try JSON(parsing: bytes).object!
    }
}

extension Credentials {
    fileprivate static let root = Credentials(uid: 0, gid: 0, groups: [])
}

@Suite(.serialized) struct DetailsTests {
    @Test func aFieldMaskIsTheStandardKeysAllOrThoseNamed() throws {
        #expect(try FieldMask.parse(nil) == .standard)
        #expect(try FieldMask.parse(nil, default: .all) == .all)
        #expect(try FieldMask.parse(["id", "*"]) == .all)
        let chosen = try FieldMask.parse(["id", "open_now", "id"])
        #expect(chosen.includes("id") && chosen.includes("open_now") && !chosen.includes("name"))
        #expect(chosen.needsHours && !FieldMask.standard.needsHours)
        #expect(FieldMask.standard.includes("likelihood") && !FieldMask.standard.includes("phone"))
        #expect(throws: ServiceError.invalidField("")) { try FieldMask.parse([]) }
        #expect(throws: ServiceError.invalidField("brand:wikidata")) { try FieldMask.parse(["id", "brand:wikidata"]) }
        #expect(Set(FieldMask.allFields).count == FieldMask.allFields.count)
    }

    @Test func aTimeIsAnRFC3339InstantWithAZone() throws {
        #expect(try ServiceError.checkTime("2026-12-07T10:00:00+02:00", now: 0) == 1_796_630_400)
        #expect(try ServiceError.checkTime("2026-12-07T08:00:00.250Z", now: 0) == 1_796_630_400)
        #expect(try ServiceError.checkTime(nil, now: 12.9) == 12)
        for bad in [
            "2026-12-07T10:00:00", "2026-13-07T10:00:00Z", "2026-02-29T10:00:00Z", "9999-01-01T00:00:00Z",
            "yesterday", "", "2026-12-07T10:00:00+25:00", "2026-12-07T10:00:00Zjunk",
        ] {
            #expect(throws: ServiceError.invalidTime(bad)) { try ServiceError.checkTime(bad, now: 0) }
        }
    }

    /// Without fields a ranked place's record is the very one written before masks existed.
    @Test func theStandardMaskWritesTheRecordAsBefore() throws {
        let fixture = try DetailsFixture()
        for place in [DetailsFixture.cafe, DetailsFixture.bar, DetailsFixture.kiosk] {
            let ranked = RankedPlace(place: place, distance: 3.5, likelihood: 0.25)
            for language in [nil, "sv"] {
                let standard = PlaceRecords(language: language, service: fixture.daemon).record(ranked)
                #expect(standard == Record.place(ranked, language: language))
            }
            let masked = PlaceRecords(
                language: nil, fields: try FieldMask.parse(["id", "likelihood"]), service: fixture.daemon
            )
            .record(ranked)
            #expect(masked.fields.map(\.key) == ["id", "likelihood"])
        }
    }

    @Test func detailsEvaluateTheHoursInTheZoneAtTheTime() throws {
        let fixture = try DetailsFixture()
        // Monday 7 December 2026, 10:00 in Helsinki (UTC+2): open until 18:00.
        let open = try fixture.details("osm:node/1", at: "2026-12-07T08:00:00Z")
        #expect(open["open_now"] == .bool(true))
        #expect(open["next_change"] == .string("2026-12-07T18:00:00+02:00"))
        #expect(open["opening_hours"] == .string("Mo-Fr 08:00-18:00; PH off"))
        #expect(open["phone"] == .array([.string("+358 1"), .string("+358 2")]))
        #expect(open["diet"] == .object(["vegan": .string("yes")]))
        #expect(open["brand_wikidata"] == .string("Q1"))
        #expect(open["description"] == .string("Pieni"))
        #expect(open["distance"] == nil && open["likelihood"] == nil, "Details ranks nothing")
        #expect(
            open["intervals"]
                == .array([.object(["start": .string("08:00"), "end": .string("18:00"), "state": .string("open")])]))
        #expect(
            try fixture.details("osm:node/1", language: "sv", at: "2026-12-07T08:00:00Z")["description"]
                == .string("Liten"))
        // Sunday: closed all day, opens Monday at 08:00.
        let sunday = try fixture.details("osm:node/1", at: "2026-12-06T12:00:00+02:00")
        #expect(sunday["open_now"] == .bool(false))
        #expect(sunday["next_change"] == .string("2026-12-07T08:00:00+02:00"))
        #expect(sunday["intervals"] == .array([]))
        // A value placed cannot parse keeps its raw text and has no open_now.
        let bar = try fixture.details("osm:node/2", at: "2026-12-07T08:00:00Z")
        #expect(bar["opening_hours"] == .string("Seasonal, summer only"))
        #expect(bar["open_now"] == nil && bar["next_change"] == nil && bar["intervals"] == nil)
        // A place without details has none of their keys.
        let kiosk = try fixture.details("osm:node/3", at: "2026-12-07T08:00:00Z")
        #expect(Set(kiosk.keys) == ["id", "name", "kind", "address_source", "latitude", "longitude", "attribution"])
        let masked = try fixture.details("osm:node/1", fields: ["open_now"], at: "2026-12-07T08:00:00Z")
        #expect(masked == ["open_now": .bool(true)])
        #expect(throws: ServiceError.unknownPlace(id: "osm:node/9")) {
            try fixture.daemon.place(id: "osm:node/9", by: .root)
        }
        #expect(fixture.daemon.isOpen(DetailsFixture.cafe, at: 1_796_630_400) == true)
        #expect(fixture.daemon.isOpen(DetailsFixture.bar, at: 1_796_630_400) == nil)
        #expect(fixture.daemon.isOpen(DetailsFixture.kiosk, at: 1_796_630_400) == nil)
    }

    /// `PH off` with no holiday list: unknown in a weekday's opening hours (a holiday would close it),
    /// closed at night either way; with the day listed, closed all day; with other days listed, open.
    /// The nearer café is closed whenever it is asked (`off`), the other open (`24/7`): with the hours
    /// factor the open one is first; with `ClosedWeight=1`, the nearer one.
    @Test func theDaemonRanksAPlaceClosedNowLower() throws {
        let closed = Place(
            id: "osm:node/10", name: "Suljettu", kind: "amenity=cafe", coordinate: centre,
            details: PlaceDetails(tags: [(key: "opening_hours", value: "off")]))
        let open = Place(
            id: "osm:node/11", name: "Auki", kind: "amenity=cafe",
            coordinate: LocalProjection(origin: centre).coordinate(east: 8, north: 0),
            details: PlaceDetails(tags: [(key: "opening_hours", value: "24/7")]))
        for (config, first) in [
            ("[Places]\nTimeZone=UTC\n", open.id), ("[Places]\nTimeZone=UTC\nClosedWeight=1\n", closed.id),
        ] {
            let fixture = try DetailsFixture(config: config, places: [closed, open])
            let ranked = try fixture.daemon.rank(
                latitude: centre.latitude, longitude: centre.longitude, accuracy: 10, limit: 2, by: .root)
            #expect(
                ranked.map(\.place.id) == (first == open.id ? [open.id, closed.id] : [closed.id, open.id]), "\(config)")
        }
    }

    @Test func publicHolidaysAreUnknownUntilListed() throws {
        let unlisted = try DetailsFixture(config: "[Places]\nTimeZone=Europe/Helsinki\n")
        let monday = try unlisted.details("osm:node/1", at: "2026-12-07T10:00:00+02:00")
        #expect(monday["open_now"] == nil, "\(monday)")
        #expect(
            monday["intervals"]
                == .array([.object(["start": .string("08:00"), "end": .string("18:00"), "state": .string("unknown")])]))
        #expect(try unlisted.details("osm:node/1", at: "2026-12-07T22:00:00+02:00")["open_now"] == .bool(false))
        #expect(unlisted.daemon.isOpen(DetailsFixture.cafe, at: 1_796_630_400) == nil)
        let listed = try DetailsFixture(config: "[Places]\nTimeZone=Europe/Helsinki\nPublicHolidays=2026-12-07\n")
        let holiday = try listed.details("osm:node/1", at: "2026-12-07T10:00:00+02:00")
        #expect(holiday["open_now"] == .bool(false))
        #expect(holiday["intervals"] == .array([]))
        let other = try DetailsFixture(config: "[Places]\nTimeZone=Europe/Helsinki\nPublicHolidays=2026-12-24\n")
        #expect(try other.details("osm:node/1", at: "2026-12-07T10:00:00+02:00")["open_now"] == .bool(true))
    }

    @Test func holidayListsAndZonesAreCheckedWhenRead() throws {
        #expect(
            try HoursSettings.parseDays("2026-12-06, 2026-12-24..2026-12-26") == [
                CivilDate(year: 2026, month: 12, day: 6), CivilDate(year: 2026, month: 12, day: 24),
                CivilDate(year: 2026, month: 12, day: 25), CivilDate(year: 2026, month: 12, day: 26),
            ])
        for bad in ["2026-12-32", "2026-12-26..2026-12-24", "tomorrow", "2026-1-5", "2000-01-01..2030-01-01"] {
            #expect(throws: HoursSettingError.self) { try HoursSettings.parseDays(bad) }
        }
        #expect(throws: HoursSettingError.self) { try HoursSettings.zone(named: "Europe/Atlantis") }
        #expect(throws: HoursSettingError.self) { try HoursSettings.zone(named: "../../etc/passwd") }
        let helsinki = try HoursSettings.zone(named: "Europe/Helsinki")
        #expect(helsinki.period(at: 1_796_630_400).utcOffset == 7200)
        let (zone, source) = HoursSettings.loadZone(named: "", environment: ":Europe/Helsinki")
        #expect(zone == helsinki && source == "TZ=Europe/Helsinki")
        #expect(HoursSettings.loadZone(named: "", environment: "Nowhere/Town").1 != "TZ=Nowhere/Town")
    }
}
