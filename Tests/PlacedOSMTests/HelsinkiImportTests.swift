import Foundation
import PlacedCore
import Testing

@testable import PlacedOSM

/// The Helsinki extract against an independent reader: osmium-tool filters and exports the same
/// file, and this test applies the place rules (docs/DESIGN.md, "Place data") to osmium's GeoJSON on its own.
@Suite(.enabled(if: Fixtures.osmium != nil, "skipped: osmium-tool is not installed"))
struct HelsinkiImportTests {
    /// A place as osmium sees it.
    struct Expected {
        var id: String
        var name: String
        var kind: String
        var address: String?
        /// Node position, or a way's vertices as osmium's linestring has them, or a relation's outer
        /// rings' vertices.
        var points: [Coordinate]
        var isArea: Bool
        /// A relation's polygons as osmium assembled them (outer ring, then holes).
        var polygons: [[[Coordinate]]] = []
    }

    /// docs/DESIGN.md, "Place data", written out independently of PlaceRules.
    static let mainKeys: [(key: String, qualifies: @Sendable (String) -> Bool)] = [
        (
            "amenity", { !["parking_space", "parking_entrance", "waste_disposal", "bench"].contains($0) }
        ),
        ("shop", { _ in true }), ("tourism", { _ in true }), ("leisure", { _ in true }),
        ("office", { _ in true }), ("craft", { _ in true }), ("club", { _ in true }),
        ("emergency", { $0 != "fire_hydrant" }), ("healthcare", { _ in true }),
        ("historic", { _ in true }),
        ("public_transport", { _ in true }),
        ("railway", { ["station", "halt", "tram_stop"].contains($0) }),
        ("highway", { $0 == "bus_stop" }), ("aeroway", { ["aerodrome", "terminal"].contains($0) }),
    ]

    static func kind(_ tags: [String: String], isWay: Bool) -> String? {
        guard let name = tags["name"], !name.isEmpty else { return nil }
        for (key, qualifies) in mainKeys {
            if let value = tags[key], !value.isEmpty, qualifies(value) { return "\(key)=\(value)" }
        }
        if isWay, let building = tags["building"], !building.isEmpty, building != "no" {
            return "building=\(building)"
        }
        return nil
    }

    static func address(_ tags: [String: String]) -> String? {
        let street = [tags["addr:street"], tags["addr:housenumber"]].compactMap { $0 }.filter {
            !$0.isEmpty
        }
        let city = [tags["addr:postcode"], tags["addr:city"]].compactMap { $0 }.filter { !$0.isEmpty }
        let line = [street.joined(separator: " "), city.joined(separator: " ")].filter { !$0.isEmpty }
        return line.isEmpty ? nil : line.joined(separator: ", ")
    }

