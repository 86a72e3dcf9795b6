import PlacedTestSupport
import Testing

@testable import PlacedCore

private let cafe = Coordinate(latitude: 60.17, longitude: 24.94)

private func at(_ east: Double, _ north: Double, from origin: Coordinate = cafe) -> Coordinate {
    LocalProjection(origin: origin).coordinate(east: east, north: north)
}

/// A fix `second` seconds into the track.
private func fix(_ second: Double, _ coordinate: Coordinate, sigma: Double? = 3, speed: Double? = 0.1) -> Fix {
    Fix(receivedAt: UInt64(second * 1e6), coordinate: coordinate, mode: .threeD, accuracy: sigma, speed: speed)
}

/// Feeds `fixes`, returning every event with the receipt time of the fix that caused it.
private func run(_ detector: inout VisitDetector, _ fixes: [Fix]) -> [(event: VisitEvent, second: Double)] {
    var events: [(VisitEvent, Double)] = []
    for f in fixes {
        for event in detector.consider(f) { events.append((event, Double(f.receivedAt) / 1e6)) }
    }
    return events
}

private func started(_ events: [(event: VisitEvent, second: Double)]) -> [(visit: Visit, second: Double)] {
    events.compactMap { if case .started(let v) = $0.event { (v, $0.second) } else { nil } }
}

private func ended(_ events: [(event: VisitEvent, second: Double)]) -> [(visit: Visit, second: Double)] {
    events.compactMap { if case .ended(let v) = $0.event { (v, $0.second) } else { nil } }
}

/// One fix a second at `place` from `from` to `to` (exclusive), each `jitter` metres off in a fixed
/// pseudo-random direction.
private func stay(
    _ from: Double, _ to: Double, at place: Coordinate = cafe, jitter: Double = 3, rng: inout SplitMix64
) -> [Fix] {
    stride(from: from, to: to, by: 1).map { t in
        fix(t, at(jitter * rng.gaussian(), jitter * rng.gaussian(), from: place))
    }
}

/// Driving east at 12 m/s from `from` to `to`, starting `east0` metres east of the café.
private func drive(_ from: Double, _ to: Double, east0: Double, speed: Double = 12) -> [Fix] {
    stride(from: from, to: to, by: 1).map { t in fix(t, at(east0 + speed * (t - from), 0), speed: speed) }
}

@Suite struct VisitDetectorTests {
    @Test func aVisitStartsAfterTheDwellTimeDatedByArrival() throws {
        var detector = try VisitDetector()
        var rng = SplitMix64(seed: 1)
        let track = drive(0, 30, east0: -360) + stay(30, 400, rng: &rng)
        let events = run(&detector, track)
        let starts = started(events)
        #expect(starts.count == 1)
        #expect(ended(events).isEmpty)
        let (visit, second) = try #require(starts.first)
        #expect(visit.id == 1)
        #expect(second == 150, "started once the stay lasted 120 s")
        #expect(visit.startedAt == 30_000_000)
        #expect(Geodesy.distance(visit.centre, cafe) < 1.5)
        #expect(visit.fixes == 121)
        // Accuracy of the average: 3/√121 = 0.27 m by count, but no better than half the best fix.
        #expect(visit.accuracy == 1.5)
        #expect(detector.visit?.id == 1)
        #expect(detector.visit?.fixes == 370, "the open visit keeps averaging")
        #expect(visit.position.accuracy == 1.5 && visit.position.speed == 0)
    }

    @Test func theAveragedAccuracyShrinksWithTheFixesDownToHalfTheBest() throws {
        var detector = try VisitDetector(settings: VisitSettings(dwellTime: 10))
        let fixes = [0.0, 5, 10].map { fix($0, cafe, sigma: 20) }
        let visit = try #require(started(run(&detector, fixes)).first).visit
        #expect(abs(visit.accuracy - 20 / 3.0.squareRoot()) < 1e-9)
        var few = try VisitDetector(settings: VisitSettings(dwellTime: 10))
        let five = [0.0, 2.5, 5, 7.5, 10].map { fix($0, cafe, sigma: 4) }  // 4/√5 = 1.79
        #expect(try #require(started(run(&few, five)).first).visit.accuracy == 2)
    }

    @Test func jitterAndStrayFixesNeitherBreakADwellNorEndAVisit() throws {
        var detector = try VisitDetector()
        var rng = SplitMix64(seed: 2)
        var track = stay(0, 900, jitter: 8, rng: &rng)
        // A multipath jump of 60 m for 3 s every 40 s.
        for i in track.indices where i % 40 >= 37 { track[i].coordinate = at(60, 10) }
        let events = run(&detector, track)
        #expect(started(events).map(\.second) == [120])
        #expect(ended(events).isEmpty)
    }

