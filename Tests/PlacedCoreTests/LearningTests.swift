import PlacedTestSupport
import Testing

@testable import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

private let centre = Coordinate(latitude: 60.17, longitude: 24.94)
private let day = 86_400.0
private let start = 1_767_571_200.0

private func offset(_ east: Double, _ north: Double, from origin: Coordinate = centre) -> Coordinate {
    LocalProjection(origin: origin).coordinate(east: east, north: north)
}

private func cafe(_ id: String, east: Double, north: Double = 0, from origin: Coordinate = centre) -> Place {
    Place(id: id, name: id, kind: "amenity=cafe", coordinate: offset(east, north, from: origin))
}

/// σ 6.1 m: a 15 m 95 % radius, a consumer receiver in a street.
private func fix(_ at: Coordinate = centre, sigma: Double = 6.1) -> Fix {
    Fix(coordinate: at, accuracy: sigma, speed: 0)
}

private func pick(_ id: String, at: Coordinate = centre, sigma: Double? = 6.1, time: Double = start) -> Pick {
    Pick(placeID: id, coordinate: at, accuracy: sigma, time: time)
}

/// Three cafés: "a" 4 m east of the fix (first), "b" 14 m west, "c" 25 m north.
private let street = [cafe("a", east: 4), cafe("b", east: -14), cafe("c", east: 0, north: 25)]

private func ids(_ ranking: Ranking) -> [String] { ranking.places.map(\.place.id) }

/// Learning by place alone, as before time of week counted: for the tests of what a pick's place,
/// position and age do.
private let byPlaceOnly = LearningSettings(timeFloor: 1)

@Suite struct LearningTests {
    let ranker = try! Ranker()

    @Test func onePickHereMakesAPlaceFirstHere() throws {
        let spatial = try ranker.rank(fix: fix(), candidates: street)
        #expect(ids(spatial) == ["a", "b", "c"])
        for target in ["b", "c"] {
            let memory = try PickMemory(picks: [pick(target)])
            let learned = try ranker.rank(fix: fix(), candidates: street, picks: memory, now: start + 3_600)
            #expect(learned.places.first?.place.id == target, "one pick of \(target) here")
            let before = try #require(spatial.places.first { $0.place.id == target }).likelihood
            #expect(learned.places[0].likelihood > before)
            // An hour later on the same day: the time-of-week weight of 4 quarter hours apart.
            let weight = LearningSettings.standard.timeOfWeekWeight(quartersApart: 4, sameKindOfDay: true)
            #expect(learned.evidence > 0.99 * weight && learned.evidence <= weight)
        }
    }

    @Test func picksTwoHundredMetresAwayChangeNothingHere() throws {
        let far = offset(200, 0)
        let places = street + [cafe("far", east: 0, from: far), cafe("far2", east: 12, from: far)]
        let memory = try PickMemory(picks: (0..<50).map { pick("far2", at: far, time: start + Double($0) * day) })
        for sigma in [2.0, 6.1, 20, 60] {
            let learned = try ranker.rank(
                fix: fix(sigma: sigma), candidates: places, picks: memory, now: start + 60 * day)
            let spatial = try ranker.rank(fix: fix(sigma: sigma), candidates: places)
            #expect(learned == spatial, "σ \(sigma)")
            #expect(learned.evidence == 0)
        }
        // …and still count where they were made.
        let there = try ranker.rank(fix: fix(far), candidates: places, picks: memory, now: start + 60 * day)
        #expect(there.places.first?.place.id == "far2")
    }

    @Test func theNeighbourhoodGrowsWithAccuracyWithinBounds() {
        let settings = LearningSettings.standard
        #expect(settings.neighbourhood(sigma: 2) == 40)
        #expect(abs(settings.neighbourhood(sigma: 20) - 2 * 2.448 * 20) < 1e-9)
        #expect(settings.neighbourhood(sigma: 100) == 150)
    }

    @Test func picksFadeWithTheirHalfLife() throws {
        let memory = try PickMemory(settings: byPlaceOnly, picks: [pick("b")])
        let halfLife = LearningSettings.standard.halfLife
        var previous = Double.infinity
        for halfLives in [0.0, 1, 2, 5, 20] {
            let ranking = try ranker.rank(
                fix: fix(), candidates: street, picks: memory, now: start + halfLives * halfLife)
            #expect(abs(ranking.evidence - exp2(-halfLives)) < 1e-12, "\(halfLives) half-lives")
            let b = try #require(ranking.places.first { $0.place.id == "b" }).likelihood
            #expect(b < previous)
            previous = b
        }
        // A clock set back does not make a pick count more than when it was made.
        let earlier = try ranker.rank(fix: fix(), candidates: street, picks: memory, now: start - 30 * day)
        #expect(earlier.evidence == 1)
    }

