// placed-bench learn: does the ranker learn where a place is from the picks made there?
//
// Four parts, each ranking through `Ranker.rank(fix:candidates:picks:now:limit:)`, the call the daemon
// makes for every move, visit and what-if Rank, with candidates from the same kind of spatial query:
//   picks-to-first  at seeded spots, a place ranked 2 to 5 picked again and again at the spot: picks
//                   until it is first; and rankings at spots more than 150 m from every pick unchanged.
//   routine         a month of people with regular places and one-off visits, picking the true place
//                   when it is listed: top 1 with learning beside the spatial model alone.
//   calibration     the snap benchmark's visits as one stream with picks: reliability of the top-1
//                   likelihood, with learning beside without.
//   time            ranking time per fix with 10,000 past selections.
#if canImport(Glibc)
    import Glibc
#endif
import PlacedCore
import PlacedOSM
import PlacedStore
import PlacedTestSupport

func learnBenchmark(_ arguments: [String]) throws {
    if arguments.contains("--help") || arguments.contains("-h") {
        print(LearnOptions.usageText)
        return
    }
    let options = try LearnOptions(arguments)
    let places = try OSM.readPlaces(path: options.path)
    guard !places.isEmpty else { throw BenchmarkFailure("no places in \(options.path)") }
    let file = try BenchCatalog(places, name: "learn")
    let world = LearnWorld(
        places: places, catalog: file.catalog, ranker: try Ranker(model: options.model), settings: options.settings)
    print(
        "learn: \(places.count) places from \(options.path); seed \(options.seed)"
            + (options.seed == SnapOptions.tuningSeed
                ? " (the tuning seed)" : " (held out: tuned on seed \(SnapOptions.tuningSeed))"))
    print(
        "learning: strength \(options.settings.strength.formatted(decimals: 2)), half-life "
            + "\((options.settings.halfLife / 86_400).formatted(decimals: 0)) days, neighbourhood "
            + "max(\(options.settings.minimumNeighbourhood.formatted(decimals: 0)) m, "
            + "\(options.settings.neighbourhoodPerRadius95.formatted(decimals: 0)) x 95 % radius) <= "
            + "\(options.settings.maximumNeighbourhood.formatted(decimals: 0)) m, nearest "
            + "\(options.settings.maximumNeighbours), kernel scale \(options.settings.kernelScale.formatted(decimals: 2)); "
            + "global count prior exponent \(options.model.selectionExponent.formatted(decimals: 2))")
    var failures: [String] = []
    if options.runs("picks") { failures += try picksToFirst(world, options) }
    if options.runs("routine") { try routine(world, options) }
    if options.runs("calibration") { try calibration(world, options) }
    if options.runs("time") { try learnedRankingTime(world, options) }
    if !failures.isEmpty { throw BenchmarkFailure(failures.joined(separator: "; ")) }
}

struct LearnWorld {
    let places: [Place]
    /// The places file, read as the daemon reads it.
    let catalog: PlaceCatalog
    let ranker: Ranker
    let settings: LearningSettings

    /// The daemon's ranking (`PlaceCatalog.rank`): candidates within R, then the spatial model and the
    /// picks near the fix. With the old global count prior (for comparison) the same steps by hand.
    func rank(_ fix: Fix, _ picks: Picks, now: Double, limit: Int = Ranker.defaultLimit) throws -> Ranking {
        guard picks.counts.isEmpty else {
            return try rank(fix, candidates: candidates(for: fix), picks, now: now, limit: limit)
        }
        return try catalog.rank(fix, with: ranker, picks: picks.memory, now: now, limit: limit)
    }

    func candidates(for fix: Fix) throws -> [Place] {
        try catalog.candidates(within: ranker.searchRadius(for: fix), of: fix.coordinate)
    }

    func candidates(within radius: Double, of centre: Coordinate) throws -> [Place] {
        try catalog.candidates(within: radius, of: centre)
    }

