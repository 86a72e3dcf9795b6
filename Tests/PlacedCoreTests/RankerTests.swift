import PlacedTestSupport
import Testing

@testable import PlacedCore

private let centre = Coordinate(latitude: 60.17, longitude: 24.94)

/// A coordinate `east` and `north` metres from `origin`, in the same local plane the ranker measures in,
/// so distances come back exact to ~1e-12.
private func offset(_ origin: Coordinate, east: Double, north: Double) -> Coordinate {
    LocalProjection(origin: origin).coordinate(east: east, north: north)
}

private func point(
    _ id: String, _ kind: String, east: Double = 0, north: Double = 0,
    from origin: Coordinate = centre
)
    -> Place
{
    Place(id: id, name: id, kind: kind, coordinate: offset(origin, east: east, north: north))
}

/// An area given by its corners in metres around `origin` (counter-clockwise, not closed: this closes it).
private func area(
    _ id: String, _ kind: String, corners: [(Double, Double)], inside: (Double, Double),
    from origin: Coordinate = centre
) -> Place {
    var ring = corners.map { offset(origin, east: $0.0, north: $0.1) }
    ring.append(ring[0])
    var twiceArea = 0.0
    for i in 0..<corners.count {
        let a = corners[i]
        let b = corners[(i + 1) % corners.count]
        twiceArea += a.0 * b.1 - b.0 * a.1
    }
    let bounds = BoundingBox(
        minLatitude: ring.map(\.latitude).min()!, minLongitude: ring.map(\.longitude).min()!,
        maxLatitude: ring.map(\.latitude).max()!, maxLongitude: ring.map(\.longitude).max()!)
    return Place(
        id: id, name: id, kind: kind, coordinate: offset(origin, east: inside.0, north: inside.1),
        area: abs(twiceArea) / 2, bounds: bounds, outline: ring)
}

private func fix(at c: Coordinate = centre, accuracy: Double? = 10, speed: Double? = nil) -> Fix {
    Fix(coordinate: c, accuracy: accuracy, speed: speed)
}

/// A model whose constants the hand-computed cases spell out, independent of the tuned defaults.
private let handModel = RankingModel(
    kinds: [
        "amenity=cafe": .init(weight: 3, pointExtent: 8),
        "highway=bus_stop": .init(weight: 1, pointExtent: 4),
        "leisure=park": .init(weight: 1, pointExtent: 8),
        "shop": .init(weight: 1.5, pointExtent: 8),
    ],
    otherKinds: .init(weight: 1, pointExtent: 8), selectionExponent: 0.7, noneWeightAtRest: 1,
    noneSpeedScale: 2,
    defaultAccuracy: 25, minimumAccuracy: 1, searchMargin: 50, minimumSearchRadius: 50,
    maximumSearchRadius: 250)

private let kinds = [
    "amenity=cafe", "amenity=restaurant", "shop=clothes", "office=company", "tourism=artwork",
    "building=yes",
    "highway=bus_stop", "leisure=park",
]

/// A seeded city block: points and a few square areas within ±150 m of the centre.
private func randomPlaces(_ rng: inout SplitMix64, count: Int) -> [Place] {
    (0..<count).map { i in
        let kind = kinds[Int(rng.next() % UInt64(kinds.count))]
        let east = rng.uniform(in: -150...150)
        let north = rng.uniform(in: -150...150)
        if i % 7 == 0 {
            let half = rng.uniform(in: 5...40)
            return area(
                "osm:way/\(i)", kind,
                corners: [
                    (east - half, north - half), (east + half, north - half), (east + half, north + half),
                    (east - half, north + half),
                ],
                inside: (east, north))
        }
        return point("osm:node/\(i)", kind, east: east, north: north)
    }
}

private func randomFix(_ rng: inout SplitMix64) -> Fix {
    let accuracy: Double? = rng.next() % 5 == 0 ? nil : rng.uniform(in: 0...60)
    let speed: Double? = rng.next() % 3 == 0 ? nil : rng.uniform(in: 0...30)
    return fix(
        at: offset(centre, east: rng.uniform(in: -100...100), north: rng.uniform(in: -100...100)),
        accuracy: accuracy,
        speed: speed)
}