    @Test func likelihoodsStayInBoundsAndSumToOneWithNone() throws {
        var rng = SplitMix64(seed: 11)
        var places: [Place] = []
        for i in 0..<120 {
            places.append(cafe("p\(i)", east: rng.uniform(in: -120...120), north: rng.uniform(in: -120...120)))
        }
        var picks: [Pick] = []
        for i in 0..<2_000 {
            let id = rng.next() % 10 == 0 ? "gone/\(i % 7)" : places[Int(rng.next() % 120)].id
            picks.append(
                pick(
                    id, at: offset(rng.uniform(in: -150...150), rng.uniform(in: -150...150)),
                    sigma: rng.next() % 5 == 0 ? nil : rng.uniform(in: 1...30), time: start + Double(i) * 3_000))
        }
        let memory = try PickMemory(picks: picks)
        var learned = 0
        for _ in 0..<300 {
            let f = fix(
                offset(rng.uniform(in: -100...100), rng.uniform(in: -100...100)), sigma: rng.uniform(in: 1...40))
            let ranking = try ranker.rank(
                fix: f, candidates: places, picks: memory, now: start + 80 * day, limit: Ranker.maximumLimit)
            #expect(ranking.places.allSatisfy { $0.likelihood >= 0 && $0.likelihood <= 1 })
            #expect(ranking.noneLikelihood >= 0 && ranking.noneLikelihood <= 1)
            let sum = ranking.places.reduce(ranking.noneLikelihood) { $0 + $1.likelihood }
            #expect(sum <= 1 + 1e-12)
            if ranking.places.count < Ranker.maximumLimit { #expect(abs(sum - 1) < 1e-9) }
            #expect(
                zip(ranking.places, ranking.places.dropFirst()).allSatisfy { $0.likelihood >= $1.likelihood })
            if ranking.evidence > 0 { learned += 1 }
        }
        #expect(learned > 250)
    }

    @Test func theSameLogGivesTheSameRankingWhicheverWayTheMemoryWasBuilt() throws {
        var rng = SplitMix64(seed: 12)
        let places = (0..<40).map { cafe("p\($0)", east: rng.uniform(in: -60...60), north: rng.uniform(in: -60...60)) }
        let picks = (0..<500).map { i in
            pick(
                places[Int(rng.next() % 40)].id, at: offset(rng.uniform(in: -60...60), rng.uniform(in: -60...60)),
                sigma: rng.uniform(in: 2...12), time: start + Double(i) * 600)
        }
        let once = try PickMemory(picks: picks)
        var appended = try PickMemory()
        for p in picks { appended.append(p) }  // crosses several tree rebuilds, ends with pending picks
        #expect(once.count == 500 && appended.count == 500)
        for _ in 0..<100 {
            let f = fix(offset(rng.uniform(in: -60...60), rng.uniform(in: -60...60)))
            let a = try ranker.rank(fix: f, candidates: places, picks: once, now: start + 10 * day, limit: 20)
            let b = try ranker.rank(fix: f, candidates: places, picks: appended, now: start + 10 * day, limit: 20)
            var shuffled = places
            shuffled.shuffle(using: &rng)
            let c = try ranker.rank(fix: f, candidates: shuffled, picks: once, now: start + 10 * day, limit: 20)
            #expect(a == b)
            #expect(a == c)
        }
    }

    @Test func aPickOfAPlaceNotAmongTheCandidatesCountsForNone() throws {
        let memory = try PickMemory(picks: [pick("osm:node/removed"), pick("osm:node/removed", time: start + 60)])
        let learned = try ranker.rank(fix: fix(), candidates: street, picks: memory, now: start + 120)
        let spatial = try ranker.rank(fix: fix(), candidates: street)
        #expect(learned.noneLikelihood > spatial.noneLikelihood + 0.3)
        #expect(ids(learned) == ids(spatial), "the places keep their order")
        #expect(learned.places[0].likelihood < spatial.places[0].likelihood)
    }