    func rank(_ fix: Fix, candidates: [Place], _ picks: Picks, now: Double, limit: Int = Ranker.defaultLimit) throws
        -> Ranking
    {
        try ranker.rank(
            fix: fix, candidates: candidates, selectionCounts: picks.counts, picks: picks.memory, now: now, limit: limit
        )
    }

    func spatial(_ fix: Fix, limit: Int = Ranker.defaultLimit) throws -> Ranking {
        try ranker.rank(fix: fix, candidates: candidates(for: fix), limit: limit)
    }
}

/// What the daemon keeps of past selections: the pick memory, and the per-place counts of the global prior.
struct Picks {
    var memory: PickMemory
    var counts: [String: Int] = [:]

    init(_ settings: LearningSettings, _ picks: [Pick] = []) throws {
        memory = try PickMemory(settings: settings, picks: picks)
        for pick in picks { counts[pick.placeID, default: 0] += 1 }
    }

    mutating func append(_ pick: Pick) {
        memory.append(pick)
        counts[pick.placeID, default: 0] += 1
    }
}

/// A fixed, arbitrary start of the simulated calendars: Monday 2026-01-05 00:00 UTC.
private let epoch = 1_767_571_200.0
private let day = 86_400.0

// MARK: - Picks to first

/// Returns the goals missed.
private func picksToFirst(_ world: LearnWorld, _ options: LearnOptions) throws -> [String] {
    let spotCount = 200, maximumPicks = 30, accuracy = 15.0
    let sigma = Fix.sigma(fromRadius95: accuracy)
    // What the daemon shipped before: a global count prior (1 + n)^0.7, nothing learned by place.
    let global = try Ranker(model: RankingModel(selectionExponent: 0.7))
    let sampler = VisitSampler(places: world.places, mix: .byKind)
    var rng = SplitMix64(seed: options.seed &* 0x9E37_79B9 &+ 0x5107)
    var spots: [(fix: Fix, ranking: Ranking)] = []
    while spots.count < spotCount {
        let fix = sampler.next(&rng).fix(sigma: sigma, &rng)
        let ranking = try world.spatial(fix)
        if ranking.places.count >= 2 { spots.append((fix, ranking)) }
    }

    // picks[rank - 2][n]: (spot, place) pairs first after n picks (n = maximumPicks + 1: never).
    var learned = [[Int]](repeating: [Int](repeating: 0, count: maximumPicks + 2), count: 4)
    var before = learned
    var worstBySpot: [Int] = []
    var probes = 0, changed = 0, probeFailures: [String] = []
    let probeAccuracies = [5.0, 15, 30, 60, 120, 250]
    for spot in spots {
        var worst = 0
        let candidates = try world.candidates(for: spot.fix)
        for rank in 2...min(5, spot.ranking.places.count) {
            let target = spot.ranking.places[rank - 1].place.id
            var picks = try Picks(world.settings)
            var needed = maximumPicks + 1
            for n in 1...maximumPicks {
                let time = epoch + Double(n) * day
                picks.append(
                    Pick(placeID: target, coordinate: spot.fix.coordinate, accuracy: spot.fix.accuracy, time: time))
                let ranking = try world.rank(spot.fix, candidates: candidates, picks, now: time + 3_600)
                if ranking.places.first?.place.id == target {
                    needed = n
                    break
                }
            }
            learned[rank - 2][needed] += 1
            worst = max(worst, needed)

            var globalNeeded = maximumPicks + 1
            for n in 1...maximumPicks {
                let ranking = try global.rank(fix: spot.fix, candidates: candidates, selectionCounts: [target: n])
                if ranking.places.first?.place.id == target {
                    globalNeeded = n
                    break
                }
            }
            before[rank - 2][globalNeeded] += 1

            // Farther than 150 m from the spot (the one place picked at), by the geodesic, the ranking is
            // the spatial model's to the bit, whatever the probe's accuracy.
            for _ in 0..<3 {
                let distance = rng.uniform(in: 150.5...450)
                let bearing = rng.uniform(in: 0...(2 * .pi))
                let at = LocalProjection(origin: spot.fix.coordinate).coordinate(
                    east: distance * sin(bearing), north: distance * cos(bearing))
                guard Geodesy.distance(at, spot.fix.coordinate) > 150 else { continue }
                let radius95 = probeAccuracies[Int(rng.next() % UInt64(probeAccuracies.count))]
                let probe = Fix(coordinate: at, accuracy: Fix.sigma(fromRadius95: radius95), speed: 0)
                let with = try world.rank(probe, picks, now: epoch + 40 * day, limit: Ranker.maximumLimit)
                let without = try world.spatial(probe, limit: Ranker.maximumLimit)
                probes += 1
                if with.places != without.places || with.noneLikelihood != without.noneLikelihood || with.evidence != 0
                {
                    changed += 1
                    if probeFailures.count < 3 { probeFailures.append("\(at) ±\(radius95) m") }
                }
            }
        }
        worstBySpot.append(worst)
    }

    print("\npicks to first: \(spotCount) spots (visits by kind, accuracy \(Int(accuracy)) m as a 95 % radius),")
    print("each place ranked 2 to 5 there picked at the spot once a day until it ranks first (at most \(maximumPicks))")
    print(
        "rank  pairs   learned: 1 pick  2 picks  3-5   6-30  never   global prior (1+n)^0.7: 1 pick  2 picks  3-5  6-30  never"
    )
    func buckets(_ counts: [Int]) -> [Int] {
        [
            counts[1], counts[2], counts[3...5].reduce(0, +), counts[6...maximumPicks].reduce(0, +),
            counts[maximumPicks + 1],
        ]
    }
    for rank in 2...5 {
        let pairs = learned[rank - 2].reduce(0, +)
        let l = buckets(learned[rank - 2]), g = buckets(before[rank - 2])
        print(
            "\(pad("\(rank)", 6))\(pad("\(pairs)", 8))        \(l.map { pad("\($0)", 8) }.joined())"
                + "                        \(g.map { pad("\($0)", 7) }.joined())")
    }
    let pairs = learned.reduce(0) { $0 + $1.reduce(0, +) }
    let pairsOne = learned.reduce(0) { $0 + $1[1] }, pairsTwo = learned.reduce(0) { $0 + $1[1] + $1[2] }
    print(
        "(spot, place) pairs first after <= 2 picks: \((Double(pairsTwo) / Double(pairs)).formatted(decimals: 3)), "
            + "after 1 pick: \((Double(pairsOne) / Double(pairs)).formatted(decimals: 3))")
    let withinOne = worstBySpot.filter { $0 <= 1 }.count, withinTwo = worstBySpot.filter { $0 <= 2 }.count
    let share1 = Double(withinOne) / Double(spotCount), share2 = Double(withinTwo) / Double(spotCount)
    print(
        "spots where every place ranked 2-5 is first after <= 2 picks: \(share2.formatted(decimals: 3)) (goal >= 0.95)")
    print(
        "spots where every place ranked 2-5 is first after <= 1 pick: \(share1.formatted(decimals: 3)) (goal >= 0.80)")
    print(
        "rankings more than 150 m from every pick: \(probes) probes (accuracy 5-250 m), changed \(changed) (goal 0)")
    var missed: [String] = []
    if changed > 0 {
        missed.append("\(changed) rankings beyond 150 m changed: \(probeFailures.joined(separator: ", "))")
    }
    return missed
}