private func isOrdered(_ places: [RankedPlace]) -> Bool {
    zip(places, places.dropFirst()).allSatisfy { a, b in
        if a.likelihood != b.likelihood { return a.likelihood > b.likelihood }
        if a.distance != b.distance { return a.distance < b.distance }
        return a.place.id < b.place.id
    }
}

@Suite struct RankerPropertyTests {
    @Test func likelihoodsAreInBoundsAndSumToAtMostOne() throws {
        let ranker = try Ranker()
        var rng = SplitMix64(seed: 1)
        let places = randomPlaces(&rng, count: 400)
        var nonEmpty = 0
        for _ in 0..<300 {
            let f = randomFix(&rng)
            let ranking = try ranker.rank(fix: f, candidates: places, limit: 20)
            let sum = ranking.places.reduce(0) { $0 + $1.likelihood }
            #expect(ranking.places.allSatisfy { $0.likelihood >= 0 && $0.likelihood <= 1 })
            #expect(sum <= 1)
            #expect(ranking.noneLikelihood > 0 && ranking.noneLikelihood <= 1)
            #expect(sum + ranking.noneLikelihood <= 1 + 1e-12)
            if !ranking.places.isEmpty { nonEmpty += 1 }
        }
        #expect(nonEmpty > 250)
    }

    @Test func everyCandidateAndNoneSumToOne() throws {
        // With fewer candidates than the limit, the list plus "none of these" is the whole distribution.
        let ranker = try Ranker()
        let places = [
            point("a", "amenity=cafe", east: 5), point("b", "shop=books", east: -12, north: 3),
            point("c", "office=company", east: 0, north: 30),
        ]
        let ranking = try ranker.rank(fix: fix(speed: 3), candidates: places, limit: 20)
        #expect(ranking.places.count == 3)
        let sum = ranking.places.reduce(ranking.noneLikelihood) { $0 + $1.likelihood }
        #expect(abs(sum - 1) < 1e-12)
    }

    @Test func orderIsLikelihoodThenDistanceThenIdAndLimitHolds() throws {
        let ranker = try Ranker()
        var rng = SplitMix64(seed: 2)
        let places = randomPlaces(&rng, count: 400)
        for _ in 0..<200 {
            let f = randomFix(&rng)
            let all = try ranker.rank(fix: f, candidates: places, limit: 20)
            #expect(isOrdered(all.places))
            #expect(all.places.count <= 20)
            let top = try ranker.rank(fix: f, candidates: places)
            #expect(top.places.count <= Ranker.defaultLimit)
            #expect(top.places == Array(all.places.prefix(Ranker.defaultLimit)))
        }
        // Exact ties fall back to id: identical places at the same spot.
        let twins = ["osm:node/9", "osm:node/10", "osm:node/1"].map {
            point($0, "amenity=cafe", east: 7)
        }
        let tied = try ranker.rank(fix: fix(), candidates: twins)
        #expect(tied.places.map(\.place.id) == ["osm:node/1", "osm:node/10", "osm:node/9"])
        // Equal likelihood, different distance: the nearer first. With σ 1 m and no extent, both densities
        // underflow to exactly 0 at 45 and 49 m.
        let pinpoint = RankingModel(kinds: ["pin": .init(weight: 1, pointExtent: 0)])
        let byDistance = try Ranker(model: pinpoint).rank(
            fix: fix(accuracy: 0),
            candidates: [point("a", "pin", east: 49), point("z", "pin", east: -45)])
        #expect(byDistance.places.map(\.likelihood) == [0, 0])
        #expect(byDistance.places.map(\.place.id) == ["z", "a"])
    }

