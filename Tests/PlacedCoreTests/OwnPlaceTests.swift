#if canImport(Glibc)
    import Glibc
#endif

import Testing

@testable import PlacedCore

private let helsinki = Coordinate(latitude: 60.17, longitude: 24.94)

/// `east` and `north` metres from `origin`, the longitude folded into ±180°.
private func offset(_ origin: Coordinate, east: Double, north: Double) -> Coordinate {
    let c = LocalProjection(origin: origin).coordinate(east: east, north: north)
    return Coordinate(latitude: c.latitude, longitude: Geodesy.normalizedLongitudeDelta(c.longitude))
}

/// A closed ring of corners given in metres around `origin`.
private func ring(_ corners: [(Double, Double)], around origin: Coordinate = helsinki) -> [Coordinate] {
    let points = corners.map { offset(origin, east: $0.0, north: $0.1) }
    return points + [points[0]]
}

/// A 100 m square with a 40 m square hole in its middle.
private let squareWithHole = OwnGeometry.polygons([
    [
        ring([(-50, -50), (50, -50), (50, 50), (-50, 50)]),
        ring([(-20, -20), (-20, 20), (20, 20), (20, -20)]),
    ]
])

@Suite struct OwnGeometryTests {
    @Test func circleInsideAndEdgeDistance() {
        let circle = OwnGeometry.circle(centre: helsinki, radius: 100)
        #expect(circle.contains(offset(helsinki, east: 60, north: 0)))
        #expect(!circle.contains(offset(helsinki, east: 0, north: 130)))
        #expect(abs(circle.distance(from: offset(helsinki, east: 0, north: 130)) - 30) < 0.05)
        #expect(abs(circle.signedDistance(from: offset(helsinki, east: 60, north: 0)) + 40) < 0.05)
        #expect(abs(circle.area - .pi * 10_000) < 1e-6)
    }

    @Test func polygonInsideOutsideAndHole() {
        #expect(squareWithHole.contains(offset(helsinki, east: 35, north: 0)))
        // In the hole: outside, 15 m from the hole's edge.
        let inHole = offset(helsinki, east: 5, north: 0)
        #expect(!squareWithHole.contains(inHole))
        #expect(abs(squareWithHole.distance(from: inHole) - 15) < 0.01)
        // Outside the square: 25 m east of its east edge.
        #expect(abs(squareWithHole.distance(from: offset(helsinki, east: 75, north: 10)) - 25) < 0.01)
        // Beyond a corner: the distance to the corner.
        let corner = squareWithHole.distance(from: offset(helsinki, east: 80, north: 90))
        #expect(abs(corner - (30.0 * 30 + 40 * 40).squareRoot()) < 0.01)
        #expect(abs(squareWithHole.area - (10_000 - 1_600)) < 1)
        #expect(squareWithHole.contains(squareWithHole.interiorPoint))
    }

    @Test func multipolygonIsInsideEitherPart() {
        let two = OwnGeometry.polygons([
            [ring([(0, 0), (10, 0), (10, 10), (0, 10)])],
            [ring([(100, 0), (110, 0), (110, 10), (100, 10)])],
        ])
        #expect(two.contains(offset(helsinki, east: 105, north: 5)))
        #expect(two.contains(offset(helsinki, east: 5, north: 5)))
        #expect(abs(two.distance(from: offset(helsinki, east: 55, north: 5)) - 45) < 0.01)
    }

    @Test func edgeDistanceMatchesTheGeodesicAtCityScale() {
        // A 2 km wide square; a fix 300 m south of its south edge's middle: the local plane agrees with
        // Vincenty to well under a metre.
        let square = OwnGeometry.polygons([[ring([(-1000, 0), (1000, 0), (1000, 2000), (-1000, 2000)])]])
        let fix = offset(helsinki, east: 0, north: -300)
        #expect(abs(square.distance(from: fix) - Geodesy.distance(fix, helsinki)) < 0.5)
    }