// MARK: - Routine

/// A person's month: regular places visited on most weeks, one-off visits in between.
private func routine(_ world: LearnWorld, _ options: LearnOptions) throws {
    let global = try Ranker(model: RankingModel(selectionExponent: 0.7))
    let sampler = VisitSampler(places: world.places, mix: .byKind)
    var rng = SplitMix64(seed: options.seed &* 0x2545_F491 &+ 0x4F6C)
    var scores = RoutineScores()
    var reliability = Reliability()
    for _ in 0..<options.persons {
        let regularCount = 5 + Int(rng.next() % 4)
        var regular: [(place: Int, perDay: Double)] = []
        var visited = Set<Int>()
        while regular.count < regularCount {
            let place = sampler.next(&rng).place
            guard visited.insert(place).inserted else { continue }
            regular.append((place, rng.uniform(in: 1...6) / 7))
        }
        var picks = try Picks(world.settings)
        var counts: [String: Int] = [:]
        for dayIndex in 0..<30 {
            var today: [(place: Int, regular: Bool)] = []
            for r in regular where rng.uniform(in: 0...1) < r.perDay { today.append((r.place, true)) }
            for _ in 0..<Int(rng.next() % 4) {  // 0 to 3 one-off visits a day, half of them near a regular place
                if let place = try oneOff(
                    near: rng.next() % 2 == 0 ? regular.map(\.place) : nil, world, sampler, &visited, &rng)
                {
                    today.append((place, false))
                }
            }
            today.shuffle(using: &rng)
            let hours = (0..<today.count).map { _ in rng.uniform(in: 7...22) }.sorted()
            for (visit, hour) in zip(today, hours) {
                let time = epoch + Double(dayIndex) * day + hour * 3_600
                let truth = world.places[visit.place].id
                let position = sampler.position(inside: world.places[visit.place], &rng)
                let radius95 = rng.uniform(in: 8...25)
                let sigma = Fix.sigma(fromRadius95: radius95)
                let noisy = LocalProjection(origin: position).coordinate(
                    east: sigma * rng.gaussian(), north: sigma * rng.gaussian())
                let fix = Fix(coordinate: noisy, accuracy: sigma, speed: 0)
                let candidates = try world.candidates(for: fix)
                let learned = try world.rank(fix, candidates: candidates, picks, now: time)
                let spatial = try world.ranker.rank(fix: fix, candidates: candidates)
                let before = try global.rank(fix: fix, candidates: candidates, selectionCounts: counts)
                let nearRegular = regular.contains {
                    Geodesy.distance(world.places[$0.place].coordinate, world.places[visit.place].coordinate) <= 30
                }
                let group = visit.regular ? (dayIndex >= 6 ? 0 : 1) : (nearRegular ? 3 : 2)
                scores.score(group, learned: learned, spatial: spatial, global: before, truth: truth)
                reliability.add(learned, truth: truth)
                if learned.places.contains(where: { $0.place.id == truth }) {
                    picks.append(Pick(placeID: truth, coordinate: fix.coordinate, accuracy: fix.accuracy, time: time))
                }
                if before.places.contains(where: { $0.place.id == truth }) { counts[truth, default: 0] += 1 }
            }
        }
    }
    print("\nroutine: \(options.persons) people, a month each: 5-8 regular places (1-6 visits a week each) and 0-3")
    print("one-off visits a day (half within 400 m of a regular place); accuracy 8-25 m (95 % radius) per visit;")
    print("a person picks the true place when it is listed (top 5). Top-1 rate:")
    print("visits                       count   learned   spatial only   global prior (1+n)^0.7")
    var oneOffs = scores.groups[2]
    for part in [\RoutineScores.Group.count, \.learned, \.spatial, \.global, \.gained, \.lost] {
        oneOffs[keyPath: part] += scores.groups[3][keyPath: part]
    }
    let rows = [
        ("regular places, day 7 on", scores.groups[0]), ("regular places, days 1-6", scores.groups[1]),
        ("one-off visits", oneOffs), ("  > 30 m from regular places", scores.groups[2]),
        ("  <= 30 m from one", scores.groups[3]),
    ]
    for (name, s) in rows {
        print(
            "\(name.padding(28))\(pad("\(s.count)", 6))\(pad(s.rate(s.learned), 10))\(pad(s.rate(s.spatial), 15))"
                + "\(pad(s.rate(s.global), 12))")
    }
    let regularLate = scores.groups[0]
    print(
        "goal: regular places from day 7 top-1 \(regularLate.rate(regularLate.learned)) (goal >= 0.9); one-off "
            + "\(oneOffs.rate(oneOffs.learned)) vs \(oneOffs.rate(oneOffs.spatial)) without learning (goal: no worse)")
    print(
        "one-off visits where learning changed the top place: better \(oneOffs.gained), worse \(oneOffs.lost) "
            + "(of those > 30 m from every regular place: better \(scores.groups[2].gained), worse \(scores.groups[2].lost))"
    )
    print(
        "routine calibration with learning: ECE top-1 \(reliability.topExpectedError.formatted(decimals: 4)); "
            + "reliability (bin: visits, likelihood, hit rate): "
            + reliability.top.enumerated().map {
                "\($0.offset): \($0.element.count) \($0.element.meanLikelihood) \($0.element.hitRate)"
            }
            .joined(separator: ", "))
}

