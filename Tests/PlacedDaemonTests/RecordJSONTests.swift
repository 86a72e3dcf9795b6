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
        case let .strings(items): .array(items.map(JSON.string))
        case let .record(r): expected(r)
        case let .records(rs): .array(rs.map(expected))
        }
    }

    /// A place's lists (phones, cuisines) are arrays of strings, escaped as any string is.
    @Test func listsOfTextsAreArraysOfStrings() throws {
        var record = Record()
        record.set("phone", .strings(["+358 1", "a\"b\\c\n", "ä😀"]))
        record.set("level", .strings([]))
        try expectSame(record)
        #expect(written(record) == #"{"level":[],"phone":["+358 1","a\"b\\c\n","ä😀"]}"#)
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