    @Test func circleEdgeDistanceIsWithinAMetreOfTheGeodesic() {
        // Near (the local plane) and far (Vincenty), at 60° and 75°: against the geodesic to the centre.
        for latitude in [60.17, 75.0] {
            let centre = Coordinate(latitude: latitude, longitude: 24.94)
            let circle = OwnGeometry.circle(centre: centre, radius: 300)
            for (east, north) in [(700.0, 700.0), (-900.0, 300.0), (5000.0, -3000.0), (0.0, 9000.0)] {
                let fix = offset(centre, east: east, north: north)
                let exact = Geodesy.distance(fix, centre) - 300
                #expect(abs(circle.distance(from: fix) - exact) < 0.5, "\(latitude) \(east),\(north)")
            }
        }
    }

    @Test func aPolygonAcrossTheAntimeridian() {
        let origin = Coordinate(latitude: -16.5, longitude: 180)
        let across = OwnGeometry.polygons([
            [ring([(-500, -500), (500, -500), (500, 500), (-500, 500)], around: origin)]
        ])
        #expect(across.problem() == nil)
        // Its corners' longitudes straddle ±180.
        #expect(across.boundingBox.maxLongitude - across.boundingBox.minLongitude < 0.02)
        #expect(across.contains(Coordinate(latitude: -16.5, longitude: 179.999)))
        #expect(across.contains(Coordinate(latitude: -16.5, longitude: -179.999)))
        #expect(!across.contains(Coordinate(latitude: -16.5, longitude: 179.99)))
        let east = offset(origin, east: 600, north: 0)
        #expect(east.longitude < 0)
        #expect(abs(across.distance(from: east) - 100) < 0.05)
        let circle = OwnGeometry.circle(centre: Coordinate(latitude: 0, longitude: 179.9995), radius: 200)
        #expect(circle.contains(Coordinate(latitude: 0, longitude: -179.9995)))
    }

    @Test func invalidShapesAreNamed() {
        let open = Array(ring([(0, 0), (10, 0), (10, 10), (0, 10)]).dropLast())
        #expect(OwnGeometry.polygons([[open]]).problem() == .ringNotClosed(polygon: 0, ring: 0))
        let bowTie = ring([(0, 0), (10, 10), (10, 0), (0, 10)])
        #expect(OwnGeometry.polygons([[bowTie]]).problem() == .ringCrossesItself(polygon: 0, ring: 0))
        let outer = ring([(0, 0), (10, 0), (10, 10), (0, 10)])
        #expect(OwnGeometry.polygons([[outer], [outer, bowTie]]).problem() == .ringCrossesItself(polygon: 1, ring: 1))
        #expect(OwnGeometry.polygons([[Array(outer.prefix(3))]]).problem() == .ringTooShort(polygon: 0, ring: 0))
        var many = (0..<10_001).map { i in
            offset(
                helsinki, east: 100 * cos(Double(i) / 10_001 * 2 * .pi), north: 100 * sin(Double(i) / 10_001 * 2 * .pi))
        }
        many.append(many[0])
        #expect(OwnGeometry.polygons([[many]]).problem() == .tooManyVertices(10_002))
        let fine = Array(many.prefix(9_000)) + [many[0]]
        #expect(OwnGeometry.polygons([[fine]]).problem() == nil)
        #expect(OwnGeometry.circle(centre: helsinki, radius: 0.5).problem() == .radiusOutOfRange(0.5))
        #expect(OwnGeometry.circle(centre: helsinki, radius: 10_001).problem() == .radiusOutOfRange(10_001))
        #expect(OwnGeometry.circle(centre: helsinki, radius: 10_000).problem() == nil)
        #expect(
            OwnGeometry.circle(centre: Coordinate(latitude: 91, longitude: 0), radius: 5).problem()
                == .invalidCoordinate(latitude: 91, longitude: 0))
    }
}