    @Test func aVagueFixCannotShowTheDeviceLeft() throws {
        var detector = try VisitDetector()
        var rng = SplitMix64(seed: 3)
        // 45 m off, but stating a 95 % radius of 49 m, for a minute.
        let vague = stride(from: 300.0, to: 360, by: 1).map { fix($0, at(45, 0), sigma: 20) }
        let events = run(&detector, stay(0, 300, rng: &rng) + vague + stay(360, 400, rng: &rng))
        #expect(started(events).count == 1)
        #expect(ended(events).isEmpty)
    }

    @Test func trafficStopsAreNotVisits() throws {
        var detector = try VisitDetector()
        var rng = SplitMix64(seed: 4)
        var track = drive(0, 30, east0: -360)
        var t = 30.0
        for length in [20.0, 45, 59] {  // red lights
            track += stay(t, t + length, jitter: 2, rng: &rng)
            t += length
            track += drive(t, t + 40, east0: 0)
            t += 40
        }
        #expect(run(&detector, track).isEmpty)
    }

    @Test func drivingSlowlyPastIsNotAVisitNorIsAFastFixInside() throws {
        var detector = try VisitDetector()
        // 0.6 m/s for 10 minutes: 360 m. (Slower than radius / (dwell time / 2), 0.5 m/s, stays within
        // 30 m of the running centre for 2 minutes: that creep is a stay.)
        let creep = drive(0, 600, east0: -120, speed: 0.6)
        #expect(run(&detector, creep).isEmpty)
        // Standing still but reporting 5 m/s (a car on a turntable, a lift): not dwelling.
        var spinning = try VisitDetector()
        #expect(run(&spinning, (0..<300).map { fix(Double($0), cafe, speed: 5) }).isEmpty)
    }

    @Test func aGapShorterThanTheLimitKeepsTheDwell() throws {
        var detector = try VisitDetector()
        var rng = SplitMix64(seed: 5)
        let events = run(&detector, stay(0, 50, rng: &rng) + stay(75, 300, rng: &rng))  // 25 s silent
        #expect(started(events).map(\.second) == [120])
        #expect(started(events).first?.visit.startedAt == 0)
    }

    @Test func aLongerGapBeforeTheDwellStartsTheStayOver() throws {
        var detector = try VisitDetector()
        var rng = SplitMix64(seed: 6)
        let events = run(&detector, stay(0, 100, rng: &rng) + stay(160, 400, rng: &rng))  // 60 s silent
        #expect(started(events).map(\.second) == [280])
        #expect(started(events).first?.visit.startedAt == 160_000_000)
    }

    @Test func anOpenVisitSurvivesAnyGapAndEndsIfTheDeviceIsElsewhereAfterIt() throws {
        var detector = try VisitDetector()
        var rng = SplitMix64(seed: 7)
        // Indoors for 20 minutes without a fix, then still at the café.
        var events = run(&detector, stay(0, 200, rng: &rng) + stay(1_400, 1_500, rng: &rng))
        #expect(started(events).count == 1 && ended(events).isEmpty)
        // Silent again, then 2 km away: the visit ended at its last fix at the café.
        let away = stride(from: 2_000.0, to: 2_040, by: 1).map { fix($0, at(2_000, 0), speed: 0) }
        events = run(&detector, away)
        let end = try #require(ended(events).first)
        #expect(end.second == 2_030)
        #expect(end.visit.endedAt == 1_499_000_000)
        #expect(end.visit.duration == 1_499)
    }

    @Test func leavingEndsTheVisitAfterTheDepartureTime() throws {
        var detector = try VisitDetector()
        var rng = SplitMix64(seed: 8)
        let events = run(&detector, stay(0, 600, rng: &rng) + drive(600, 700, east0: 10))
        let end = try #require(ended(events).first)
        #expect(ended(events).count == 1)
        // Outside 30 m from about 602 s (12 m/s from 10 m east), for 30 s.
        #expect(end.second >= 630 && end.second <= 634)
        #expect(end.visit.endedAt! >= 599_000_000 && end.visit.endedAt! <= 602_000_000)
        #expect(abs(end.visit.duration - 600) <= 2)
        #expect(detector.visit == nil)
    }