/// A place the person has not been to: near one of `around` (within 400 m) when given, else anywhere.
private func oneOff(
    near around: [Int]?, _ world: LearnWorld, _ sampler: VisitSampler, _ visited: inout Set<Int>,
    _ rng: inout SplitMix64
) throws -> Int? {
    for _ in 0..<50 {
        let place: Int
        if let around {
            let centre = world.places[around[Int(rng.next() % UInt64(around.count))]].coordinate
            let near = try world.candidates(within: 400, of: centre)
            guard !near.isEmpty else { continue }
            let chosen = near[Int(rng.next() % UInt64(near.count))]
            guard let index = world.places.firstIndex(where: { $0.id == chosen.id }) else { continue }
            place = index
        } else {
            place = sampler.next(&rng).place
        }
        if visited.insert(place).inserted { return place }
    }
    return nil
}

private struct RoutineScores {
    struct Group {
        var count = 0, learned = 0, spatial = 0, global = 0, gained = 0, lost = 0

        func rate(_ hits: Int) -> String { (count > 0 ? Double(hits) / Double(count) : 0).formatted(decimals: 3) }
    }
    /// Regular places from day 7, regular places before, one-offs farther than 30 m from every regular
    /// place, one-offs within 30 m of one.
    var groups = [Group](repeating: Group(), count: 4)