    @Test func sameInputInAnyOrderGivesTheSameRanking() throws {
        let ranker = try Ranker()
        var rng = SplitMix64(seed: 3)
        let places = randomPlaces(&rng, count: 300)
        let counts = Dictionary(
            uniqueKeysWithValues: places.prefix(40).enumerated().map { ($1.id, $0 % 5) })
        for _ in 0..<100 {
            let f = randomFix(&rng)
            let reference = try ranker.rank(
                fix: f, candidates: places, selectionCounts: counts, limit: 20)
            var shuffled = places
            shuffled.shuffle(using: &rng)
            #expect(
                try ranker.rank(fix: f, candidates: shuffled, selectionCounts: counts, limit: 20)
                    == reference)
            // A candidate listed twice (overlapping index cells) counts once.
            #expect(
                try ranker.rank(
                    fix: f, candidates: places + places.prefix(50), selectionCounts: counts, limit: 20)
                    == reference)
        }
    }

    @Test func nearerIsMoreLikelyForOtherwiseEqualPlaces() throws {
        let ranker = try Ranker()
        let neighbour = point("n", "shop=books", east: -20, north: 10)
        for accuracy in [3.0, 15, 40] {
            var previous = Double.infinity
            for step in 0...20 {  // to 50 m: inside R for every σ
                let d = Double(step) * 2.5
                let ranking = try ranker.rank(
                    fix: fix(accuracy: accuracy),
                    candidates: [neighbour, point("p", "amenity=cafe", east: d)],
                    limit: 20)
                let likelihood = try #require(ranking.places.first { $0.place.id == "p" }).likelihood
                #expect(likelihood < previous, "σ \(accuracy): \(d) m is not less likely than \(d - 2.5) m")
                previous = likelihood
            }
        }
        // Two twins at different distances in one ranking.
        let pair = try ranker.rank(
            fix: fix(),
            candidates: [
                point("far", "amenity=cafe", east: 18), point("near", "amenity=cafe", north: 12),
            ])
        #expect(pair.places.map(\.place.id) == ["near", "far"])
        #expect(pair.places[0].likelihood > pair.places[1].likelihood)
    }

    @Test func insideAnAreaBeatsANearbyPoint() throws {
        let ranker = try Ranker()
        // A 24 × 24 m building-sized area around the fix; the same kind as a point just outside its wall.
        let square = area(
            "osm:way/1", "amenity=restaurant", corners: [(-12, -12), (12, -12), (12, 12), (-12, 12)],
            inside: (3, 3))
        for accuracy in [5.0, 15, 30] {
            for east in [13.0, 16, 25] {
                let outside = point("osm:node/2", "amenity=restaurant", east: east)
                let ranking = try ranker.rank(fix: fix(accuracy: accuracy), candidates: [outside, square])
                #expect(ranking.places.first?.place.id == "osm:way/1", "σ \(accuracy), point at \(east) m")
                #expect(ranking.places.first?.distance == 0)
            }
        }
    }

    @Test func aPlaceSelectedBeforeRisesUnderAGlobalCountPrior() throws {
        let ranker = try Ranker(model: RankingModel(selectionExponent: 0.7))
        let places = [point("a", "amenity=cafe", east: 6), point("b", "amenity=cafe", east: -9)]
        let before = try ranker.rank(fix: fix(), candidates: places)
        #expect(before.places.map(\.place.id) == ["a", "b"])
        var previous = try #require(before.places.last).likelihood
        for count in [1, 2, 5, 20] {
            let after = try ranker.rank(fix: fix(), candidates: places, selectionCounts: ["b": count])
            let b = try #require(after.places.first { $0.place.id == "b" }).likelihood
            #expect(b > previous, "\(count) selections did not raise b")
            previous = b
        }
        // Enough history overtakes the nearer twin.
        let loyal = try ranker.rank(fix: fix(), candidates: places, selectionCounts: ["b": 20])
        #expect(loyal.places.first?.place.id == "b")
        // The standard model has no global prior: counts made anywhere change nothing here.
        let standard = try Ranker()
        #expect(
            try standard.rank(fix: fix(), candidates: places, selectionCounts: ["b": 20])
                == standard.rank(fix: fix(), candidates: places))
    }

    @Test func fasterSpeedLowersTheTotal() throws {
        let ranker = try Ranker()
        var rng = SplitMix64(seed: 5)
        let places = randomPlaces(&rng, count: 200)
        var f = fix(at: offset(centre, east: 10, north: -20), accuracy: 12)
        var previous = 1.0
        for speed in [0.0, 1, 2, 5, 10, 20, 40] {
            f.speed = speed
            let ranking = try ranker.rank(fix: f, candidates: places, limit: 20)
            let total = 1 - ranking.noneLikelihood
            #expect(total < previous, "total at \(speed) m/s is not lower")
            previous = total
        }
        // Order among places does not depend on speed: only certainty does.
        f.speed = 0
        let still = try ranker.rank(fix: f, candidates: places, limit: 20)
        f.speed = 25
        let driving = try ranker.rank(fix: f, candidates: places, limit: 20)
        #expect(still.places.map(\.place.id) == driving.places.map(\.place.id))
        #expect(still.places[0].likelihood > driving.places[0].likelihood)
    }
}