@Suite struct OwnPlaceValidationTests {
    let circle = OwnGeometry.circle(centre: helsinki, radius: 30)

    @Test func idsAreOwnKeys() {
        #expect(OwnPlace.key(ofID: "own:depot-1.a_B") == "depot-1.a_B")
        #expect(OwnPlace.key(ofID: "own:" + String(repeating: "k", count: 64)) != nil)
        for bad in ["own:", "own:" + String(repeating: "k", count: 65), "osm:node/1", "own:a b", "own:ä", "depot"] {
            #expect(OwnPlace.key(ofID: bad) == nil, "\(bad)")
            #expect(OwnPlace(id: bad, name: "x", geometry: circle).problem() == .badID(bad))
        }
    }

    @Test func namesMustBeNonEmptyAndDecoded() {
        #expect(OwnPlace(id: "own:a", name: "  ", geometry: circle).problem() == .emptyName(language: nil))
        #expect(OwnPlace(id: "own:a", name: "Bad \u{FFFD}", geometry: circle).problem() == .nameNotUTF8(language: nil))
        #expect(
            OwnPlace(id: "own:a", name: "Depot", localizedNames: ["fi": ""], geometry: circle).problem()
                == .emptyName(language: "fi"))
        #expect(OwnPlace(id: "own:a", name: "Depot", weight: 0, geometry: circle).problem() == .invalidWeight(0))
    }

    @Test func detailsMustBeKeptWholeAndHoursMustParse() {
        func place(_ tags: [String: String]) -> OwnPlace {
            OwnPlace(id: "own:a", name: "A", geometry: circle, details: PlaceDetails(normalized: tags))
        }
        #expect(place(["opening_hours": "Mo-Fr 08:00-17:00", "phone": "+358 1"]).problem() == nil)
        #expect(place(["opening_hours": "Mo-Fr 08:00-17:00"]).place().details.openingHours == "Mo-Fr 08:00-17:00")
        guard case .invalidOpeningHours(let why)? = place(["opening_hours": "Mo-Xx 08:00-17:00"]).problem() else {
            Issue.record("unparsed hours accepted")
            return
        }
        #expect(why.contains("offset"))
        #expect(
            place(["website": String(repeating: "w", count: 4097)]).problem()
                == .detailTooLong(key: "website", bytes: 4097))
    }

    @Test func aBatchNamesTheFeatureAtFault() {
        let good = OwnPlace(id: "own:a", name: "A", geometry: circle)
        let twice = OwnPlace(id: "own:a", name: "A again", geometry: circle)
        #expect(throws: OwnPlaceError(feature: 1, id: "own:a", .duplicateID(firstFeature: 0))) {
            try OwnPlace.validate([good, twice])
        }
        let wide = OwnPlace(id: "own:b", name: "B", geometry: .circle(centre: helsinki, radius: 20_000))
        do {
            try OwnPlace.validate([good, wide])
            Issue.record("a radius out of range passed")
        } catch {
            #expect(error.description == "feature 1 (own:b): radius 20000.0 m out of range: 1 to 10000 m")
        }
    }

    @Test func defaultWeightIsAboveAnOSMPlaceOfTheKind() {
        let model = RankingModel.standard
        #expect(OwnPlace(id: "own:a", name: "A", geometry: circle).effectiveWeight(in: model) == 1.25)
        let cafe = OwnPlace(id: "own:a", name: "A", kind: "amenity=cafe", geometry: circle)
        #expect(cafe.effectiveWeight(in: model) == 1.25 * 3)
        #expect(OwnPlace(id: "own:a", name: "A", weight: 7, geometry: circle).effectiveWeight(in: model) == 7)
    }
}

