import Foundation
import PlacedCore
import Testing

@testable import PlacedOSM

/// Multipolygon assembly: rings joined from several ways in any direction, holes and islands by
/// containment, touching rings, and relations whose rings do not close.
@Suite struct MultipolygonTests {
    /// A node location `north`, `east` steps of 1e-4 degree from 60 N, 24 E.
    static func at(_ north: Int, _ east: Int) -> NodeLocation {
        NodeLocation(latitude: Int32(600_000_000 + north * 1000), longitude: Int32(240_000_000 + east * 1000))
    }

    static func square(_ south: Int, _ west: Int, _ size: Int) -> [NodeLocation] {
        [
            at(south, west), at(south, west + size), at(south + size, west + size), at(south + size, west),
            at(south, west),
        ]
    }

    @Test func outerRingFromThreeWaysInBothDirections() throws {
        // 0,0 → 0,10 → 10,10 → 10,0 → 0,0, the middle way listed backwards.
        let ways = [
            [Self.at(0, 0), Self.at(0, 10)], [Self.at(10, 0), Self.at(10, 10), Self.at(0, 10)],
            [Self.at(10, 0), Self.at(0, 0)],
        ]
        let polygons = try MultipolygonAssembler.assemble(ways).get()
        #expect(polygons.count == 1)
        #expect(polygons[0].count == 1, "no holes")
        let ring = polygons[0][0]
        #expect(ring.count == 5 && ring.first == ring.last)
        #expect(Set(ring) == Set(Self.square(0, 0, 10).map(\.coordinate)))
        #expect(MultipolygonAssembler.signedArea(ring) > 0, "outer rings run counter-clockwise")
    }

    @Test func holeByContainmentWhateverTheRole() throws {
        let polygons = try MultipolygonAssembler.assemble([Self.square(3, 3, 4), Self.square(0, 0, 10)]).get()
        #expect(polygons.count == 1)
        #expect(polygons[0].count == 2)
        #expect(Set(polygons[0][0]) == Set(Self.square(0, 0, 10).map(\.coordinate)), "the larger ring is outer")
        #expect(MultipolygonAssembler.signedArea(polygons[0][1]) < 0, "holes run clockwise")
    }

    @Test func islandInAHoleIsAnotherPolygon() throws {
        let polygons = try MultipolygonAssembler.assemble([
            Self.square(0, 0, 10), Self.square(2, 2, 6), Self.square(4, 4, 2), Self.square(20, 20, 3),
        ]).get()
        #expect(polygons.count == 3)
        #expect(polygons.map(\.count).sorted() == [1, 1, 2])
    }

    @Test func ringsTouchingAtAVertexAreSplitThere() throws {
        // A figure eight drawn as one way: two squares sharing the corner 5,5.
        let eight = [
            Self.at(0, 0), Self.at(0, 5), Self.at(5, 5), Self.at(10, 5), Self.at(10, 10), Self.at(5, 10),
            Self.at(5, 5), Self.at(5, 0), Self.at(0, 0),
        ]
        let polygons = try MultipolygonAssembler.assemble([eight]).get()
        #expect(polygons.count == 2)
        #expect(polygons.allSatisfy { $0.count == 1 && $0[0].count == 5 })
    }

    @Test func aWayListedTwiceCancelsOut() throws {
        // Two squares sharing their middle edge, which each lists: one rectangle remains.
        let left = [Self.at(0, 0), Self.at(0, 5), Self.at(10, 5), Self.at(10, 0), Self.at(0, 0)]
        let right = [Self.at(0, 5), Self.at(0, 10), Self.at(10, 10), Self.at(10, 5), Self.at(0, 5)]
        let polygons = try MultipolygonAssembler.assemble([left, right]).get()
        #expect(polygons.count == 1 && polygons[0].count == 1)
        #expect(polygons[0][0].count == 7, "corners plus the two ends of the shared edge")
    }

    @Test func unclosedRingsAreAFailure() {
        let open = [[Self.at(0, 0), Self.at(0, 10), Self.at(10, 10)], [Self.at(10, 0), Self.at(0, 0)]]
        guard case .failure(.openRing) = MultipolygonAssembler.assemble(open) else {
            Issue.record("an open ring must fail")
            return
        }
        #expect(MultipolygonAssembler.assemble([]) == .failure(.noRings))
    }