@Suite struct RankerCaseTests {
    @Test func twoPointsAtRest() throws {
        // σ 10, R 60, w₀ 1: café 10 m (w 3, r 8), bus stop 30 m (w 1, r 4).
        let ranking = try Ranker(model: handModel).rank(
            fix: fix(accuracy: 10),
            candidates: [
                point("stop", "highway=bus_stop", east: 0, north: -30),
                point("cafe", "amenity=cafe", east: 10),
            ])
        #expect(ranking.radius == 60)
        #expect(ranking.places.map(\.place.id) == ["cafe", "stop"])
        #expect(abs(ranking.places[0].distance - 10) < 1e-9)
        #expect(abs(ranking.places[1].distance - 30) < 1e-9)
        #expect(abs(ranking.places[0].likelihood - 0.9609714954511789) < 1e-9)
        #expect(abs(ranking.places[1].likelihood - 0.007261912009272223) < 1e-9)
        #expect(abs(ranking.noneLikelihood - 0.03176659253954889) < 1e-9)
    }

    @Test func insideAParkWhileMovingPastASelectedShop() throws {
        // σ 5, R 55, 4 m/s → w₀ = 1 + (4/2)² = 5. Park: 40 × 40 m, d 0, r = √(1600/π).
        // Shop (key-level prior, w 1.5) 25 m away, selected 3 times: × 4^0.7.
        let park = area(
            "park", "leisure=park", corners: [(-20, -20), (20, -20), (20, 20), (-20, 20)],
            inside: (10, 10))
        let ranking = try Ranker(model: handModel).rank(
            fix: fix(accuracy: 5, speed: 4), candidates: [park, point("shop", "shop=clothes", east: 25)],
            selectionCounts: ["shop": 3])
        #expect(ranking.radius == 55)
        #expect(ranking.places.map(\.place.id) == ["park", "shop"])
        #expect(ranking.places[0].distance == 0)
        #expect(abs(ranking.places[0].likelihood - 0.6619226709973983) < 1e-9)
        #expect(abs(ranking.places[1].likelihood - 0.004765994119970491) < 1e-9)
        #expect(abs(ranking.noneLikelihood - 0.3333113348826313) < 1e-9)
    }

    @Test func unknownAccuracyUsesTheDefault() throws {
        // No accuracy: σ 25, R 75. Café 40 m.
        let ranking = try Ranker(model: handModel).rank(
            fix: fix(accuracy: nil), candidates: [point("cafe", "amenity=cafe", east: 0, north: 40)])
        #expect(ranking.radius == 75)
        #expect(abs(ranking.places[0].likelihood - 0.7907350752867183) < 1e-9)
        #expect(abs(ranking.noneLikelihood - 0.20926492471328156) < 1e-9)
    }

    @Test func nothingNearIsAnEmptyRanking() throws {
        let ranker = try Ranker()
        let far = [
            point("far", "amenity=cafe", east: 400), point("farther", "shop=books", north: -900),
        ]
        let ranking = try ranker.rank(fix: fix(accuracy: 10), candidates: far)
        #expect(ranking.places.isEmpty)
        #expect(ranking.noneLikelihood == 1)
        #expect(try ranker.rank(fix: fix(), candidates: [Place]()).places.isEmpty)
    }