    mutating func score(_ group: Int, learned: Ranking, spatial: Ranking, global: Ranking, truth: String) {
        let l = learned.places.first?.place.id == truth, s = spatial.places.first?.place.id == truth
        groups[group].count += 1
        if l { groups[group].learned += 1 }
        if s { groups[group].spatial += 1 }
        if global.places.first?.place.id == truth { groups[group].global += 1 }
        if l && !s { groups[group].gained += 1 }
        if s && !l { groups[group].lost += 1 }
    }
}

// MARK: - Calibration

/// The snap benchmark's visits (by kind, 15 m) as one stream over a year, picking the true place when
/// listed: is the top-1 likelihood still the top-1 hit rate?
private func calibration(_ world: LearnWorld, _ options: LearnOptions) throws {
    let accuracy = 15.0, sigma = Fix.sigma(fromRadius95: accuracy)
    let sampler = VisitSampler(places: world.places, mix: .byKind)
    var rng = SplitMix64(seed: visitSeed(options.seed, accuracy: accuracy, mix: .byKind))
    var picks = try Picks(world.settings)
    var with = Reliability(), without = Reliability()
    let spacing = 365 * day / Double(options.visits)
    for k in 0..<options.visits {
        let visit = sampler.next(&rng)
        let fix = visit.fix(sigma: sigma, &rng)
        let truth = world.places[visit.place].id
        let time = epoch + Double(k) * spacing
        let candidates = try world.candidates(for: fix)
        let learned = try world.rank(fix, candidates: candidates, picks, now: time)
        with.add(learned, truth: truth)
        without.add(try world.ranker.rank(fix: fix, candidates: candidates), truth: truth)
        if learned.places.contains(where: { $0.place.id == truth }) {
            picks.append(Pick(placeID: truth, coordinate: fix.coordinate, accuracy: fix.accuracy, time: time))
        }
    }
    print(
        "\ncalibration: the snap visits (seed \(options.seed), by kind, \(Int(accuracy)) m) as one stream of "
            + "\(options.visits) over a year, the true place picked when listed (\(picks.memory.count) picks)")
    print("top-1 reliability    learned: visits  likelihood  hit rate      spatial only: visits  likelihood  hit rate")
    for bin in 0..<Reliability.bins {
        let l = with.top[bin], s = without.top[bin]
        print(
            "\(pad("\((Double(bin) / 10).formatted(decimals: 1))-\((Double(bin + 1) / 10).formatted(decimals: 1))", 21))"
                + "\(pad("\(l.count)", 14))\(pad(l.meanLikelihood, 12))\(pad(l.hitRate, 10))"
                + "\(pad("\(s.count)", 22))\(pad(s.meanLikelihood, 12))\(pad(s.hitRate, 10))")
    }
    print(
        "ECE top-1 with learning \(with.topExpectedError.formatted(decimals: 4)) (goal <= 0.03), without "
            + "\(without.topExpectedError.formatted(decimals: 4)); every listed place with learning "
            + "\(with.listedExpectedError.formatted(decimals: 4)), without \(without.listedExpectedError.formatted(decimals: 4))"
    )
    print(
        "top-1 hit rate with learning \(with.hitRate.formatted(decimals: 3)), without \(without.hitRate.formatted(decimals: 3)); "
            + "mean top-1 likelihood \(with.meanTop.formatted(decimals: 3)) / \(without.meanTop.formatted(decimals: 3))"
    )
}

