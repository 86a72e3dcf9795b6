import Foundation
import PlacedCore
import Testing

@testable import PlacedOSM

/// Which ways make the map layer and as what, and the simplification for display.
@Suite struct MapLayerTests {
    @Test(.enabled(if: Fixtures.osmium != nil, "osmium-tool is needed to write the test file"))
    func waysBecomeTheFeaturesTheRulesSay() throws {
        let corners = [(0, 0), (0, 4), (2, 4), (2, 0)]
        var lines = corners.enumerated().map {
            AddressTests.node($0.offset + 1, Double($0.element.0), Double($0.element.1))
        }
        lines += (5...8).map { AddressTests.node($0, Double($0), 10) }
        let ring = "Nn1,n2,n3,n4,n1"
        let open = "Nn5,n6,n7,n8"
        lines += [
            "w20 v1 Thighway=primary,name=Iso%20%tie,name:sv=Stora%20%vägen \(open)",
            "w21 v1 Thighway=footway,tunnel=yes \(open)",
            "w22 v1 Thighway=pedestrian,area=yes,name=Tori \(ring)",
            "w23 v1 Thighway=service \(ring)",
            "w24 v1 Trailway=tram \(open)",
            "w25 v1 Tbuilding=yes \(open)",
            "w26 v1 Tleisure=park \(ring)",
            "w27 v1 Tnatural=water \(ring)",
            "w28 v1 Twaterway=stream \(open)",
            "w29 v1 Tlanduse=residential \(ring)",
            "w30 v1 Tbuilding=apartments,shop=bakery,name=Leipomo \(ring)",
            "w31 v1 Tplace=square \(ring)",
            "w32 v1 Trailway=subway,tunnel=yes \(open)",
        ]
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Fixtures.pbf(fromOPL: lines.joined(separator: "\n"), in: directory)
        let extract = try OSM.extractPlaces(path: file)
        let features = Dictionary(uniqueKeysWithValues: try #require(extract.features).map { ($0.id, $0) })
        func described(_ id: Int) -> String? {
            features["osm:way/\(id)"].map { feature in
                let shape = if case .line = feature.geometry { "line" } else { "area" }
                return "\(feature.kind.rawValue) \(feature.featureClass) \(shape)"
            }
        }
        #expect(described(20) == "street primary line")
        #expect(features["osm:way/20"]?.name(forLanguage: "sv-SE") == "Stora vägen")
        #expect(features["osm:way/20"]?.name(forLanguage: "fi") == "Iso tie")
        #expect(described(21) == nil, "tunnels are not on the surface")
        #expect(described(22) == "square pedestrian area")
        #expect(described(23) == "street service line", "a closed street is still a line")
        #expect(described(24) == "rail tram line")
        #expect(described(25) == nil, "a building must be closed")
        #expect(described(26) == "green park area")
        #expect(described(27) == "water water area")
        #expect(described(28) == "water stream line")
        #expect(described(29) == nil)
        #expect(described(30) == "building apartments area")
        #expect(described(31) == "square square area")
        #expect(described(32) == nil)
        #expect(extract.places.map(\.id) == ["osm:way/30"])
        #expect(features.values.allSatisfy { $0.bounds == BoundingBox(enclosing: $0.geometry.allPoints) })
    }

    static func east(_ metres: Double, north: Double = 0) -> Coordinate {
        LocalProjection(origin: Coordinate(latitude: 60.17, longitude: 24.94)).coordinate(east: metres, north: north)
    }

    @Test func simplificationDropsWhatIsWithinAMetre() {
        let straight = (0...10).map { Self.east(Double($0) * 10) }
        #expect(Simplification.line(straight) == [straight[0], straight[10]])
        let smallBump = [Self.east(0), Self.east(50, north: 0.5), Self.east(100)]
        #expect(Simplification.line(smallBump).count == 2)
        let bigBump = [Self.east(0), Self.east(50, north: 2), Self.east(100)]
        #expect(Simplification.line(bigBump) == bigBump)
        #expect(Simplification.line([Self.east(0)]) == [Self.east(0)])
    }

    @Test func simplifiedRingsStayClosedWithTheirCorners() {
        let corners = [Self.east(0), Self.east(20), Self.east(20, north: 20), Self.east(0, north: 20)]
        // Every edge with vertices along it, 0.3 m off the line.
        var ring: [Coordinate] = []
        for (a, b) in zip(corners, corners.dropFirst() + [corners[0]]) {
            ring.append(a)
            for step in 1..<5 {
                let t = Double(step) / 5
                ring.append(
                    Coordinate(
                        latitude: a.latitude + t * (b.latitude - a.latitude) + 0.3 / 111_000,
                        longitude: a.longitude + t * (b.longitude - a.longitude)))
            }
        }
        ring.append(ring[0])
        let simplified = Simplification.ring(ring)
        #expect(simplified.first == simplified.last)
        #expect(Set(simplified) == Set(corners))
        // A ring too small for the tolerance is kept whole rather than collapsed.
        let tiny = [
            Self.east(0), Self.east(0.25), Self.east(0.5), Self.east(0.5, north: 0.25), Self.east(0.5, north: 0.5),
            Self.east(0.25, north: 0.5), Self.east(0, north: 0.5), Self.east(0, north: 0.25), Self.east(0),
        ]
        #expect(Simplification.ring(tiny) == tiny)
    }
}