    @Test func picksThatAgreeWithTheModelChangeLittle() throws {
        // Many picks here, spread the way the spatial model expects: the stronger priors of the ladder
        // explain them better, so the ranking stays close to the model's.
        let spatial = try ranker.rank(fix: fix(), candidates: street)
        var picks: [Pick] = []
        for ranked in spatial.places {
            for k in 0..<Int((ranked.likelihood * 100).rounded()) {
                picks.append(pick(ranked.place.id, time: start + Double(picks.count + k)))
            }
        }
        let memory = try PickMemory(picks: picks)
        let learned = try ranker.rank(fix: fix(), candidates: street, picks: memory, now: start + 1_000)
        #expect(ids(learned) == ids(spatial))
        for (l, s) in zip(learned.places, spatial.places) { #expect(abs(l.likelihood - s.likelihood) < 0.05) }
        // The same number of picks all of "c", which the model thinks unlikely here: "c" is certain.
        let contrary = try PickMemory(picks: (0..<picks.count).map { pick("c", time: start + Double($0)) })
        let overruled = try ranker.rank(fix: fix(), candidates: street, picks: contrary, now: start + 1_000)
        #expect(overruled.places[0].place.id == "c" && overruled.places[0].likelihood > 0.95)
    }

    @Test func picksNearButNotHereCountLessWithDistance() throws {
        var previous = Double.infinity
        for metres in [0.0, 5, 10, 20, 35] {
            let memory = try PickMemory(picks: [pick("b", at: offset(metres, 0))])
            let ranking = try ranker.rank(fix: fix(), candidates: street, picks: memory, now: start)
            #expect(ranking.evidence < previous, "\(metres) m")
            previous = ranking.evidence
        }
    }

    @Test func aKioskThousandsOfPicksAtOnePositionRanksFromAllOfThem() throws {
        // 900 picks of "b" and 100 of "c" at the same position: one entry each, both counted in full.
        var picks = (0..<900).map { pick("b", time: start + Double($0)) }
        picks += (0..<100).map { pick("c", time: start + 900 + Double($0)) }
        let memory = try PickMemory(picks: picks)
        #expect(memory.count == 1_000)
        #expect(memory.entries.count == 2)
        let ranking = try ranker.rank(fix: fix(), candidates: street, picks: memory, now: start + 1_000)
        #expect(ids(ranking).prefix(2) == ["b", "c"])
        // "b" was picked in the quarter hour before now's, "c" in now's.
        let settings = LearningSettings.standard
        let wb = settings.timeOfWeekWeight(quartersApart: 1, sameKindOfDay: true)
        let wc = settings.timeOfWeekWeight(quartersApart: 0, sameKindOfDay: true)
        #expect(abs(ranking.evidence - (900 * wb + 100 * wc)) < 1)
        let b = ranking.places[0].likelihood, c = ranking.places[1].likelihood
        #expect(abs(b / c - 9 * wb / wc) < 0.1)
    }

    @Test func atMostTheNearestPicksCount() throws {
        let settings = LearningSettings(maximumNeighbours: 8)
        let picks = (0..<30).map { pick("b", at: offset(Double($0), 0), time: start + Double($0)) }
        let memory = try PickMemory(settings: settings, picks: picks)
        let nearby = memory.nearby(centre, within: 100, now: start + 30)
        #expect(nearby.count == 8)
        #expect(nearby.map(\.distance) == nearby.map(\.distance).sorted())
        #expect(abs(nearby.last!.distance - 7) < 1e-9)
    }

    @Test func invalidSettingsAreNamed() {
        #expect(throws: LearningError.self) { try PickMemory(settings: LearningSettings(halfLife: 0)) }
        #expect(throws: LearningError.self) { try PickMemory(settings: LearningSettings(strength: -1)) }
        #expect(throws: LearningError.self) { try PickMemory(settings: LearningSettings(strength: .nan)) }
        #expect(throws: LearningError.self) {
            try PickMemory(settings: LearningSettings(minimumNeighbourhood: 200, maximumNeighbourhood: 100))
        }
    }

    @Test func invalidTimeOfWeekSettingsAreNamed() {
        for settings in [
            LearningSettings(timeFloor: -0.1), LearningSettings(timeFloor: 1.5), LearningSettings(timeFloor: .nan),
            LearningSettings(timeOfDayWidth: 0), LearningSettings(timeOfDayWidth: .infinity),
            LearningSettings(otherDayKindWeight: 2), LearningSettings(timePeak: 0.5), LearningSettings(timePeak: .nan),
            LearningSettings(timeConcentration: -1), LearningSettings(timeConcentration: .infinity),
        ] {
            #expect(throws: LearningError.self) { try PickMemory(settings: settings) }
        }
    }

    @Test func invalidPicksAreIgnored() throws {
        let memory = try PickMemory(picks: [
            pick("b", at: Coordinate(latitude: .nan, longitude: 0)), pick("b", time: .infinity), pick("c"),
        ])
        #expect(memory.count == 1)
    }
}