/// Reliability bins of the top-1 likelihood (and of every listed place's) against the hit rate.
struct Reliability {
    static let bins = 10
    struct Bin {
        var count = 0
        var likelihood = 0.0
        var hits = 0
        var meanLikelihood: String { (count > 0 ? likelihood / Double(count) : 0).formatted(decimals: 3) }
        var hitRate: String { (count > 0 ? Double(hits) / Double(count) : 0).formatted(decimals: 3) }
    }
    var top = [Bin](repeating: Bin(), count: bins)
    var listed = [Bin](repeating: Bin(), count: bins)

    mutating func add(_ ranking: Ranking, truth: String) {
        for (index, ranked) in ranking.places.enumerated() {
            let bin = min(Self.bins - 1, Int(ranked.likelihood * Double(Self.bins)))
            let hit = ranked.place.id == truth ? 1 : 0
            listed[bin].count += 1
            listed[bin].likelihood += ranked.likelihood
            listed[bin].hits += hit
            if index == 0 {
                top[bin].count += 1
                top[bin].likelihood += ranked.likelihood
                top[bin].hits += hit
            }
        }
    }

    static func expectedError(_ bins: [Bin]) -> Double {
        let total = bins.reduce(0) { $0 + $1.count }
        guard total > 0 else { return 0 }
        return bins.reduce(0.0) { sum, bin in
            guard bin.count > 0 else { return sum }
            return sum + abs(bin.likelihood - Double(bin.hits)) / Double(total)
        }
    }

    var topExpectedError: Double { Self.expectedError(top) }
    var listedExpectedError: Double { Self.expectedError(listed) }
    var hitRate: Double {
        let n = top.reduce(0) { $0 + $1.count }
        return n > 0 ? Double(top.reduce(0) { $0 + $1.hits }) / Double(n) : 0
    }
    var meanTop: Double {
        let n = top.reduce(0) { $0 + $1.count }
        return n > 0 ? top.reduce(0) { $0 + $1.likelihood } / Double(n) : 0
    }
}

// MARK: - Time