@Suite struct OwnPlaceRankingTests {
    @Test func anOwnPlaceContainingTheFixOutranksTheOSMPlaceOfTheSameSize() throws {
        let ranker = try Ranker()
        let fix = Fix(coordinate: helsinki, accuracy: 5)
        // An OSM cafe mapped as a point (8 m extent) and an own cafe of radius 8 m on the same spot.
        let osm = Place(id: "osm:node/1", name: "Cafe", kind: "amenity=cafe", coordinate: helsinki)
        let own = OwnSite(
            OwnPlace(
                id: "own:cafe", name: "Our cafe", kind: "amenity=cafe", geometry: .circle(centre: helsinki, radius: 8)))
        let ranking = try ranker.rank(fix: fix, candidates: [AnyCandidate(osm), AnyCandidate(own)])
        #expect(ranking.places.map(\.place.id) == ["own:cafe", "osm:node/1"])
        let ratio = ranking.places[0].likelihood / ranking.places[1].likelihood
        #expect(abs(ratio - 1.25) < 1e-9)
        #expect(ranking.places[0].distance == 0)
    }

    @Test func outsideTheDistanceIsToTheEdge() throws {
        let ranker = try Ranker()
        let own = OwnSite(OwnPlace(id: "own:yard", name: "Yard", geometry: squareWithHole))
        let ranking = try ranker.rank(
            fix: Fix(coordinate: offset(helsinki, east: 90, north: 0), accuracy: 10), candidates: [own])
        #expect(abs(ranking.places[0].distance - 40) < 0.01)
        #expect(ranking.places[0].place.area > 8000)
    }

    @Test func theIndexFindsEverySiteInReach() {
        // 2,000 circles on a 50 m grid; each query's result holds every site whose edge is within R.
        var places: [OwnPlace] = []
        for i in 0..<2000 {
            let at = offset(helsinki, east: Double(i % 50) * 50, north: Double(i / 50) * 50)
            places.append(
                OwnPlace(id: "own:s\(i)", name: "S\(i)", geometry: .circle(centre: at, radius: Double(1 + i % 30))))
        }
        places.append(OwnPlace(id: "own:wide", name: "Wide", geometry: .circle(centre: helsinki, radius: 10_000)))
        var index = OwnPlaceIndex(places)
        var found: [OwnSite] = []
        for q in 0..<40 {
            let at = offset(helsinki, east: Double(q) * 61 - 100, north: Double(q) * 53 - 100)
            index.candidates(within: 120, of: at, into: &found)
            let ids = Set(found.map(\.id))
            #expect(ids.count == found.count)
            for place in places where place.geometry.distance(from: at) <= 120 {
                #expect(ids.contains(place.id), "\(place.id) missing at query \(q)")
            }
        }
        #expect(index.deleting(["own:s1"]).count == 2000)
        #expect(
            index.putting([OwnPlace(id: "own:s1", name: "New", geometry: squareWithHole)]).site(id: "own:s1")?.place
                .name == "New")
    }

    @Test func antimeridianSitesAreFoundFromEitherSide() {
        var index = OwnPlaceIndex([
            OwnPlace(
                id: "own:east", name: "E",
                geometry: .circle(centre: Coordinate(latitude: 0, longitude: 179.9999), radius: 20))
        ])
        var found: [OwnSite] = []
        index.candidates(within: 50, of: Coordinate(latitude: 0, longitude: -179.9999), into: &found)
        #expect(found.map(\.id) == ["own:east"])
    }
}

/// A candidate of either kind, for ranking OSM and own places together in a test.
private struct AnyCandidate: RankingCandidate {
    let base: any RankingCandidate
    init(_ base: any RankingCandidate) { self.base = base }
    var kind: String { base.kind }
    func prior(in model: RankingModel) -> RankingModel.KindPrior { base.prior(in: model) }
    var area: Double { base.area }
    func lowerBoundDistance(from projection: LocalProjection) -> Double { base.lowerBoundDistance(from: projection) }
    func footprintDistance(from projection: LocalProjection) -> Double { base.footprintDistance(from: projection) }
    var id: String { base.id }
    func hasID(_ id: String) -> Bool { base.hasID(id) }
    var place: Place { base.place }
}