@Suite struct AccuracyConventionTests {
    @Test func sigmaAndThe95PercentRadiusConvertBothWays() {
        #expect(Fix.radius95PerSigma == 2.448)
        #expect(Fix.sigma(fromRadius95: 24.48) == 10)
        #expect(Fix.sigma(fromEPH: 24.48) == Fix.sigma(fromRadius95: 24.48))
        #expect(abs(Fix.radius95(fromSigma: 10) - 24.48) < 1e-12)
        for radius in [0.0, 1, 15, 250] {
            #expect(abs(Fix.radius95(fromSigma: Fix.sigma(fromRadius95: radius)) - radius) < 1e-12)
        }
        #expect(Fix(coordinate: centre, accuracy: nil).radius95 == nil)
        #expect(abs(Fix(coordinate: centre, accuracy: 5).radius95! - 12.24) < 1e-12)
    }

    @Test func the95PercentRadiusHolds95PercentOfACircularNormalError() {
        // P(r <= k σ) = 1 − exp(−k²/2) for a circular normal error.
        let k = Fix.radius95PerSigma
        #expect(abs((1 - exp(-k * k / 2)) - 0.95) < 0.0002)
    }
}

/// Monday 2026-01-05 00:00 UTC plus `days` and `hours`.
private func at(day days: Double, hour: Double) -> Double { start + days * day + hour * 3_600 }

@Suite struct TimeOfWeekLearningTests {
    let ranker = try! Ranker()
    let settings = LearningSettings.standard