/// Time per fix, candidate query included, with 10,000 past selections: spread over the city, made at a
/// person's eight regular places, and all at one kiosk's static position.
private func learnedRankingTime(_ world: LearnWorld, _ options: LearnOptions) throws {
    let selections = 10_000, accuracy = 15.0, sigma = Fix.sigma(fromRadius95: accuracy)
    let sampler = VisitSampler(places: world.places, mix: .byKind)
    var rng = SplitMix64(seed: options.seed &+ 0x71AE)
    let now = epoch + 300 * day

    // Over the city: visits by kind, each picked.
    var cityPicks: [Pick] = []
    var cityFixes: [Fix] = []
    for k in 0..<selections {
        let visit = sampler.next(&rng)
        let fix = visit.fix(sigma: sigma, &rng)
        cityPicks.append(
            Pick(
                placeID: world.places[visit.place].id, coordinate: fix.coordinate, accuracy: sigma,
                time: epoch + Double(k) * 2_000))
    }
    for _ in 0..<options.timedFixes { cityFixes.append(sampler.next(&rng).fix(sigma: sigma, &rng)) }

    // A person's regular places: 8 places, every selection made at a fresh noisy fix there.
    let regular = (0..<8).map { _ in sampler.next(&rng) }
    var personPicks: [Pick] = []
    for k in 0..<selections {
        let visit = regular[k % regular.count]
        let fix = visit.fix(sigma: sigma, &rng)
        personPicks.append(
            Pick(
                placeID: world.places[visit.place].id, coordinate: fix.coordinate, accuracy: sigma,
                time: epoch + Double(k) * 2_000))
    }
    let personFixes = (0..<options.timedFixes).map { k in regular[k % regular.count].fix(sigma: sigma, &rng) }

    // A kiosk: one static position, every selection one of the places listed there.
    let kiosk = Fix(coordinate: regular[0].position, accuracy: sigma)
    let listed = try world.spatial(kiosk, limit: Ranker.maximumLimit).places.map(\.place.id)
    let kioskPicks = (0..<selections).map { k in
        Pick(
            placeID: listed[Int(rng.next() % UInt64(listed.count))], coordinate: kiosk.coordinate, accuracy: sigma,
            time: epoch + Double(k) * 2_000)
    }
    let kioskFixes = [Fix](repeating: kiosk, count: options.timedFixes)

    print(
        "\nranking time per fix with \(selections.grouped) past selections (candidate query + rank, limit 5), \(options.timedFixes) fixes, accuracy \(Int(accuracy)) m"
    )
    print(
        "selections made              fixes at            build ms  picks near  p50 us  p99 us   no picks: p50 us  p99 us"
    )
    for (name, fixesName, picks, fixes) in [
        ("over the city, by kind", "visits by kind", cityPicks, cityFixes),
        ("at 8 regular places", "the regular places", personPicks, personFixes),
        ("at one kiosk position", "the kiosk", kioskPicks, kioskFixes),
    ] {
        let start = BenchClock.now()
        let remembered = try Picks(world.settings, picks)
        let build = BenchClock.seconds(since: start) * 1000
        let empty = try Picks(world.settings)
        var evidence = 0.0
        // Rounds alternate with and without, the best of three kept: the machine is shared.
        var with = Percentiles([Double.infinity]), without = with
        for _ in 0..<3 {
            let w = try time(fixes) { try world.rank($0, remembered, now: now) }
            let o = try time(fixes) { try world.rank($0, empty, now: now) }
            if w.p50 < with.p50 { with = w }
            if o.p50 < without.p50 { without = o }
        }
        for fix in fixes.prefix(1000) {
            evidence += Double(
                remembered.memory.nearby(fix.coordinate, within: world.settings.neighbourhood(sigma: sigma), now: now)
                    .count)
        }
        print(
            "\(name.padding(30))\(fixesName.padding(20))\(pad(build.formatted(decimals: 1), 8))"
                + "\(pad((evidence / Double(min(1000, fixes.count))).formatted(decimals: 1), 12))"
                + "\(pad(with.p50.formatted(decimals: 1), 8))\(pad(with.p99.formatted(decimals: 1), 8))"
                + "\(pad(without.p50.formatted(decimals: 1), 19))\(pad(without.p99.formatted(decimals: 1), 8))")
    }
}

