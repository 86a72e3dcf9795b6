import Testing
@testable import PlacedCore

/// Reference lines computed with GeographicLib 2.1 (C. F. F. Karney, "Algorithms for geodesics",
/// J. Geodesy 87, 2013), `Geodesic.WGS84.Inverse`: exact to the nanometre.
private let referenceLines: [(Double, Double, Double, Double, distance: Double, azimuth: Double)] = [
    (60.1699, 24.9384, 60.171, 24.941, 189.346708, 49.663479),
    (60.1699, 24.9384, 60.2599, 24.9384, 10027.433861, 0.000000),
    (60.1699, 24.9384, 60.1699, 25.1184, 9992.452544, 89.921925),
    (0, 0, 0, 0.05, 5565.974540, 90.000000),
    (0, 0, 0.05, 0, 5528.713805, 0.000000),
    (0.5, 179.99, 0.5, -179.99, 2226.305609, 89.999913),
    (-33.8688, 151.2093, -33.9, 151.25, 5113.987142, 132.598838),
    (89.99, 0, 89.99, 180, 2233.879591, 0.000000),
    (-89.995, 45, -89.99, -100, 1606.667345, 203.499737),
    (51.4778, -0.0015, 51.5074, -0.1278, 9369.581069, 290.627318),
    (40.7128, -74.006, 40.7306, -73.9352, 6299.888824, 71.690833),
    (60.17, 24.94, 60.17045, 24.94, 50.136829, 0.000000),
]

@Suite struct GeodesyTests {
    @Test(arguments: 0..<referenceLines.count)
    func distanceWithinOnePermilleOfGeodesic(index: Int) {
        let line = referenceLines[index]
        let a = Coordinate(latitude: line.0, longitude: line.1)
        let b = Coordinate(latitude: line.2, longitude: line.3)
        let (distance, bearing) = Geodesy.inverse(a, b)
        #expect(abs(distance - line.distance) / line.distance < 0.001)
        // Vincenty is in fact far better than the requirement: a millimetre.
        #expect(abs(distance - line.distance) < 0.001)
        var bearingError = abs(bearing - line.azimuth)
        bearingError = min(bearingError, 360 - bearingError)
        #expect(bearingError < 1e-4)
    }

    /// Folded as fmod then one correction folds it, bit for bit, whether or not it was folded already.
    @Test func longitudeDeltasFoldIntoOneTurn() {
        func reference(_ delta: Double) -> Double {
            var d = delta.truncatingRemainder(dividingBy: 360)
            if d > 180 { d -= 360 } else if d <= -180 { d += 360 }
            return d
        }
        var deltas: [Double] = [0, -0.0, 180, -180, 360, -360, 540, -540, 179.9999999, 1e-300, -1e-300, 1e6]
        deltas += [180, -180, 360, -360, 540].flatMap { [$0.nextUp, $0.nextDown] }
        var random = SystemRandomNumberGenerator()
        deltas += (0..<20_000).map { _ in Double.random(in: -720...720, using: &random) }
        for delta in deltas {
            let folded = Geodesy.normalizedLongitudeDelta(delta)
            #expect(folded.bitPattern == reference(delta).bitPattern, "\(delta)")
            #expect(folded > -180 && folded <= 180)
        }
    }

    @Test func symmetricAndZero() {
        let a = Coordinate(latitude: 60.17, longitude: 24.94)
        let b = Coordinate(latitude: 60.171, longitude: 24.95)
        #expect(Geodesy.distance(a, a) == 0)
        #expect(abs(Geodesy.distance(a, b) - Geodesy.distance(b, a)) < 1e-9)
    }

    @Test func greatCircleAloneMissesThePermilleGoal() {
        // The sphere alone is not good enough for the 0.1 % requirement; this pins down why Vincenty.
        let line = referenceLines[4]
        let sphere = Geodesy.greatCircleDistance(
            Coordinate(latitude: line.0, longitude: line.1), Coordinate(latitude: line.2, longitude: line.3))
        #expect(abs(sphere - line.distance) / line.distance < 0.006)
        #expect(abs(sphere - line.distance) / line.distance > 0.001)
    }

    @Test func nearlyAntipodalPointsGiveAFiniteDistance() {
        let d = Geodesy.distance(
            Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 0.5, longitude: 179.7))
        #expect(d.isFinite)
        #expect(d > 19_900_000 && d < 20_010_000)
    }

    @Test func localProjectionAgreesWithGeodesicNearby() {
        let origin = Coordinate(latitude: 60.1699, longitude: 24.9384)
        let projection = LocalProjection(origin: origin)
        for (dLat, dLon) in [(0.001, 0.0), (0.0, 0.004), (0.0015, -0.003), (-0.002, 0.002)] {
            let c = Coordinate(latitude: origin.latitude + dLat, longitude: origin.longitude + dLon)
            let exact = Geodesy.distance(origin, c)
            #expect(abs(projection.distance(to: c) - exact) < 0.05, "at \(c)")
        }
    }

    @Test func coordinateValidity() {
        #expect(Coordinate(latitude: 90, longitude: -180).isValid)
        #expect(!Coordinate(latitude: 90.1, longitude: 0).isValid)
        #expect(!Coordinate(latitude: .nan, longitude: 0).isValid)
        #expect(!Coordinate(latitude: 0, longitude: .infinity).isValid)
    }

    @Test func fixedPointFormatting() {
        #expect(1.5.formatted(decimals: 2) == "1.50")
        #expect((-0.0004).formatted(decimals: 3) == "0.000")
        #expect((-24.9384).formatted(decimals: 4) == "-24.9384")
        #expect(60.0.formatted(decimals: 0) == "60")
    }
}