@Suite struct BoundaryTrackerTests {
    let site = OwnPlace(id: "own:depot", name: "Depot", geometry: .circle(centre: helsinki, radius: 100))

    func fix(east: Double, second: Double, radius95: Double = 5) -> Fix {
        Fix(
            receivedAt: UInt64(second * 1e6), coordinate: offset(helsinki, east: east, north: 0),
            accuracy: Fix.sigma(fromRadius95: radius95))
    }

    @Test func entersAfterTheDwellAndLeavesLikewise() throws {
        var tracker = try BoundaryTracker(settings: BoundarySettings(margin: 10, dwell: 10))
        var index = OwnPlaceIndex([site])
        #expect(tracker.consider(fix(east: 200, second: 0), places: &index).isEmpty)
        #expect(tracker.consider(fix(east: 50, second: 1), places: &index).isEmpty)
        #expect(tracker.consider(fix(east: 50, second: 10), places: &index).isEmpty)
        let entered = tracker.consider(fix(east: 40, second: 11), places: &index)
        #expect(entered.map(\.transition) == [.entered])
        #expect(entered.first?.place.id == "own:depot")
        #expect(tracker.inside == ["own:depot"])
        #expect(tracker.consider(fix(east: 150, second: 20), places: &index).isEmpty)
        #expect(tracker.consider(fix(east: 150, second: 30), places: &index).map(\.transition) == [.left])
        #expect(tracker.inside.isEmpty)
    }

    @Test func jitterAcrossTheBoundaryTogglesNothing() throws {
        var tracker = try BoundaryTracker(settings: BoundarySettings(margin: 10, dwell: 5))
        var index = OwnPlaceIndex([site])
        _ = tracker.consider(fix(east: 50, second: 0), places: &index)
        #expect(tracker.consider(fix(east: 50, second: 6), places: &index).map(\.transition) == [.entered])
        // Fixes 5 m either side of the edge with a 10 m circle: they straddle it, so nothing changes.
        for second in 7..<100 {
            let east = second % 2 == 0 ? 95.0 : 105.0
            #expect(tracker.consider(fix(east: east, second: Double(second), radius95: 10), places: &index).isEmpty)
        }
        #expect(tracker.inside == ["own:depot"])
        // Out clearly but back in before the dwell: no leave.
        _ = tracker.consider(fix(east: 200, second: 100), places: &index)
        _ = tracker.consider(fix(east: 200, second: 103), places: &index)
        _ = tracker.consider(fix(east: 20, second: 104), places: &index)
        #expect(tracker.consider(fix(east: 200, second: 106), places: &index).isEmpty)
        #expect(tracker.inside == ["own:depot"])
    }

    @Test func aPoorFixNeverEntersASmallPlace() throws {
        var tracker = try BoundaryTracker(settings: BoundarySettings(margin: 0, dwell: 0))
        var index = OwnPlaceIndex([site])
        #expect(tracker.consider(fix(east: 0, second: 0, radius95: 150), places: &index).isEmpty)
        #expect(tracker.consider(fix(east: 0, second: 1, radius95: 20), places: &index).map(\.transition) == [.entered])
    }

    @Test func aDeletedPlaceIsForgotten() throws {
        var tracker = try BoundaryTracker(settings: BoundarySettings(margin: 0, dwell: 0))
        var index = OwnPlaceIndex([site])
        #expect(tracker.consider(fix(east: 0, second: 0), places: &index).count == 1)
        var empty = index.deleting(["own:depot"])
        #expect(tracker.consider(fix(east: 0, second: 1), places: &empty).isEmpty)
        #expect(tracker.inside.isEmpty)
        #expect(throws: RankingError.self) { try BoundaryTracker(settings: BoundarySettings(margin: -1)) }
    }
}