    @Test func searchRadiusReachesTheFootprintNotThePoint() throws {
        let ranker = try Ranker()
        // σ 10 → R 60. A point at 61 m is out, at 59 m in.
        let points = [point("in", "amenity=cafe", east: 59), point("out", "amenity=cafe", east: -61)]
        #expect(try ranker.rank(fix: fix(), candidates: points).places.map(\.place.id) == ["in"])
        // A 400 m wide area whose inside point is 200 m away but whose edge is 40 m away is a candidate.
        let large = area(
            "large", "leisure=park", corners: [(40, -200), (440, -200), (440, 200), (40, 200)],
            inside: (200, 0))
        let ranking = try ranker.rank(fix: fix(), candidates: [large])
        #expect(ranking.places.map(\.place.id) == ["large"])
        #expect(abs(ranking.places[0].distance - 40) < 1e-6)
        // R is clamped to 50...250.
        #expect(ranker.searchRadius(for: fix(accuracy: 0)) == 51)  // σ floors at 1 m
        #expect(ranker.searchRadius(for: fix(accuracy: 500)) == 250)
        #expect(
            try Ranker(model: RankingModel(searchMargin: 20)).searchRadius(for: fix(accuracy: 10)) == 50)
    }

    @Test func invalidInputIsANamedErrorAndRankingZeroIsImpossible() throws {
        let ranker = try Ranker()
        let places = [point("a", "amenity=cafe", east: 5)]
        #expect(throws: RankingError.invalidLimit(0)) {
            try ranker.rank(fix: fix(), candidates: places, limit: 0)
        }
        #expect(throws: RankingError.invalidLimit(21)) {
            try ranker.rank(fix: fix(), candidates: places, limit: 21)
        }
        #expect(try ranker.rank(fix: fix(), candidates: places, limit: 20).places.count == 1)
        let nowhere = Fix(coordinate: Coordinate(latitude: .nan, longitude: 24.9))
        let error = #expect(throws: RankingError.self) {
            try ranker.rank(fix: nowhere, candidates: places)
        }
        guard case .invalidFix(_, 24.9) = error else {
            Issue.record("expected invalidFix, got \(String(describing: error))")
            return
        }
        #expect(throws: RankingError.invalidAccuracy(-1)) {
            try ranker.rank(fix: fix(accuracy: -1), candidates: places)
        }
        #expect(throws: RankingError.invalidSpeed(.infinity)) {
            try ranker.rank(fix: fix(speed: .infinity), candidates: places)
        }
        #expect(throws: RankingError.self) { try Ranker(model: RankingModel(noneWeightAtRest: 0)) }
        #expect(throws: RankingError.self) {
            try Ranker(model: RankingModel(kinds: ["shop": .init(weight: -1)]))
        }
        // Zero accuracy is a perfect fix, floored to σ = 1 m, still finite.
        let exact = try ranker.rank(fix: fix(accuracy: 0), candidates: places)
        #expect(exact.places.allSatisfy { $0.likelihood.isFinite && $0.likelihood > 0 })
    }

    @Test func kindPriorsFallBackFromKindToKeyToOther() {
        let model = RankingModel(
            kinds: ["shop": .init(weight: 2), "shop=books": .init(weight: 5)],
            otherKinds: .init(weight: 0.5))
        #expect(model.prior(ofKind: "shop=books").weight == 5)
        #expect(model.prior(ofKind: "shop=clothes").weight == 2)
        #expect(model.prior(ofKind: "craft=shoemaker").weight == 0.5)
        #expect(model.prior(ofKind: "shop").weight == 2)
        #expect(model.prior(ofKind: "").weight == 0.5)
        // Standard priors: everyday food beats a named building with nothing else to say.
        #expect(
            RankingModel.standard.prior(ofKind: "amenity=cafe").weight
                > RankingModel.standard.prior(ofKind: "building=yes").weight)
    }
}