private func time(_ fixes: [Fix], _ body: (Fix) throws -> Ranking) throws -> Percentiles {
    var microseconds: [Double] = []
    microseconds.reserveCapacity(fixes.count)
    var listed = 0
    for fix in fixes {
        let start = BenchClock.now()
        let ranking = try body(fix)
        microseconds.append(BenchClock.microseconds(since: start))
        listed += ranking.places.count
    }
    precondition(listed > 0, "nothing ranked")
    return Percentiles(microseconds)
}

// MARK: - Options

struct LearnOptions {
    var path = helsinkiExtractPath()
    var seed: UInt64 = 2
    var persons = 300
    var visits = 20_000
    var timedFixes = 20_000
    var settings = LearningSettings.standard
    var model = RankingModel.standard
    var parts: Set<String> = []

    func runs(_ part: String) -> Bool { parts.isEmpty || parts.contains(part) }

    static let usageText = """
        usage: placed-bench learn [--places FILE.osm.pbf] [--seed N] [--persons N] [--visits N] [--only PART]
                                  [--strength A] [--kernel-scale K] [--half-life DAYS] [--ladder-steps N]
                                  [--ladder-belief P] [--global-exponent B] [--time-floor F]
                                  [--time-width H] [--time-peak P] [--other-day-kind W]
                                  [--time-concentration K]
          --places    the extract (default: the bundled data/helsinki-center.osm.pbf)
          --seed      random seed (default 2, held out; learning was tuned on 1)
          --persons   people simulated by the routine part (default 300)
          --visits    visits of the calibration stream, and fixes timed (default 20000)
          --only      picks, routine, calibration or time (repeatable; default all)
          --strength ... --other-day-kind: override a learning setting or the global count prior, for tuning
                      (--time-floor 1: learning by place only, as before time-of-week weighting)
        """

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw BenchmarkUsage("\(flag) needs a value\n\(Self.usageText)") }
            func number() throws -> Double {
                guard let n = Double(value), n.isFinite else { throw BenchmarkUsage("\(flag) takes a number") }
                return n
            }
            func count() throws -> Int {
                guard let n = Int(value), n > 0 else { throw BenchmarkUsage("\(flag) takes a number > 0") }
                return n
            }
            switch flag {
            case "--places": path = value
            case "--seed":
                guard let n = UInt64(value) else { throw BenchmarkUsage("--seed takes a whole number") }
                seed = n
            case "--persons": persons = try count()
            case "--visits":
                visits = try count()
                timedFixes = visits
            case "--only": parts.insert(value)
            case "--strength": settings.strength = try number()
            case "--kernel-scale": settings.kernelScale = try number()
            case "--half-life": settings.halfLife = try number() * day
            case "--global-exponent": model.selectionExponent = try number()
            case "--ladder-steps": settings.ladderSteps = Int(try number())
            case "--ladder-belief": settings.ladderBelief = try number()
            case "--neighbours": settings.maximumNeighbours = try count()
            case "--minimum-neighbourhood": settings.minimumNeighbourhood = try number()
            case "--time-floor": settings.timeFloor = try number()
            case "--time-width": settings.timeOfDayWidth = try number()
            case "--time-peak": settings.timePeak = try number()
            case "--time-concentration": settings.timeConcentration = try number()
            case "--other-day-kind": settings.otherDayKindWeight = try number()
            default: throw BenchmarkUsage("unknown option \(flag)\n\(Self.usageText)")
            }
        }
        if let problem = settings.problem { throw BenchmarkUsage(problem) }
    }
}

private func pad(_ s: String, _ width: Int) -> String { BenchFormat.pad(s, width) }