    /// osmium tags-filter (the main keys) | osmium export -f geojsonseq, then the rules above; areas
    /// from multipolygon relations are osmium's own assembly.
    static func expectedPlaces() throws -> [String: Expected] {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let filtered = directory.appendingPathComponent("filtered.osm.pbf").path
        let exported = directory.appendingPathComponent("places.geojsonseq").path
        let expressions = [
            "nw/amenity", "nw/shop", "nw/tourism", "nw/leisure", "nw/office", "nw/craft", "nw/club",
            "nw/emergency",
            "nw/healthcare", "nw/historic", "nw/public_transport", "nw/railway=station,halt,tram_stop",
            "nw/highway=bus_stop", "nw/aeroway=aerodrome,terminal", "w/building",
        ]
        let relationExpressions = expressions.map { "r/" + $0.split(separator: "/", maxSplits: 1)[1] }
        try Fixtures.runOsmium(
            ["tags-filter", Fixtures.helsinki] + expressions + relationExpressions + ["-o", filtered, "--overwrite"])
        try Fixtures.runOsmium([
            "export", filtered, "-f", "geojsonseq", "-a", "type,id", "-o", exported, "--overwrite",
        ])

        var places: [String: Expected] = [:]
        let text = try String(contentsOfFile: exported, encoding: .utf8)
        for line in text.split(separator: "\n") {
            let json = line.drop { $0 == "\u{1E}" }  // RFC 8142 record separator
            let feature = try #require(
                try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            let properties = try #require(feature["properties"] as? [String: Any])
            let geometry = try #require(feature["geometry"] as? [String: Any])
            guard let type = properties["@type"] as? String, let number = properties["@id"] as? Int else { continue }
            let tags = properties.filter { !$0.key.hasPrefix("@") }.compactMapValues { $0 as? String }
            guard let kind = kind(tags, isWay: type != "node") else { continue }
            let id = "osm:\(type)/\(number)"
            if type == "relation" {
                let multipolygon = try #require(geometry["coordinates"] as? [[[[Double]]]])
                let polygons = multipolygon.map { $0.map { $0.map { Coordinate(latitude: $0[1], longitude: $0[0]) } } }
                places[id] = Expected(
                    id: id, name: tags["name"]!, kind: kind, address: address(tags),
                    points: polygons.flatMap { $0[0] }, isArea: true, polygons: polygons)
                continue
            }
            let coordinates: [[Double]]
            switch geometry["type"] as? String {
            case "Point": coordinates = [try #require(geometry["coordinates"] as? [Double])]
            case "LineString": coordinates = try #require(geometry["coordinates"] as? [[Double]])
            default:  // a closed way's MultiPolygon: the same vertices as its LineString
                places[id]?.isArea = true
                if places[id] == nil {
                    places[id] = Expected(
                        id: id, name: tags["name"]!, kind: kind, address: address(tags), points: [],
                        isArea: true)
                }
                continue
            }
            let points = coordinates.map { Coordinate(latitude: $0[1], longitude: $0[0]) }
            let isArea = places[id]?.isArea ?? false
            places[id] = Expected(
                id: id, name: tags["name"]!, kind: kind, address: address(tags), points: points,
                isArea: isArea || (points.count >= 4 && points.first == points.last))
        }
        return places
    }

    @Test func placesMatchOsmium() throws {
        let extract = try OSM.extractPlaces(path: Fixtures.helsinki)
        let expected = try Self.expectedPlaces()
        let places = Dictionary(uniqueKeysWithValues: extract.places.map { ($0.id, $0) })

        #expect(extract.places.count == places.count, "ids are unique")
        #expect(places.count == expected.count)
        #expect(Set(places.keys) == Set(expected.keys))
        // The file's own figures (osmium fileinfo): 24,260 nodes, 5,130 ways, 620 relations.
        // The file's own figures (osmium fileinfo).
        #expect(extract.statistics.nodes == 24_260)
        #expect(extract.statistics.ways == 5_130)
        #expect(extract.statistics.relations == 620)
        #expect(extract.statistics.bytes == 685_110)
        #expect(extract.places.count > 1_500)
        #expect(expected.keys.filter { $0.hasPrefix("osm:relation/") }.count >= 8, "multipolygon places")
        // Relations the extract cut through are named; Kauppatori is one (osmium makes no area either).
        #expect(extract.statistics.skippedRelations.contains { $0.id == "osm:relation/2919185" })

        var areas = 0
        for (id, want) in expected.sorted(by: { $0.key < $1.key }) {
            guard let place = places[id] else { continue }  // reported by the set comparison
            #expect(place.name == want.name, "\(id)")
            #expect(place.kind == want.kind, "\(id)")
            if let own = want.address {
                #expect(place.address == own && place.addressSource == .own, "\(id)")
            } else {
                #expect(place.addressSource != .own, "\(id)")
            }
            if id.hasPrefix("osm:relation/") {
                #expect(place.bounds.map { same($0, boundingBox(want.points)) } == true, "\(id)")
                #expect(
                    want.polygons.contains { rings in rings.reduce(false) { $0 != ringContains($1, place.coordinate) }
                    },
                    "\(id): \(place.coordinate) outside its area or in a hole")
                let area = want.polygons.reduce(0.0) { total, rings in
                    total + sphericalArea(rings[0]) - rings.dropFirst().reduce(0) { $0 + sphericalArea($1) }
                }
                #expect(abs(place.area - area) <= 0.001 * area, "\(id): \(place.area) m² vs \(area) m²")
                let largest = want.polygons.map { $0[0] }.max { sphericalArea($0) < sphericalArea($1) }!
                // The same vertices, perhaps from another start or the other way round.
                let outline = place.outline ?? []
                #expect(
                    outline.count == largest.count && outline.allSatisfy { p in largest.contains { same($0, p) } },
                    "\(id): the largest outer ring")
                continue
            }
            if id.hasPrefix("osm:node/") {
                #expect(same(place.coordinate, want.points[0]), "\(id)")
                #expect(place.area == 0 && place.bounds == nil, "\(id)")
                continue
            }
            #expect(place.bounds.map { same($0, boundingBox(want.points)) } == true, "\(id)")
            if want.isArea {
                areas += 1
                #expect(
                    ringContains(want.points, place.coordinate),
                    "\(id): \(place.coordinate) outside its outline")
                #expect(place.outline.map { same($0, want.points) } == true, "\(id)")
                let area = sphericalArea(want.points)
                #expect(
                    abs(place.area - area) <= 0.001 * area + 0.01, "\(id): \(place.area) m² vs \(area) m²")
            } else {
                #expect(
                    same(place.coordinate, want.points[want.points.count / 2]), "\(id): the middle vertex")
                #expect(place.area == 0 && place.outline == nil, "\(id)")
            }
        }
        #expect(areas > 80, "Helsinki has about 85 named areas (closed ways)")
    }

    @Test func knownPlaces() throws {
        let places = Dictionary(
            uniqueKeysWithValues: try OSM.readPlaces(path: Fixtures.helsinki).map { ($0.id, $0) })
        let station = try #require(places["osm:node/25389429"])
        #expect(station.name == "Helsinki")
        #expect(station.kind == "public_transport=station")
        #expect(station.address == "Kaivokatu 1, 00100 Helsinki")
        #expect(station.coordinate == Coordinate(latitude: 60.1713198, longitude: 24.9414566))
    }

    // Independent geometry for the comparison.

    /// Equal within a hundredth of OSM's resolution: JSON text to Double may differ by an ulp.
    func same(_ a: Coordinate, _ b: Coordinate) -> Bool {
        abs(a.latitude - b.latitude) < 1e-9 && abs(a.longitude - b.longitude) < 1e-9
    }

    func same(_ a: [Coordinate], _ b: [Coordinate]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { same($0, $1) }
    }

    func same(_ a: BoundingBox, _ b: BoundingBox) -> Bool {
        same(
            Coordinate(latitude: a.minLatitude, longitude: a.minLongitude),
            Coordinate(latitude: b.minLatitude, longitude: b.minLongitude))
            && same(
                Coordinate(latitude: a.maxLatitude, longitude: a.maxLongitude),
                Coordinate(latitude: b.maxLatitude, longitude: b.maxLongitude))
    }

    func boundingBox(_ points: [Coordinate]) -> BoundingBox {
        BoundingBox(
            minLatitude: points.map(\.latitude).min()!, minLongitude: points.map(\.longitude).min()!,
            maxLatitude: points.map(\.latitude).max()!, maxLongitude: points.map(\.longitude).max()!)
    }

    /// Area on the sphere that osculates the WGS-84 ellipsoid at the ring's latitude (radius
    /// √(M·N)), by the line-integral formula of Chamberlain & Duquette (JPL, 2007).
    func sphericalArea(_ ring: [Coordinate]) -> Double {
        let a = 6_378_137.0
        let e2 = 0.006_694_379_990_14
        let latitude = (ring.map(\.latitude).min()! + ring.map(\.latitude).max()!) / 2 * .pi / 180
        let w2 = 1 - e2 * sin(latitude) * sin(latitude)
        let radiusSquared = a * (1 - e2) / (w2 * w2.squareRoot()) * a / w2.squareRoot()
        var sum = 0.0
        for i in ring.indices {
            let p = ring[i]
            let q = ring[(i + 1) % ring.count]
            sum +=
                (q.longitude - p.longitude) * .pi / 180
                * (2 + sin(p.latitude * .pi / 180) + sin(q.latitude * .pi / 180))
        }
        return abs(sum * radiusSquared / 2)
    }
}