    @Test func pointOnSurfaceAvoidsTheHole() throws {
        // The hole covers the middle, where a single-ring answer would fall.
        let rings = [Self.square(0, 0, 10), Self.square(1, 1, 8)].map { $0.map(\.coordinate) }
        let point = try #require(Shape.pointOnSurface(ofPolygon: rings, bounds: BoundingBox(enclosing: rings[0])))
        #expect(ringContains(rings[0], point))
        #expect(!ringContains(rings[1], point))
        let area = Shape.area(ofPolygons: [rings])
        #expect(abs(area - (Shape.area(ofRing: rings[0]) - Shape.area(ofRing: rings[1]))) < 1e-6)
    }
}

/// The same from a file osmium wrote: places and map features from relations, and the import summary
/// for relations it cannot make.
@Suite(.enabled(if: Fixtures.osmium != nil, "osmium-tool is needed to write the test files"))
struct MultipolygonImportTests {
    static let opl = """
        n1 v1 x24.0000000 y60.0000000 T
        n2 v1 x24.0020000 y60.0000000 T
        n3 v1 x24.0020000 y60.0010000 T
        n4 v1 x24.0000000 y60.0010000 T
        n5 v1 x24.0005000 y60.0002000 T
        n6 v1 x24.0015000 y60.0002000 T
        n7 v1 x24.0015000 y60.0008000 T
        n8 v1 x24.0005000 y60.0008000 T
        n10 v1 x24.0100000 y60.0000000 T
        n11 v1 x24.0110000 y60.0000000 T
        n12 v1 x24.0110000 y60.0010000 T
        w1 v1 T Nn1,n2,n3
        w2 v1 T Nn4,n3
        w3 v1 Tbarrier=fence Nn4,n1
        w4 v1 T Nn5,n6,n7,n8,n5
        w5 v1 T Nn10,n11,n12
        r1 v1 Ttype=multipolygon,leisure=park,name=Puisto,name:sv=Parken,name:etymology=someone Mw1@outer,w2@outer,w3@outer,w4@inner
        r2 v1 Ttype=multipolygon,building=yes,name=Open Mw5@outer
        r3 v1 Ttype=multipolygon,amenity=school,name=Gone Mw99@outer
        r4 v1 Ttype=route,route=bus,name=Bus Mw1@,w2@
        """

    @Test func relationsBecomePlacesAndFeatures() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Fixtures.pbf(fromOPL: Self.opl, in: directory)
        let extract = try OSM.extractPlaces(path: file)

        let park = try #require(extract.places.first { $0.id == "osm:relation/1" })
        #expect(park.kind == "leisure=park")
        #expect(park.localizedNames == ["sv": "Parken"], "name:etymology is no language")
        #expect(park.name(forLanguage: "sv_FI.UTF-8") == "Parken")
        let rings = [
            [(0, 0), (0, 20), (10, 20), (10, 0), (0, 0)], [(2, 5), (2, 15), (8, 15), (8, 5), (2, 5)],
        ].map { $0.map { Coordinate(latitude: 60 + Double($0.0) * 1e-4, longitude: 24 + Double($0.1) * 1e-4) } }
        #expect(ringContains(rings[0], park.coordinate) && !ringContains(rings[1], park.coordinate))
        let expectedArea = Shape.area(ofRing: rings[0]) - Shape.area(ofRing: rings[1])
        #expect(abs(park.area - expectedArea) < 1e-6 * expectedArea)
        #expect(park.bounds == BoundingBox(enclosing: rings[0]))
        #expect(park.outline.map(Set.init) == Set(rings[0]))

        let feature = try #require(extract.features?.first { $0.id == "osm:relation/1" })
        #expect(feature.kind == .green && feature.featureClass == "park" && feature.name == "Puisto")
        guard case .polygons(let polygons) = feature.geometry else {
            Issue.record("a multipolygon is drawn as an area")
            return
        }
        #expect(polygons.count == 1 && polygons[0].count == 2)

        #expect(!extract.places.contains { $0.id == "osm:relation/2" || $0.id == "osm:relation/3" })
        #expect(!extract.places.contains { $0.id == "osm:relation/4" }, "routes are not areas")
        #expect(extract.statistics.multipolygons == 1)
        #expect(extract.statistics.skippedRelations.map(\.id) == ["osm:relation/2", "osm:relation/3"])
        #expect(extract.statistics.skippedRelations[0].reason.contains("does not close"))
        #expect(extract.statistics.skippedRelations[1].reason == "way 99 is not in the file")
        #expect(extract.statistics.relations == 4)
    }
}
