import PlacedCore
import PlacedTestSupport
import Testing

@testable import PlacedOSM

/// The text made from tags in one buffer (`address`, a place's kind) is the text the parts joined as
/// Strings make, for empty parts, non-ASCII and invalid UTF-8 (repaired the same way) alike; and the
/// spatial grid's row-by-row search finds what a search cell by cell finds, across column 0 too.
struct ElementTagsTests {
    /// A string table of `strings` (index 0 the empty string, as PBF writers put it).
    static func withTable<T>(_ strings: [[UInt8]], _ body: (StringTable) throws -> T) throws -> T {
        var message: [UInt8] = []
        for string in [[]] + strings {
            message.append(0x0A)
            var length = string.count
            repeat {
                message.append(UInt8(length & 0x7F) | (length >= 0x80 ? 0x80 : 0))
                length >>= 7
            } while length > 0
            message += string
        }
        return try message.withUnsafeBytes { bytes in
            var table = StringTable()
            try table.load(ProtobufReader(bytes))
            return try body(table)
        }
    }

    /// The address as the parts decoded one by one and joined.
    static func joinedAddress(_ parts: [[UInt8]?]) -> String? {
        func joined(_ pair: ArraySlice<[UInt8]?>) -> String {
            pair.compactMap { $0 }.filter { !$0.isEmpty }.map { String(decoding: $0, as: UTF8.self) }.joined(
                separator: " ")
        }
        let line = [joined(parts[0..<2]), joined(parts[2..<4])].filter { !$0.isEmpty }.joined(separator: ", ")
        return line.isEmpty ? nil : line
    }

    static let samples: [[UInt8]?] = [
        nil, [], Array("Mannerheimintie".utf8), Array("52 B".utf8), Array("Tölö".utf8), Array("東京".utf8),
        [0xE2, 0x82], [0x80, 0x41], [0x41, 0xF0, 0x9F], [0xFF], Array("🏠".utf8),
    ]

    @Test func addressesAreThePartsJoined() throws {
        var random = SplitMix64(seed: 19)
        let roles = [PlaceRules.street, PlaceRules.housenumber, PlaceRules.postcode, PlaceRules.city]
        for _ in 0..<2_000 {
            let parts = (0..<4).map { _ in Self.samples[Int(random.next() % UInt64(Self.samples.count))] }
            try Self.withTable(parts.map { $0 ?? [] }) { table in
                var tags = ElementTags()
                for (index, part) in parts.enumerated() where part != nil {
                    tags.record(role: roles[index], key: 0, value: UInt32(index + 1))
                }
                let expected = Self.joinedAddress(parts)
                #expect(tags.address(table) == expected, "\(parts)")
                let lendable = (parts[0]?.isEmpty ?? true) ? nil : expected
                #expect(tags.lendableAddress(table) == lendable, "\(parts)")
            }
        }
    }

    @Test func aKindIsTheKeyAndTheValue() throws {
        for sample in Self.samples {
            guard let value = sample, !value.isEmpty else { continue }
            try Self.withTable([Array("Nimi".utf8), value]) { table in
                var tags = ElementTags()
                tags.record(role: PlaceRules.name, key: 0, value: 1)
                tags.record(role: PlaceRules.building, key: 0, value: 2)
                let place = tags.place(isWay: true, strings: table)
                #expect(place?.kind == "building=\(String(decoding: value, as: UTF8.self))")
                #expect(place?.name == "Nimi" && place?.address == nil)
                tags.record(role: PlaceRules.amenity, key: 0, value: 2)
                #expect(
                    tags.place(isWay: false, strings: table)?.kind
                        == "amenity=\(String(decoding: value, as: UTF8.self))")
            }
        }
    }

    /// At a pole the search box is every longitude and on the antimeridian it is two arcs: the grid
    /// answers from both sides, and at once (its columns at the pole were trillions, counted one by one).
    @Test func theGridAnswersAtThePolesAndAcrossTheAntimeridian() {
        func box(_ latitude: Double, _ longitude: Double) -> BoundingBox {
            BoundingBox(minLatitude: latitude, minLongitude: longitude, maxLatitude: latitude, maxLongitude: longitude)
        }
        let polar = SpatialGrid(latitude: 89.9999, boxes: [box(89.9999, 135), box(89.9999, -45), box(89.99, 0)])
        var found: [Int] = []
        polar.candidates(within: 30, of: Coordinate(latitude: 90, longitude: 0), into: &found)
        #expect(found == [0, 1], "both sides of the pole, 11 m away; not the one 1.1 km away")

        let dateLine = SpatialGrid(latitude: 0, boxes: [box(0, 179.9999), box(0, -179.9999), box(0, 179.99)])
        dateLine.candidates(within: 30, of: Coordinate(latitude: 0, longitude: 180), into: &found)
        #expect(found == [0, 1], "11 m either side of the antimeridian")
        dateLine.candidates(within: 30, of: Coordinate(latitude: 0, longitude: -180), into: &found)
        #expect(found == [0, 1])
    }

    @Test func theGridFindsWhatEachCellHolds() {
        var random = SplitMix64(seed: 23)
        // Boxes around longitude 0 (columns either side of 0) and latitude 0 (rows either side).
        let boxes = (0..<3_000).map { _ -> BoundingBox in
            let latitude = Double(random.next() % 20_000) / 1e6 - 0.01
            let longitude = Double(random.next() % 20_000) / 1e6 - 0.01
            let size = Double(random.next() % 100) / 1e6
            return BoundingBox(
                minLatitude: latitude, minLongitude: longitude, maxLatitude: latitude + size,
                maxLongitude: longitude + size)
        }
        let grid = SpatialGrid(latitude: 0, boxes: boxes)
        var found: [Int] = []
        for _ in 0..<500 {
            let center = Coordinate(
                latitude: Double(random.next() % 20_000) / 1e6 - 0.01,
                longitude: Double(random.next() % 20_000) / 1e6 - 0.01)
            let radius = [0.0, 30, 250][Int(random.next() % 3)]
            grid.candidates(within: radius, of: center, into: &found)
            // Every box within the radius (50 m cells: its cells and the search's overlap) is found.
            let projection = LocalProjection(origin: center)
            let low = projection.coordinate(east: -radius, north: -radius)
            let high = projection.coordinate(east: radius, north: radius)
            let near = boxes.indices.filter {
                boxes[$0].minLatitude <= high.latitude && boxes[$0].maxLatitude >= low.latitude
                    && boxes[$0].minLongitude <= high.longitude && boxes[$0].maxLongitude >= low.longitude
            }
            #expect(Set(near).isSubset(of: Set(found)))
            #expect(Set(found).count == found.count, "each item once")
        }
    }
}