@Suite struct FootprintTests {
    @Test func concaveOutlineIsInsideOnlyWhereTheShapeIs() {
        // Each origin is a new plane, so distances agree with the outline's own plane to ~0.1 mm.
        // An L: the notch at (15, 15) is inside the bounding box but outside the shape.
        let ell = area(
            "L", "building", corners: [(0, 0), (30, 0), (30, 10), (10, 10), (10, 30), (0, 30)],
            inside: (5, 5))
        func d(_ east: Double, _ north: Double) -> Double {
            ell.footprintDistance(from: LocalProjection(origin: offset(centre, east: east, north: north)))
        }
        #expect(d(5, 5) == 0)
        #expect(d(25, 5) == 0)
        #expect(d(5, 25) == 0)
        #expect(abs(d(15, 15) - 5) < 1e-3)  // 5 m to the inner edges
        #expect(abs(d(-4, 15) - 4) < 1e-3)
        #expect(abs(d(33, 14) - 5) < 1e-3)  // to the corner (30, 10)
    }

    @Test func pointsAndAreasWithoutOutline() {
        let p = point("p", "amenity=cafe", east: 3, north: 4)
        #expect(abs(p.footprintDistance(from: LocalProjection(origin: centre)) - 5) < 1e-9)
        var boxed = area(
            "b", "leisure=park", corners: [(10, -5), (20, -5), (20, 5), (10, 5)], inside: (15, 0))
        boxed.outline = nil
        #expect(abs(boxed.footprintDistance(from: LocalProjection(origin: centre)) - 10) < 1e-6)
        #expect(
            boxed.footprintDistance(from: LocalProjection(origin: offset(centre, east: 12, north: 1)))
                == 0)
    }
}

@Suite struct RankingHistoryTests {
    private func ranking(_ ids: [String]) -> Ranking {
        Ranking(
            fix: fix(),
            places: ids.map {
                RankedPlace(place: point($0, "amenity=cafe", east: 1), distance: 1, likelihood: 0.1)
            },
            noneLikelihood: 0.5, radius: 60)
    }

    @Test func generationsCountUpAndTheLatestKeepsItsFix() {
        var history = RankingHistory()
        #expect(history.latest == nil && history.generation == 0)
        let first = history.publish(ranking(["a"]))
        #expect(first.generation == 1)
        var moved = ranking(["b"])
        moved.fix = fix(at: offset(centre, east: 60, north: 0))
        history.publish(moved)
        #expect(history.generation == 2)
        #expect(history.latest?.generation == 2)
        #expect(history.latest?.fix == moved.fix)
    }

    @Test func findSearchesTheLastFewGenerationsNewestFirst() {
        var history = RankingHistory(depth: 3)
        history.publish(ranking(["old"]))
        history.publish(ranking(["a", "shared"]))
        history.publish(ranking(["b", "shared"]))
        history.publish(ranking(["c"]))
        #expect(history.recent.map(\.generation) == [2, 3, 4])
        #expect(history.find(placeID: "old") == nil)  // four generations ago
        #expect(history.find(placeID: "a")?.generation == 2)
        #expect(history.find(placeID: "shared")?.generation == 3)
        #expect(history.find(placeID: "c")?.generation == 4)
        #expect(history.find(placeID: "nowhere") == nil)
    }

    @Test func staleKeepsTheRankingAndANewOneIsFresh() {
        var history = RankingHistory()
        history.setStale(true)  // nothing to mark: no crash, nothing appears
        #expect(history.latest == nil)
        history.publish(ranking(["a"]))
        history.setStale(true)
        #expect(history.latest?.isStale == true)
        #expect(history.latest?.generation == 1)
        history.publish(ranking(["b"]))
        #expect(history.latest?.isStale == false)
        #expect(history.publish(ranking(["b"]), stale: true).isStale, "ranked again without a fix")
        #expect(history.latest?.isStale == true)
        history.clear()
        #expect(history.latest == nil)
        #expect(history.publish(ranking(["c"])).generation == 4)
    }
}

/// In-memory candidates through a `ReachIndex`, as the daemon's catalog finds them in its file.
private struct Candidates {
    let places: [Place]
    let index: ReachIndex

    init(places: [Place]) {
        self.places = places
        index = ReachIndex(coordinates: places.map(\.coordinate), reaches: places.map(\.reach))
    }

    func within(_ radius: Double, of center: Coordinate) -> [Place] {
        index.members(within: radius, of: center).map { places[Int($0)] }
    }

    func candidates(for fix: Fix, ranker: Ranker) -> [Place] {
        within(ranker.searchRadius(for: fix), of: fix.coordinate)
    }
}

