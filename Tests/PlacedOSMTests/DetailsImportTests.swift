import Foundation
import PlacedCore
import Testing

@testable import PlacedOSM

/// The details an import keeps (docs/DESIGN.md, "Place details"): the `contact:` forms merged, lists
/// split, keys outside the list ignored, the opening hours it cannot parse counted and named, and a
/// hostile megabyte of `opening_hours` dropped by name without harm to the rest.
@Suite struct DetailsImportTests {
    /// OPL escapes every character that is not a letter or digit as %hex%.
    static func escaped(_ text: String) -> String {
        text.unicodeScalars.map {
            ($0.properties.isAlphabetic || ("0"..."9").contains($0)) && $0.isASCII
                ? String($0) : "%\(String($0.value, radix: 16))%"
        }.joined()
    }

    static func tags(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(escaped($0.0))=\(escaped($0.1))" }.joined(separator: ",")
    }

    @Test(.enabled(if: Fixtures.osmium != nil, "osmium-tool writes the test file"))
    func anImportKeepsTheDetailsNormalized() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cafe = Self.tags([
            ("name", "Kahvila"), ("amenity", "cafe"), ("opening_hours", "Mo-Fr 08:00-18:00; Sa 10:00-16:00"),
            ("phone", "+358 9 123"), ("contact:phone", "+358 9 123; +358 40 555"),
            ("contact:website", "https://kahvila.example"), ("cuisine", "coffee_shop;cake; coffee_shop"),
            ("diet:vegan", "yes"), ("payment:cash", "no"), ("payment:visa", "yes"), ("description", "Pieni"),
            ("description:sv", "Liten"), ("wheelchair", "limited"), ("brand:wikidata", "Q1"), ("fixme", "x"),
            ("survey:date", "2024"),
        ])
        let bar = Self.tags([("name", "Baari"), ("amenity", "bar"), ("opening_hours", "Seasonal, summer only")])
        let opl = [
            "n1 v1 x24.9400000 y60.1700000 T\(cafe)",
            "n2 v1 x24.9401000 y60.1701000 T\(bar)",
            "n3 v1 x24.9402000 y60.1702000 T\(Self.tags([("name", "Kioski"), ("shop", "kiosk")]))",
        ].joined(separator: "\n")
        let file = try Fixtures.pbf(fromOPL: opl + "\n", in: directory)
        let extract = try OSM.extractPlaces(path: file, mapLayer: false)
        let places = Dictionary(uniqueKeysWithValues: extract.places.map { ($0.id, $0) })
        let details = try #require(places["osm:node/1"]).details
        #expect(details.list("phone") == ["+358 9 123", "+358 40 555"], "contact:phone merged, repeats dropped")
        #expect(details.list("website") == ["https://kahvila.example"])
        #expect(details.list("cuisine") == ["coffee_shop", "cake"])
        #expect(details.diet == ["vegan": "yes"])
        #expect(details.payment == ["cash": "no", "visa": "yes"])
        #expect(details.description(forLanguage: "sv-FI") == "Liten")
        #expect(details.description(forLanguage: nil) == "Pieni")
        #expect(details.value("wheelchair") == "limited")
        #expect(details.value("brand:wikidata") == "Q1")
        #expect(details.openingHours == "Mo-Fr 08:00-18:00; Sa 10:00-16:00")
        #expect(details.tags["fixme"] == nil && details.tags["survey:date"] == nil, "keys outside the list")
        #expect(places["osm:node/3"]?.details.isEmpty == true)
        #expect(try #require(places["osm:node/2"]).details.openingHours == "Seasonal, summer only", "kept raw")

        let statistics = extract.statistics.details
        #expect(statistics.placesWithDetails == 2)
        #expect(statistics.openingHours == 2)
        #expect(statistics.unparsedOpeningHours == 1)
        #expect(
            statistics.unparsed.count == 1 && statistics.unparsed[0].hasPrefix("osm:node/2: 'Seasonal, summer only': "))
        #expect(statistics.droppedValues == 0)
    }

    /// A node whose `opening_hours` is a megabyte (OSM allows 255 characters): the value is dropped and
    /// named, the place and its other details kept, and the import goes on.
    @Test func aMegabyteOfOpeningHoursIsDroppedByName() throws {
        let huge = String(repeating: "Mo-Fr 08:00-18:00; ", count: 55_189)  // 1,048,591 bytes
        let strings = ["", "name", "Huge", "amenity", "cafe", "opening_hours", huge, "phone", "+358 1"]
        let table = PBF.field(1, strings.flatMap { PBF.field(1, Array($0.utf8)) })
        let dense =
            PBF.field(1, PBF.varint(PBF.zigzag(7))) + PBF.field(8, PBF.varint(PBF.zigzag(601_700_000)))
            + PBF.field(9, PBF.varint(PBF.zigzag(249_400_000)))
            + PBF.field(10, [1, 2, 3, 4, 5, 6, 7, 8, 0].flatMap { PBF.varint($0) })
        let block = PBF.blob(type: "OSMData", PBF.field(1, table + PBF.field(2, PBF.field(2, dense))))
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("huge.osm.pbf").path
        try Data(PBF.header() + block).write(to: URL(fileURLWithPath: file))

        let extract = try OSM.extractPlaces(path: file, mapLayer: false)
        let place = try #require(extract.places.first)
        #expect(place.id == "osm:node/7" && place.name == "Huge")
        #expect(place.details.openingHours == nil)
        #expect(place.details.list("phone") == ["+358 1"])
        let statistics = extract.statistics.details
        #expect(statistics.droppedValues == 1)
        #expect(statistics.dropped == ["osm:node/7: opening_hours: \(huge.utf8.count) bytes"])
        #expect(statistics.openingHours == 0)
    }
}