    @Test func walkingNextDoorEndsOneVisitAndDatesTheNextByItsFirstFix() throws {
        var detector = try VisitDetector()
        var rng = SplitMix64(seed: 9)
        let shop = at(70, 0)
        let walk = stride(from: 300.0, to: 350, by: 1).map { t in fix(t, at(1.4 * (t - 300), 0), speed: 1.4) }
        let events = run(&detector, stay(0, 300, rng: &rng) + walk + stay(350, 700, at: shop, rng: &rng))
        let starts = started(events)
        #expect(starts.count == 2)
        #expect(ended(events).count == 1)
        #expect(starts.map(\.visit.id) == [1, 2])
        let next = try #require(starts.last)
        #expect(Geodesy.distance(next.visit.centre, shop) < 8, "the walk in is part of the stay")
        // The walk's last 30 m and the shop are one stay: arrival dated some 20 s before the shop's first fix.
        #expect(next.visit.startedAt >= 320_000_000 && next.visit.startedAt <= 350_000_000)
        #expect(next.second == Double(next.visit.startedAt) / 1e6 + 120)
    }

    @Test func invalidSettingsAreNamed() {
        #expect(throws: VisitError.self) { try VisitDetector(settings: VisitSettings(radius: 0)) }
        #expect(throws: VisitError.self) { try VisitDetector(settings: VisitSettings(dwellTime: .nan)) }
        #expect(throws: VisitError.self) { try VisitDetector(settings: VisitSettings(maximumSpeed: -1)) }
    }
}

@Suite struct VisitPlaceTrackerTests {
    private func visit(_ id: UInt64 = 1) -> Visit {
        Visit(
            id: id, startedAt: 0, endedAt: nil, lastSeenAt: 120_000_000, centre: cafe, accuracy: 2, fixes: 120,
            mode: .threeD)
    }

    private func ranking(_ likelihoods: [(String, Double)]) -> Ranking {
        Ranking(
            fix: visit().position,
            places: likelihoods.map {
                RankedPlace(
                    place: Place(id: $0.0, name: $0.0, kind: "amenity=cafe", coordinate: cafe), distance: 1,
                    likelihood: $0.1)
            }, noneLikelihood: 1 - likelihoods.reduce(0) { $0 + $1.1 }, radius: 50)
    }

    @Test func selectsTheTopPlaceOnceItReachesTheThresholdOncePerVisit() throws {
        var tracker = try VisitPlaceTracker(autoSelectThreshold: 0.9)
        #expect(tracker.started(visit(), ranking: ranking([("a", 0.6), ("b", 0.3)])) == nil)
        let proposed = tracker.ranked(ranking([("a", 0.93), ("b", 0.02)]))
        #expect(proposed?.place.id == "a")
        // Proposed once, whether or not the selection could be recorded.
        #expect(tracker.ranked(ranking([("a", 0.95)])) == nil)
        tracker.recordSelection(try #require(proposed), automatic: true)
        #expect(tracker.selection?.automatic == true)
        #expect(tracker.ended(visit())?.place.id == "a")
        // The next visit may be auto-selected again.
        #expect(tracker.started(visit(2), ranking: ranking([("b", 0.9)]))?.place.id == "b")
    }

    @Test func aSelectionDuringTheVisitWinsAndIsItsPlace() throws {
        var tracker = try VisitPlaceTracker(autoSelectThreshold: 0.9)
        _ = tracker.started(visit(), ranking: ranking([("a", 0.6), ("b", 0.3)]))
        let b = ranking([("b", 0.3)]).places[0]
        tracker.recordSelection(b, automatic: false)
        #expect(tracker.ranked(ranking([("a", 0.99)])) == nil, "a person's selection is not overruled")
        #expect(tracker.place?.place.id == "b")
        #expect(tracker.ended(visit())?.place.id == "b")
        #expect(tracker.visit == nil)
    }

    @Test func withoutASelectionTheVisitIsAtItsTopPlace() throws {
        var tracker = try VisitPlaceTracker()
        #expect(tracker.started(visit(), ranking: ranking([("a", 0.99)])) == nil, "AutoSelect off")
        #expect(tracker.ended(visit())?.place.id == "a")
        _ = tracker.started(visit(2), ranking: ranking([]))
        #expect(tracker.ended(visit(2)) == nil, "no place near")
        // Outside a visit, selections and rankings are no visit's.
        tracker.recordSelection(ranking([("a", 0.5)]).places[0], automatic: false)
        #expect(tracker.ranked(ranking([("a", 0.99)])) == nil)
        #expect(tracker.selection == nil)
    }

    @Test func theThresholdIsNamedWhenOutOfRange() {
        #expect(throws: VisitError.self) { try VisitPlaceTracker(autoSelectThreshold: 0.3) }
        #expect(throws: VisitError.self) { try VisitPlaceTracker(autoSelectThreshold: 1.5) }
        #expect(throws: VisitError.self) { try VisitPlaceTracker(autoSelectThreshold: .nan) }
    }
}