@Suite struct ReachIndexTests {
    @Test func findsEveryPlaceWhoseFootprintIsWithinTheRadius() throws {
        var rng = SplitMix64(seed: 7)
        var places = randomPlaces(&rng, count: 600)
        // Large areas whose inside point is far from the edge the fixes come near.
        for i in 0..<12 {
            let west = rng.uniform(in: -300...100), south = rng.uniform(in: -300...100)
            let width = rng.uniform(in: 60...700), height = rng.uniform(in: 60...700)
            places.append(
                area(
                    "osm:way/large\(i)", "leisure=park",
                    corners: [
                        (west, south), (west + width, south), (west + width, south + height), (west, south + height),
                    ],
                    inside: (west + width * 0.9, south + height * 0.9)))
        }
        let finder = Candidates(places: places)
        let ranker = try Ranker()
        var largeAreasFound = 0
        for _ in 0..<300 {
            let f = randomFix(&rng)
            let radius = ranker.searchRadius(for: f)
            let projection = LocalProjection(origin: f.coordinate)
            let expected = Set(places.filter { $0.footprintDistance(from: projection) <= radius }.map(\.id))
            let found = finder.candidates(for: f, ranker: ranker)
            #expect(expected.subtracting(found.map(\.id)).isEmpty)
            largeAreasFound += found.filter { $0.id.contains("large") && expected.contains($0.id) }.count
            #expect(
                try ranker.rank(fix: f, candidates: found, limit: 20)
                    == ranker.rank(fix: f, candidates: places, limit: 20))
        }
        #expect(largeAreasFound > 50)
    }

    /// The same index used in place in its serialized bytes (as the daemon maps it) finds the same members.
    @Test func mappedReachIndexFindsTheSameMembers() throws {
        var rng = SplitMix64(seed: 17)
        let coordinates = (0..<3000).map { _ in
            Coordinate(
                latitude: 60.17 + rng.uniform(in: -0.01...0.01), longitude: 24.94 + rng.uniform(in: -0.02...0.02))
        }
        let reaches = (0..<3000).map { _ in rng.uniform(in: 0...600) }
        let numbers = (0..<3000).map { Int32(10 * $0 + 3) }
        let index = ReachIndex(coordinates: coordinates, reaches: reaches, members: numbers)
        let serialized = index.serialized()
        let raw = UnsafeMutableRawBufferPointer.allocate(byteCount: serialized.count, alignment: 8)
        defer { raw.deallocate() }
        serialized.withUnsafeBytes { raw.copyMemory(from: $0) }
        final class Owner {}
        let mapped = try ReachIndex(mapping: UnsafeRawBufferPointer(raw), owner: Owner())
        for _ in 0..<100 {
            let here = coordinates[Int(rng.next() % 3000)]
            let radius = rng.uniform(in: 10...300)
            let found = mapped.members(within: radius, of: here)
            #expect(found == index.members(within: radius, of: here))
            let projection = LocalProjection(origin: here)
            let near = coordinates.indices.filter { projection.distance(to: coordinates[$0]) <= radius + reaches[$0] }
            #expect(Set(near.map { numbers[$0] }).isSubset(of: Set(found)))
        }
        #expect(throws: ReachIndexDecodingError.badMagic) {
            _ = try ReachIndex(mapping: UnsafeRawBufferPointer(rebasing: raw[4...]), owner: Owner())
        }
    }

    @Test func reachTiersDoubleFromSixteenMetres() {
        #expect(ReachIndex.tier(forReach: 0) == 0)
        #expect(ReachIndex.tier(forReach: 0.1) == 1)
        #expect(ReachIndex.tier(forReach: 16) == 1)
        #expect(ReachIndex.tier(forReach: 16.01) == 2)
        #expect(ReachIndex.bound(ofTier: 2) == 32)
        #expect(ReachIndex.tier(forReach: 1000) == 7)
        #expect(ReachIndex.bound(ofTier: 7) == 1024)
    }

    @Test func aPlaceWithAnInvalidCoordinateIsNeverFound() {
        let broken = Place(
            id: "broken", name: "broken", kind: "amenity=cafe", coordinate: Coordinate(latitude: .nan, longitude: 0))
        let finder = Candidates(places: [broken, point("ok", "amenity=cafe", east: 3)])
        #expect(finder.within(100, of: centre).map(\.id) == ["ok"])
    }
}

