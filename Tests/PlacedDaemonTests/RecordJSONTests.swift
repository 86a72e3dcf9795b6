import Foundation
import PlacedJSON
import PlacedStore
import PlacedTestSupport
import PlacedVarlink
import Testing

@testable import PlacedCore  // Visit's memberwise initializer
@testable import PlacedDaemon

/// `Record.encodeJSON(into:)` is the one JSON encoding of records, in every varlink reply and fleet
/// payload. What it writes must parse (PlacedJSON's parser) to the object the record describes —
/// `expected`, below: keys as a dictionary holds them (the last of a repeated key), integers as
/// numbers, doubles that are not finite as null — and be byte for byte what `JSON.encode` makes of
/// that object (compact, keys in `JSON.keyPrecedes` order), as the replies were before.
@Suite struct RecordJSONTests {
    private func written(_ record: Record) -> String {
        var bytes: [UInt8] = []
        record.encodeJSON(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What a record means as JSON, built independently of the writer.
    private func expected(_ record: Record) -> JSON {
        var object: [String: JSON] = [:]
        for (key, value) in record.fields { object[key] = expected(value) }
        return .object(object)
    }

    private func expected(_ value: Record.Value) -> JSON {
        switch value {
        case let .string(s): .string(s)
        case let .double(d): d.isFinite ? .number(d) : .null
        case let .int(i): .number(Double(i))
        case let .uint(u): .number(Double(u))
        case let .bool(b): .bool(b)
        case let .record(r): expected(r)
        case let .records(rs): .array(rs.map(expected))
        }
    }

    private func expectSame(_ record: Record, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let text = written(record)
        let parsed = try JSON(parsing: text)
        #expect(parsed == expected(record), sourceLocation: sourceLocation)
        #expect(text == (try parsed.serialized()), "canonical bytes", sourceLocation: sourceLocation)
    }

    private let cafe = RankedPlace(
        place: Place(
            id: "osm:node/42", name: "Café \"Ekberg\" \\ 1852", kind: "amenity=cafe",
            address: "Bulevardi 9,\n00120 Helsinki\t\u{1}",
            coordinate: Coordinate(latitude: 60.1634, longitude: 24.9383),
            addressSource: .building, localizedNames: ["sv": "Kafé Ekberg", "ja": "カフェ・エクベリ", "ar": "مقهى 😀"]),
        distance: 12.345678901234, likelihood: 0.1)

    @Test func everyPlaceShapeIsWrittenAsTheJSONValueIs() throws {
        for language in [nil, "sv", "ja_JP.UTF-8", "ar", "xx"] {
            try expectSame(Record.place(cafe, language: language))
        }
        var bare = cafe
        bare.place.address = nil
        bare.place.addressSource = .none
        bare.distance = 0
        bare.likelihood = 1
        try expectSame(Record.place(bare, language: nil))
        // A name that is all escapes and characters outside the BMP.
        var odd = cafe
        odd.place.name = "\u{0}\u{1F}\u{7F}\"\\/\u{2028}𝄞"
        try expectSame(Record.place(odd, language: nil))
        #expect(written(Record.place(odd, language: nil)).contains(#""name":"\u0000\u001f\#u{7F}\"\\/\#u{2028}𝄞""#))
    }

    @Test func numbersAsTheJSONValuePathWritesThem() throws {
        let doubles: [Double] = [
            0, -0.0, 1, -1, 0.1, 1e-7, 1e20, 1e300, -2.5e-300, 9_007_199_254_740_992, 9_007_199_254_740_993.0 * 4,
            .leastNonzeroMagnitude, .greatestFiniteMagnitude, 60.1698765, 24.93847654321,
        ]
        for value in doubles {
            var ranked = cafe
            ranked.distance = value
            ranked.likelihood = -value
            try expectSame(Record.place(ranked, language: nil))
        }
        var record = Record()
        record.set("int", .int(.min))
        record.set("int2", .int(1 << 60))
        record.set("small", .int(-3))
        record.set("uint", .uint(.max))
        record.set("uint2", .uint(7))
        record.set("yes", .bool(true))
        record.set("no", .bool(false))
        try expectSame(record)
    }

    @Test func nonFiniteDoublesAreNullAsBefore() throws {
        for value in [Double.nan, .infinity, -.infinity, .signalingNaN] {
            var ranked = cafe
            ranked.distance = value
            let text = written(Record.place(ranked, language: nil))
            #expect(text.contains(#""distance":null"#))
            try expectSame(Record.place(ranked, language: nil))
        }
    }

    @Test func nestedRecordsMarkersVisitsAndLocations() throws {
        let fix = Fix(
            time: 1_700_000_000.25, receivedAt: 5_000_000, coordinate: Coordinate(latitude: 60.17, longitude: 24.94),
            mode: .threeD, accuracy: 4, altitude: .nan, speed: 1.5, heading: nil)
        try expectSame(Record.location(fix, now: 6_250_000))
        try expectSame(Record.location(Fix(coordinate: Coordinate(latitude: -33.9, longitude: 151.2)), now: nil))
        let marker = Marker(
            selection: 17, place: cafe, location: fix, time: 1_700_000_123.456, generation: 99, automatic: true)
        try expectSame(Record.marker(marker))
        let visit = Visit(
            id: 3, startedAt: 1_000_000, endedAt: 301_000_000, lastSeenAt: 301_000_000,
            centre: Coordinate(latitude: 60.1, longitude: 24.9), accuracy: 3.3, fixes: 300, mode: .threeD)
        let clock = ServiceClock(monotonic: 400_000_000, wall: 1_700_000_000)
        let ranking = Ranking(generation: 12, fix: fix, places: [cafe, cafe], noneLikelihood: 0.2, radius: 150)
        try expectSame(Record.visit(visit, clock: clock, ranking: ranking, language: "sv"))
        try expectSame(Record.visit(visit, clock: clock, place: cafe, selection: marker, language: nil))
        var empty = Record()
        try expectSame(empty)
        empty.set("places", .records([]))
        try expectSame(empty)
    }

    @Test func keysSortedByUTF8BytesAndTheLastOfARepeatedKeyWins() throws {
        var record = Record()
        for key in ["zeta", "Zeta", "é", "e", "", "a b", "a", "ab", "éa", "😀", "z", "a"] {
            record.set(key, .string("value of \(key)"))
        }
        record.set("a", .int(2))
        try expectSame(record)
        let text = written(record)
        #expect(text.hasPrefix(#"{"":"value of ","Zeta":"#), "byte order puts upper case first")
        #expect(text.contains(#""a":2,"a b""#), "the last value of a repeated key, written once")
    }

    @Test func anArrayOfRecordsOfChangingShapes() throws {
        var bare = cafe
        bare.place.address = nil
        var twice = Record.place(cafe, language: nil)
        twice.set("id", .string("osm:way/7"))
        let records = [
            Record.place(cafe, language: nil), Record.place(cafe, language: "ja"), Record.place(bare, language: nil),
            Record.place(cafe, language: nil), twice, twice, Record(), Record.place(bare, language: "sv"),
        ]
        var bytes: [UInt8] = []
        Record.encodeJSON(array: records, into: &bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        let parsed = try JSON(parsing: text)
        #expect(parsed == .array(records.map(expected)))
        #expect(text == (try parsed.serialized()))
        #expect(String(decoding: bytes, as: UTF8.self).contains(#""id":"osm:way/7""#))
    }

    @Test func randomRecordsMatchTheJSONValuePath() throws {
        var random = SplitMix64(seed: 19)
        let keys = ["id", "name", "kind", "address", "latitude", "x", "é", "Z", "places", "place"]
        func string() -> String {
            let pieces = ["a", "ä", "\"", "\\", "\n", "\u{1}", "😀", " ", "カ", "\u{7F}"]
            return (0..<Int(random.next() % 6)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }
                .joined()
        }
        func record(depth: Int) -> Record {
            var r = Record()
            for _ in 0..<Int(random.next() % 8) {
                let key = keys[Int(random.next() % UInt64(keys.count))]
                switch random.next() % 7 {
                case 0: r.set(key, .string(string()))
                case 1: r.set(key, .double(Double(bitPattern: random.next())))
                case 2: r.set(key, .int(Int64(bitPattern: random.next()) >> (random.next() % 64)))
                case 3: r.set(key, .uint(random.next() >> (random.next() % 64)))
                case 4: r.set(key, .bool(random.next() % 2 == 0))
                case 5 where depth < 3: r.set(key, .record(record(depth: depth + 1)))
                default:
                    r.set(
                        key,
                        .records(depth < 3 ? (0..<Int(random.next() % 3)).map { _ in record(depth: depth + 1) } : []))
                }
            }
            return r
        }
        for _ in 0..<2_000 { try expectSame(record(depth: 0)) }
    }

    @Test func thePlaceShapeHasTheInterfaceKeysAndTypes() throws {
        let parsed = try JSON(parsing: written(Record.place(cafe, language: "sv")))
        let object = try #require(parsed.object)
        #expect(
            object.keys.sorted() == [
                "address", "address_source", "attribution", "distance", "id", "kind", "latitude", "likelihood",
                "longitude", "name",
            ])
        #expect(object["name"] == .string("Kafé Ekberg"))
        #expect(object["address"] == .string("Bulevardi 9,\n00120 Helsinki\t\u{1}"))
        #expect(object["address_source"] == .string("building"))
        #expect(object["latitude"] == .number(60.1634))
        #expect(object["distance"] == .number(12.345678901234))
    }

    /// The fast path of the `Rank` reply writes what the records of its places write.
    @Test func placeListsAreWrittenAsTheirRecordsAre() throws {
        var random = SplitMix64(seed: 24)
        func string() -> String {
            let pieces = ["a", "ä", "\"", "\\", "\n", "\u{1}", "😀", " ", "カ", "\u{7F}", "osm:node/123456789"]
            return (0..<Int(random.next() % 6)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }
                .joined()
        }
        var bare = cafe
        bare.place.address = nil
        bare.place.addressSource = .none
        bare.distance = 0
        bare.likelihood = 1
        var odd = cafe
        odd.place.name = "\u{0}\u{1F}\u{7F}\"\\/\u{2028}𝄞"
        odd.distance = .nan
        odd.likelihood = .infinity
        var lists: [[RankedPlace]] = [[], [cafe], [bare], [cafe, bare, odd, cafe], [bare, bare]]
        for _ in 0..<300 {
            lists.append(
                (0..<Int(random.next() % 21)).map { _ in
                    var names: [String: String] = [:]
                    for language in ["sv", "ja", "fi"] where random.next() % 2 == 0 { names[language] = string() }
                    let sources = AddressSource.allCases
                    return RankedPlace(
                        place: Place(
                            id: string(), name: string(), kind: string(),
                            address: random.next() % 3 == 0 ? nil : string(),
                            coordinate: Coordinate(
                                latitude: random.uniform(in: -90...90), longitude: random.uniform(in: -180...180)),
                            addressSource: sources[Int(random.next() % UInt64(sources.count))], localizedNames: names),
                        distance: random.next() % 5 == 0 ? 0 : random.uniform(in: 0...300),
                        likelihood: random.next() % 9 == 0
                            ? Double(bitPattern: random.next()) : random.uniform(in: 0...1))
                })
        }
        for places in lists {
            for language in [nil, "sv", "ja_JP.UTF-8", "fi", "xx"] {
                var fast: [UInt8] = []
                PlaceListJSON.encode(parameters: places, language: language, into: &fast)
                var parameters = Record()
                parameters.set("places", .records(places.map { Record.place($0, language: language) }))
                #expect(String(decoding: fast, as: UTF8.self) == written(parameters))
            }
        }
    }

    /// The `Rank` reply's places written from a places file's records (`PlaceListing`) are what the
    /// records of the places `PlaceCatalog.rank` decodes write: random places with escapes, non-ASCII
    /// text, addresses or none, localized names (empty ones, keys a String compares by canonical
    /// equivalence), points and areas, ranked at random fixes in several languages.
    @Test func placeListingsAreWrittenAsTheirDecodedPlacesRecordsAre() throws {
        var random = SplitMix64(seed: 19)
        func string(_ pieces: [String]) -> String {
            (0..<Int(random.next() % 6)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
        }
        let text = ["a", "ä", "\"", "\\", "\n", "\u{1}", "😀", " ", "カ", "\u{7F}", "Mannerheimintie 1", "\u{1F}"]
        // A localized name holds neither separator of the names column, and its key is not empty.
        let localized = text.filter { $0 != "\u{1F}" }
        let keys = ["sv", "fi", "ja", "sv-fi", "zh-hant", "sv-\u{37E}", "sv-;", "en"]
        let centre = Coordinate(latitude: 60.17, longitude: 24.94)
        let projection = LocalProjection(origin: centre)
        let places = (0..<1500).map { number in
            var names: [String: String] = [:]
            for key in keys where random.next() % 4 == 0 {
                names[key] = random.next() % 5 == 0 ? "" : string(localized)
            }
            let point = projection.coordinate(
                east: random.uniform(in: -400...400), north: random.uniform(in: -400...400))
            var place = Place(
                id: "osm:node/\(number)" + string(text), name: string(text), kind: string(["amenity=cafe", "ä", "\""]),
                address: random.next() % 3 == 0 ? nil : string(text), coordinate: point,
                addressSource: AddressSource.allCases[Int(random.next() % 5)], localizedNames: names)
            if random.next() % 6 == 0 {
                let half = random.uniform(in: 5...60)
                let ring = [(-1.0, -1.0), (1, -1), (1, 1), (-1, 1), (-1, -1)].map {
                    LocalProjection(origin: point).coordinate(east: $0.0 * half, north: $0.1 * half)
                }
                place.area = 4 * half * half
                place.outline = ring
                place.bounds = BoundingBox(
                    minLatitude: ring[0].latitude, minLongitude: ring[0].longitude, maxLatitude: ring[2].latitude,
                    maxLongitude: ring[2].longitude)
            }
            return place
        }
        let directory = makeTemporaryDirectory("placed-listing")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try PlaceDatabase.replace(at: directory + "/places.db", with: places)
        let catalog = try PlaceCatalog(path: directory + "/places.db")
        let ranker = try Ranker()
        var compared = 0
        for _ in 0..<150 {
            let fix = Fix(
                coordinate: projection.coordinate(
                    east: random.uniform(in: -300...300), north: random.uniform(in: -300...300)),
                accuracy: [nil, 3, 20, 80][Int(random.next() % 4)])
            let limit = [1, 5, 20][Int(random.next() % 3)]
            let ranking = try catalog.rank(fix, with: ranker, picks: PickMemory(), now: 0, limit: limit)
            let listing = try catalog.rankListing(fix, with: ranker, picks: PickMemory(), now: 0, limit: limit)
            #expect(listing.rankedPlaces == ranking.places)
            for language in [nil, "sv", "sv_FI.UTF-8", "ja", "zh-Hant-TW", "sv-;", "en", "xx", ""] {
                var fast: [UInt8] = []
                PlaceListJSON.encode(parameters: listing, language: language, into: &fast)
                var parameters = Record()
                parameters.set("places", .records(ranking.places.map { Record.place($0, language: language) }))
                #expect(String(decoding: fast, as: UTF8.self) == written(parameters))
                compared += ranking.places.count
            }
        }
        #expect(compared > 10_000)
    }

    /// A kind whose bytes in the file are not UTF-8 (written by something else, or damaged) is written as
    /// its decoded place's, repaired, as every other string is; and a place of the longest text each
    /// byte of which is escaped fits the bound a place's writer is sized by (it traps beyond it).
    @Test func kindsNotUTF8InTheFileAndTheWorstEscapedTextAreWrittenAsDecoded() throws {
        let centre = Coordinate(latitude: 60.17, longitude: 24.94)
        let worst = String(repeating: "\u{1}", count: 300)
        let projection = LocalProjection(origin: centre)
        let places = [
            Place(
                id: "osm:node/0", name: "Place 0", kind: "shop=bakery",
                coordinate: projection.coordinate(east: 0, north: 0)),
            Place(
                id: "osm:node/1", name: "Place 1", kind: "amenity=caf\u{E9}",
                coordinate: projection.coordinate(east: 10, north: 0)),
            Place(
                id: "osm:node/2" + worst, name: worst, kind: worst, address: worst,
                coordinate: projection.coordinate(east: 20, north: 0), addressSource: .building),
        ]
        let directory = makeTemporaryDirectory("placed-listing-kind")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/places.db"
        try PlaceDatabase.replace(at: path, with: places)
        // é is C3 A9: FF A9 is not UTF-8, wherever the file holds the kind (its tables and the rows).
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let kind = Array("amenity=caf\u{E9}".utf8)
        var patched = 0
        for start in 0...(bytes.count - kind.count) where bytes[start..<start + kind.count].elementsEqual(kind) {
            bytes[start + kind.count - 2] = 0xFF
            patched += 1
        }
        #expect(patched >= 2)
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let catalog = try PlaceCatalog(path: path)
        let ranker = try Ranker()
        let fix = Fix(coordinate: centre, accuracy: 10)
        let ranking = try catalog.rank(fix, with: ranker, picks: PickMemory(), now: 0, limit: 3)
        let listing = try catalog.rankListing(fix, with: ranker, picks: PickMemory(), now: 0, limit: 3)
        #expect(ranking.places.count == 3)
        #expect(ranking.places.contains { $0.place.kind == "amenity=caf\u{FFFD}\u{FFFD}" })
        var fast: [UInt8] = []
        PlaceListJSON.encode(parameters: listing, language: nil, into: &fast)
        var parameters = Record()
        parameters.set("places", .records(ranking.places.map { Record.place($0, language: nil) }))
        // Compared as bytes: decoding them would repair them.
        let text = written(parameters)
        #expect(fast.elementsEqual(text.utf8), "\(String(decoding: fast, as: UTF8.self)) against \(text)")
    }

    @Test func aRecordReplyIsFramedAsTheJSONValueReply() throws {
        var parameters = Record()
        parameters.set("generation", .uint(3))
        parameters.set("places", .records([cafe, cafe].map { Record.place($0, language: nil) }))
        let object = try #require(try JSON(parsing: written(parameters)).object)
        for continues in [false, true] {
            let bytes = VarlinkWire.reply(continues: continues, capacity: 16) { parameters.encodeJSON(into: &$0) }
            #expect(bytes == (try VarlinkWire.reply(object, continues: continues)))
        }
    }
}
