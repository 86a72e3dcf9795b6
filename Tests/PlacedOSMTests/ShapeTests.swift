import Foundation
import PlacedCore
import PlacedTestSupport
import Testing

@testable import PlacedOSM

@Suite struct ShapeTests {
    /// A U opening north: its centroid and its bounding box's centre both lie in the gap.
    static let u: [Coordinate] = [
        (60.000, 24.000), (60.000, 24.003), (60.003, 24.003), (60.003, 24.002),
        (60.001, 24.002), (60.001, 24.001), (60.003, 24.001), (60.003, 24.000), (60.000, 24.000),
    ].map { Coordinate(latitude: $0.0, longitude: $0.1) }

    @Test func pointOnSurfaceOfAConcaveShapeIsInside() throws {
        let point = try #require(Shape.pointOnSurface(ofRing: Self.u))
        #expect(ringContains(Self.u, point))
        let centre = Shape.bounds(of: Self.u)!.center
        #expect(!ringContains(Self.u, centre), "the naive answer would be outside")
    }

    @Test(arguments: 0..<50)
    func pointOnSurfaceOfRandomStarsIsInside(seed: Int) throws {
        // Star-shaped polygons with deep concavities, in either winding.
        var random = SplitMix64(seed: UInt64(seed))
        let count = 5 + Int(random.next() % 20)
        var ring = (0..<count).map { index -> Coordinate in
            let angle = 2 * Double.pi * Double(index) / Double(count)
            let radius = random.uniform(in: 0.0002...0.002)
            return Coordinate(
                latitude: 60.17 + radius * sin(angle), longitude: 24.94 + 2 * radius * cos(angle))
        }
        if seed % 2 == 1 { ring.reverse() }
        ring.append(ring[0])
        let point = try #require(Shape.pointOnSurface(ofRing: ring))
        #expect(ringContains(ring, point))
    }

    @Test func areaOfAKnownRectangle() {
        // GeographicLib 2.1, Geodesic.WGS84 polygon area of this ring: 1,243,174.47 m².
        let ring = [(60.0, 24.0), (60.0, 24.02), (60.01, 24.02), (60.01, 24.0), (60.0, 24.0)]
            .map { Coordinate(latitude: $0.0, longitude: $0.1) }
        let area = Shape.area(ofRing: ring)
        #expect(abs(area - 1_243_174.47) / area < 0.0005)
        #expect(abs(Shape.area(ofRing: ring.reversed()) - area) < 1e-6, "winding does not matter")
    }

    @Test func degenerateRingsHaveNoInterior() {
        let line = [(60.0, 24.0), (60.0, 24.1), (60.0, 24.2), (60.0, 24.0)].map {
            Coordinate(latitude: $0.0, longitude: $0.1)
        }
        #expect(Shape.pointOnSurface(ofRing: line) == nil)
        #expect(Shape.area(ofRing: line) == 0)
        #expect(Shape.pointOnSurface(ofRing: []) == nil)
        #expect(Shape.bounds(of: []) == nil)
    }
}