@Suite struct ClosedFactorTests {
    /// A café 4 m east (first), a bar 12 m west, a shop 30 m north, and a pharmacy 400 m away.
    let places = [
        point("cafe", "amenity=cafe", east: 4), point("bar", "amenity=bar", east: -12),
        point("shop", "shop=clothes", north: 30), point("far", "amenity=pharmacy", east: 400),
    ]
    let ranker = try! Ranker()

    @Test func aClosedPlaceWeighsTheClosedWeightAndOthersNothingLess() throws {
        let spatial = try ranker.rank(fix: fix(accuracy: 6), candidates: places, limit: 20)
        let ranking = try ranker.rank(
            fix: fix(accuracy: 6), candidates: places, openState: { $0.id == "cafe" ? .closed : .open }, limit: 20)
        func likelihood(_ r: Ranking, _ id: String) throws -> Double {
            try #require(r.places.first { $0.place.id == id }).likelihood
        }
        // Only the café's weight changed: its odds against any other place, and against none, are × c.
        let c = RankingModel.defaultClosedWeight
        for other in ["bar", "shop"] {
            let before = try likelihood(spatial, "cafe") / likelihood(spatial, other)
            let after = try likelihood(ranking, "cafe") / likelihood(ranking, other)
            #expect(abs(after / before - c) < 1e-12, "café against \(other)")
        }
        let noneBefore = try likelihood(spatial, "bar") / spatial.noneLikelihood
        #expect(abs(try likelihood(ranking, "bar") / ranking.noneLikelihood - noneBefore) < 1e-12)
        #expect(ranking.places.first?.place.id == "bar")
        let sum = ranking.places.reduce(ranking.noneLikelihood) { $0 + $1.likelihood }
        #expect(abs(sum - 1) < 1e-12)
    }

    @Test func withNothingClosedTheRankingIsBitIdentical() throws {
        let memory = try PickMemory(picks: [
            Pick(placeID: "shop", coordinate: centre, accuracy: 6, time: 1_767_571_200)
        ])
        for state in [OpenState.open, .unknown] {
            for accuracy in [2.0, 6, 25, 80] {
                let f = fix(accuracy: accuracy)
                #expect(
                    try ranker.rank(fix: f, candidates: places, openState: { _ in state })
                        == ranker.rank(
                            fix: f, candidates: places))
                #expect(
                    try ranker.rank(
                        fix: f, candidates: places, picks: memory, now: 1_767_574_800, openState: { _ in state })
                        == ranker.rank(fix: f, candidates: places, picks: memory, now: 1_767_574_800))
            }
        }
    }

    @Test func onlyCandidatesWithinReachAreAsked() throws {
        var asked: [String] = []
        _ = try ranker.rank(
            fix: fix(accuracy: 6), candidates: places,
            openState: {
                asked.append($0.id)
                return .closed
            })
        #expect(asked.sorted() == ["bar", "cafe", "shop"])
    }

    @Test func everyPlaceClosedKeepsTheOrderAndGivesWayToNone() throws {
        let spatial = try ranker.rank(fix: fix(accuracy: 6), candidates: places)
        let closed = try ranker.rank(fix: fix(accuracy: 6), candidates: places, openState: { _ in .closed })
        #expect(closed.places.map(\.place.id) == spatial.places.map(\.place.id))
        #expect(closed.noneLikelihood > spatial.noneLikelihood)
    }

    @Test func aClosedWeightOutOfRangeIsNamed() {
        for weight in [0, -0.5, 1.5, .nan, .infinity] {
            #expect(throws: RankingError.invalidModel("closed weight must be > 0 and <= 1")) {
                try Ranker(model: RankingModel(closedWeight: weight))
            }
        }
        #expect(throws: Never.self) { try Ranker(model: RankingModel(closedWeight: 1)) }
    }
}
