import PlacedTestSupport
import Testing
@testable import PlacedCore

private func fix(_ lat: Double, _ lon: Double) -> Fix {
    Fix(coordinate: Coordinate(latitude: lat, longitude: lon))
}

/// Moves `metres` north of `c` (local plane; exact enough for steps of metres).
private func north(of c: Coordinate, metres: Double) -> Coordinate {
    let p = LocalProjection(origin: c)
    return Coordinate(latitude: c.latitude + metres / p.metresPerDegreeLatitude, longitude: c.longitude)
}

@Suite struct DistanceFilterTests {
    @Test func firstFixIsAMove() throws {
        var filter = try DistanceFilter()
        #expect(filter.threshold == 50)
        #expect(try filter.consider(fix(60.17, 24.94)) == .move(distance: nil))
    }

    @Test func slowCreepEmitsOncePerThreshold() throws {
        var filter = try DistanceFilter(threshold: 50)
        var position = Coordinate(latitude: 60.17, longitude: 24.94)
        var moves: [Int] = []
        for step in 0...50 {
            if case .move = try filter.consider(Fix(coordinate: position)) { moves.append(step) }
            position = north(of: position, metres: 10.01)
        }
        // 500 m of 10 m steps: the first fix, then every fifth step; never stuck at "too small".
        #expect(moves == Array(stride(from: 0, through: 50, by: 5)))
    }

    @Test func jitterAroundAPointNeverEmits() throws {
        var filter = try DistanceFilter(threshold: 50)
        let centre = Coordinate(latitude: 60.17, longitude: 24.94)
        _ = try filter.consider(Fix(coordinate: centre))
        var rng = SplitMix64(seed: 42)
        let projection = LocalProjection(origin: centre)
        for _ in 0..<10_000 {
            let east = rng.uniform(in: -20...20), northward = rng.uniform(in: -20...20)
            let c = Coordinate(
                latitude: centre.latitude + northward / projection.metresPerDegreeLatitude,
                longitude: centre.longitude + east / projection.metresPerDegreeLongitude)
            guard case .suppressed = try filter.consider(Fix(coordinate: c)) else {
                Issue.record("jitter at \(c) emitted a move")
                return
            }
        }
        #expect(filter.reference?.coordinate == centre)
    }

    @Test func exactlyAtTheThresholdIsAMove() throws {
        let a = Coordinate(latitude: 60.17, longitude: 24.94)
        let b = north(of: a, metres: 50)
        let d = Geodesy.distance(a, b)
        var atThreshold = try DistanceFilter(threshold: d)
        _ = try atThreshold.consider(Fix(coordinate: a))
        #expect(try atThreshold.consider(Fix(coordinate: b)) == .move(distance: d))

        var aboveThreshold = try DistanceFilter(threshold: d.nextUp)
        _ = try aboveThreshold.consider(Fix(coordinate: a))
        #expect(try aboveThreshold.consider(Fix(coordinate: b)) == .suppressed(distance: d))
    }

    @Test func suppressedFixesDoNotMoveTheReference() throws {
        var filter = try DistanceFilter(threshold: 50)
        let start = Coordinate(latitude: 60.17, longitude: 24.94)
        _ = try filter.consider(Fix(coordinate: start))
        _ = try filter.consider(Fix(coordinate: north(of: start, metres: 30)))
        #expect(filter.reference?.coordinate == start)
        // 30 m further is 60 m from the reference: a move, though only 30 m from the last fix.
        if case .move = try filter.consider(Fix(coordinate: north(of: start, metres: 60))) {
        } else {
            Issue.record("60 m from the reference must be a move")
        }
    }

    @Test func zeroThresholdMakesEveryFixAMove() throws {
        var filter = try DistanceFilter(threshold: 0)
        let c = Coordinate(latitude: 60.17, longitude: 24.94)
        for _ in 0..<5 {
            if case .suppressed = try filter.consider(Fix(coordinate: c)) { Issue.record("suppressed at 0 m") }
        }
    }

    @Test func acrossTheAntimeridian() throws {
        var filter = try DistanceFilter(threshold: 50)
        _ = try filter.consider(fix(-16.5, 179.9998))
        // 0.0004° of longitude at 16.5° S is about 43 m across the date line, not 40,000 km.
        let near = try filter.consider(fix(-16.5, -179.9998))
        guard case let .suppressed(d) = near else {
            Issue.record("crossing the antimeridian by 43 m was a move: \(near)")
            return
        }
        #expect(d > 40 && d < 46)
        if case .suppressed = try filter.consider(fix(-16.5, -179.9992)) { Issue.record("107 m must move") }
    }

    @Test func nearThePoles() throws {
        var filter = try DistanceFilter(threshold: 50)
        _ = try filter.consider(fix(89.9999, 0))
        // Across the North Pole: 11.1 m + 11.1 m, though the longitudes differ by 180°.
        #expect(
            try filter.consider(fix(89.9999, 180))
                == .suppressed(
                    distance: Geodesy.distance(
                        Coordinate(latitude: 89.9999, longitude: 0), Coordinate(latitude: 89.9999, longitude: 180))))
        guard case let .move(d) = try filter.consider(fix(89.9990, 90)) else {
            Issue.record("100 m from the pole must be a move")
            return
        }
        #expect(d! > 95 && d! < 115)

        var south = try DistanceFilter(threshold: 50)
        _ = try south.consider(fix(-90, 0))
        guard case let .suppressed(atPole) = try south.consider(fix(-90, 123)) else {
            Issue.record("the South Pole at another longitude is the same point")
            return
        }
        #expect(atPole < 1e-6)
    }

    @Test func nonFiniteOrOutOfRangeInputIsRejectedAndChangesNothing() throws {
        var filter = try DistanceFilter(threshold: 50)
        let start = fix(60.17, 24.94)
        _ = try filter.consider(start)
        for bad in [fix(.nan, 24.94), fix(60.17, .infinity), fix(-.infinity, 0), fix(91, 0), fix(0, 181)] {
            #expect(throws: DistanceFilterError.self) { try filter.consider(bad) }
        }
        #expect(filter.reference == start)

        var fresh = try DistanceFilter()
        #expect(throws: DistanceFilterError.self) { try fresh.consider(fix(.nan, .nan)) }
        #expect(fresh.reference == nil)
    }

    @Test func invalidThresholdsAreRejected() {
        for bad in [-1.0, .nan, .infinity] {
            #expect(throws: DistanceFilterError.self) {
                _ = try DistanceFilter(threshold: bad)
            }
        }
    }
}