    @Test func aPickCountsMostAtItsOwnTimeOfWeekAndNeverBelowTheFloor() throws {
        let memory = try PickMemory(picks: [pick("b", time: at(day: 0, hour: 8))])
        func weight(_ time: Double) -> Double {
            let ageless = exp2((time - at(day: 0, hour: 8)) / settings.halfLife)
            return memory.nearby(centre, within: 50, now: time)[0].weight * ageless
        }
        let peak = settings.timePeak
        #expect(abs(weight(at(day: 7, hour: 8)) - peak) < 1e-9, "a week later, same time")
        #expect(abs(weight(at(day: 2, hour: 8)) - peak) < 1e-9, "another weekday, same time")
        let saturday = weight(at(day: 5, hour: 8))
        #expect(
            abs(saturday - peak * (settings.timeFloor + (1 - settings.timeFloor) * settings.otherDayKindWeight)) < 1e-9)
        let evening = weight(at(day: 0, hour: 20))
        #expect(evening > peak * settings.timeFloor * (1 - 1e-9) && evening < peak * settings.timeFloor * 1.001)
        // Farther in the day, less; the day is a circle (07:00 and 09:00 alike, 23:00 as near as 17:00).
        #expect(weight(at(day: 1, hour: 9)) < peak && weight(at(day: 1, hour: 10)) < weight(at(day: 1, hour: 9)))
        #expect(abs(weight(at(day: 1, hour: 7)) - weight(at(day: 1, hour: 9))) < 1e-12)
    }

    @Test func theCafePickedOnWeekdayMorningsWinsThenAndNotOnSaturdayNight() throws {
        // "a" is first by the spatial model; "b" is the café picked on weekday mornings for three
        // weeks, "c" the bar picked on four Saturday nights.
        var picks: [Pick] = []
        for week in 0..<3 {
            for weekday in 0..<5 { picks.append(pick("b", time: at(day: Double(7 * week + weekday), hour: 8))) }
        }
        for week in 0..<4 { picks.append(pick("c", time: at(day: Double(7 * week + 5), hour: 23))) }
        picks.sort { $0.time < $1.time }
        let timed = try PickMemory(picks: picks)
        let placeOnly = try PickMemory(settings: byPlaceOnly, picks: picks)
        let mondayMorning = at(day: 28, hour: 8.25), saturdayNight = at(day: 33, hour: 23)
        #expect(ids(try ranker.rank(fix: fix(), candidates: street, picks: timed, now: mondayMorning)).first == "b")
        #expect(ids(try ranker.rank(fix: fix(), candidates: street, picks: timed, now: saturdayNight)).first == "c")
        // Learning by place alone names the café at both times.
        #expect(ids(try ranker.rank(fix: fix(), candidates: street, picks: placeOnly, now: saturdayNight)).first == "b")
    }

    @Test func aPlacePickedAtRandomHoursCountsByPlaceAndOnePickedAtOneTimeByTime() throws {
        // "b" picked 28 times, at every hour of the day over four weeks; "c" 20 times on weekday mornings.
        let randomHours = (0..<28).map { pick("b", time: at(day: Double($0), hour: Double(($0 * 7) % 24))) }
        let mornings = (0..<28).filter { $0 % 7 < 5 }.map { pick("c", time: at(day: Double($0), hour: 8)) }
        let picks = (randomHours + mornings).sorted { $0.time < $1.time }
        let now = at(day: 28, hour: 20)
        func weights(_ settings: LearningSettings) throws -> [String: Double] {
            let memory = try PickMemory(settings: settings, picks: picks)
            return memory.nearby(centre, within: 50, now: now).reduce(into: [:]) {
                $0[memory.placeID($1.place), default: 0] += $1.weight
            }
        }
        let concentrated = try weights(.standard)
        let placeOnly = try weights(byPlaceOnly)
        var timeOnly = LearningSettings.standard
        timeOnly.timeConcentration = 0
        let byTime = try weights(timeOnly)
        // On a Monday evening: "b" counts about as by place alone, where time alone would count it far less.
        #expect(abs(concentrated["b"]! - placeOnly["b"]!) < 0.1 * placeOnly["b"]!)
        #expect(byTime["b"]! < 0.5 * placeOnly["b"]!)
        // "c" counts as by time alone: little on a Monday evening.
        #expect(abs(concentrated["c"]! - byTime["c"]!) < 1e-9 * byTime["c"]!)
        #expect(concentrated["c"]! < 0.1 * placeOnly["c"]!)
    }

    @Test func aFloorOfOneIsLearningByPlaceAlone() throws {
        let picks = (0..<40).map { pick($0 % 3 == 0 ? "c" : "b", time: start + Double($0) * 7_919) }
        let memory = try PickMemory(settings: byPlaceOnly, picks: picks)
        #expect(memory.entries.allSatisfy { $0.quarters.isEmpty })
        let now = start + 40 * 7_919
        let total = memory.nearby(centre, within: 50, now: now).reduce(0) { $0 + $1.weight }
        let expected = picks.reduce(0) { $0 + exp2(($1.time - now) / byPlaceOnly.halfLife) }
        #expect(abs(total - expected) < 1e-9)
    }

    @Test func theTimeOfWeekIsTheDevicesLocalTime() throws {
        let helsinki = TimeZoneRules(fixedOffset: 7_200)
        let memory = try PickMemory(timeZone: helsinki)
        // Monday 00:00 UTC is 02:00 in Helsinki: quarter hour 8 of the week; Sunday 23:00 UTC is Monday 01:00.
        #expect(memory.quarterOfWeek(start) == 8)
        #expect(memory.quarterOfWeek(start - 3_600) == 4)
        #expect(try PickMemory().quarterOfWeek(start - 3_600) == 671 - 3)
        // A pick at 06:00 UTC counts fully at 08:00 local the next day, not at 08:00 UTC.
        let local = try PickMemory(timeZone: helsinki, picks: [pick("b", time: at(day: 0, hour: 6))])
        let sameLocal = local.nearby(centre, within: 50, now: at(day: 1, hour: 6))[0].weight
        let sameUTCLabel = local.nearby(centre, within: 50, now: at(day: 1, hour: 8))[0].weight
        #expect(sameLocal > sameUTCLabel)
    }

    @Test func nightsBelongToTheDayTheyBegan() {
        // Quarter hours from Monday 00:00; days begin at 04:00.
        let saturday = 5 * 96
        #expect(!LearningSettings.isWeekend(quarter: saturday + 15), "Saturday 03:45 is Friday night")
        #expect(LearningSettings.isWeekend(quarter: saturday + 16), "Saturday 04:00")
        #expect(LearningSettings.isWeekend(quarter: 15), "Monday 03:45 is Sunday night")
        #expect(!LearningSettings.isWeekend(quarter: 16), "Monday 04:00")
        #expect(LearningSettings.quartersApart(2, 671) == 3)
        #expect(LearningSettings.quartersApart(0, 48) == 48 && LearningSettings.quartersApart(0, 60) == 36)
    }

    @Test func aKioskPickedAtEveryHourKeepsOneEntryPerPlace() throws {
        let picks = (0..<3_000).map { pick($0 % 2 == 0 ? "b" : "c", time: start + Double($0) * 1_000) }
        let memory = try PickMemory(picks: picks)
        #expect(memory.entries.count == 2)
        #expect(memory.entries.allSatisfy { $0.quarters.count <= 672 })
        let ranking = try ranker.rank(fix: fix(), candidates: street, picks: memory, now: start + 3_000_000)
        #expect(Set(ids(ranking).prefix(2)) == ["b", "c"])
    }
}
