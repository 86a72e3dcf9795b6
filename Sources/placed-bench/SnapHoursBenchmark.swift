// placed-bench snap --hours: does knowing which places are closed put the place a device is at on top?
//
// The snap visits (by kind, 15 m read as a 95 % radius), with opening hours given to part of the places
// (a few real Helsinki values by kind) and each visit at a time of week: while the true place is open,
// except for a share of visits at any time (stale hours, staff, a look at the door). Each visit is
// ranked with the caller's open/closed states and the closed factor c, and without (c = 1); a sweep of c
// shows what the default was chosen from (the best mean log likelihood of the true place on seed 1).
#if canImport(Glibc)
    import Glibc
#endif
import PlacedCore
import PlacedOSM
import PlacedStore
import PlacedTestSupport

/// Real `opening_hours` values of the Helsinki extract's common shapes, by the kind of place they go with.
enum HoursSample {
    static func values(forKind kind: String) -> [String] {
        switch kind {
        case "amenity=cafe", "shop=bakery":
            ["Mo-Fr 07:30-18:00; Sa 09:00-17:00", "Mo-Fr 08:00-20:00; Sa-Su 10:00-18:00", "Mo-Fr 07:00-15:00"]
        case "amenity=restaurant", "amenity=fast_food", "amenity=ice_cream", "amenity=food_court":
            [
                "Mo-Su 11:00-22:00", "Mo-Fr 10:30-21:00; Sa 12:00-22:00",
                "Mo-Th 11:00-22:00; Fr-Sa 11:00-23:00; Su 12:00-21:00",
            ]
        case "amenity=bar", "amenity=pub", "amenity=nightclub", "amenity=biergarten":
            ["Mo-Th 16:00-01:00; Fr-Sa 14:00-03:00; Su 14:00-24:00", "Tu-Sa 18:00-02:00", "Mo-Su 12:00-02:00"]
        case "shop=supermarket": ["Mo-Sa 07:00-23:00; Su 10:00-22:00", "Mo-Su 07:00-22:00"]
        case "shop=convenience", "amenity=fuel": ["24/7", "Mo-Su 07:00-23:00"]
        case "amenity=pharmacy", "amenity=bank", "amenity=post_office", "amenity=library":
            ["Mo-Fr 09:00-17:00", "Mo-Fr 08:00-18:00; Sa 10:00-16:00", "Mo-Fr 10:00-18:00; Sa 10:00-15:00"]
        case "leisure=fitness_centre", "leisure=sports_centre": ["Mo-Fr 06:00-22:00; Sa-Su 08:00-20:00", "24/7"]
        default:
            if kind.hasPrefix("shop=") {
                [
                    "Mo-Fr 10:00-18:00; Sa 10:00-16:00", "Mo-Fr 08:00-18:00; Sa 10:00-16:00",
                    "Mo-Fr 11:00-19:00; Sa 11:00-17:00",
                ]
            } else if kind.hasPrefix("office=") {
                ["Mo-Fr 08:00-16:00", "Mo-Fr 09:00-17:00"]
            } else {
                []
            }
        }
    }
}

/// Opening hours given to part of the places, and when each is open in a simulated week.
struct HoursWorld {
    /// Monday 2026-01-05 00:00 in Helsinki's winter time (UTC+2), the start of the simulated week.
    static let weekStart = 1_767_564_000.0
    static let timeZone = TimeZoneRules(fixedOffset: 7_200)
    let context = OpeningHoursContext(coordinate: nil, timeZone: HoursWorld.timeZone)
    /// By index in `places`.
    let hours: [OpeningHours?]
    /// By the catalog's place number.
    let hoursByNumber: [OpeningHours?]

    /// Each place of a kind that usually has hours gets one of its kind's values with probability `share`.
    init(places: [Place], catalog: PlaceCatalog, share: Double, seed: UInt64) throws {
        var rng = SplitMix64(seed: seed &* 0x51A7 &+ 0x0405)
        var hours: [OpeningHours?] = []
        for place in places {
            let values = HoursSample.values(forKind: place.kind)
            guard !values.isEmpty, rng.uniform(in: 0...1) < share else {
                hours.append(nil)
                continue
            }
            hours.append(try OpeningHours(parsing: values[Int(rng.next() % UInt64(values.count))]))
        }
        self.hours = hours
        var index: [String: Int] = [:]
        for (i, place) in places.enumerated() { index[place.id] = i }
        hoursByNumber = try (0..<catalog.count).map { number in
            try index[catalog.placeSet.place(at: number).id].flatMap { hours[$0] }
        }
    }

    func state(_ hours: OpeningHours?, at time: Double) -> OpenState {
        guard let hours else { return .unknown }
        return hours.state(at: Self.timeZone.localTime(at: Int(time)), in: context)
    }

    /// A time in the week when people are out (07:00 to 02:00), while `hours` say open when `whileOpen`
    /// and they ever do; else any such time.
    func visitTime(_ hours: OpeningHours?, whileOpen: Bool, _ rng: inout SplitMix64) -> Double {
        func draw() -> Double {
            Self.weekStart + Double(rng.next() % 7) * 86_400 + rng.uniform(in: 7...26) * 3_600
        }
        guard whileOpen, hours != nil else { return draw() }
        for _ in 0..<500 {
            let time = draw()
            if state(hours, at: time) == .open { return time }
        }
        return draw()
    }
}

func snapHoursBenchmark(_ options: SnapOptions) throws {
    let places = try OSM.readPlaces(path: options.path)
    guard !places.isEmpty else { throw SnapError.noPlaces(options.path) }
    let file = try BenchCatalog(places, name: "snap-hours")
    let catalog = file.catalog
    let world = try HoursWorld(places: places, catalog: catalog, share: options.hoursShare, seed: options.seed)
    let withHours = world.hours.filter { $0 != nil }.count
    let accuracy = 15.0, sigma = AccuracyReading.radius95.sigma(forAccuracy: accuracy)
    print(
        "snap with opening hours: \(places.count) places from \(options.path); seed \(options.seed)"
            + (options.seed == SnapOptions.tuningSeed
                ? " (the tuning seed)" : " (held out: tuned on seed \(SnapOptions.tuningSeed))")
            + "; \(options.visits) visits, by kind, accuracy \(Int(accuracy)) m as a 95 % radius")
    print(
        "hours: \(withHours) places (\((Double(withHours) / Double(places.count)).formatted(decimals: 3))) get one of "
            + "a few real values for their kind (\(options.hoursShare.formatted(decimals: 2)) of the kinds that have "
            + "them); visits while the true place is open, \(options.closedVisits.formatted(decimals: 2)) of them "
            + "at any time 07:00-02:00")

    // The visits, their fixes and the open state of every candidate, drawn once for every weight.
    struct Trial {
        var fix: Fix
        var truth: String
        var time: Double
        var truthHasHours: Bool
        var hoursInReach: Bool
    }
    let plain = try Ranker()
    let sampler = VisitSampler(places: places, mix: .byKind)
    var rng = SplitMix64(seed: visitSeed(options.seed, accuracy: accuracy, mix: .byKind) &+ 0x0_4045)
    var indexOfID: [String: Int] = [:]
    for (i, place) in places.enumerated() { indexOfID[place.id] = i }
    var trials: [Trial] = []
    trials.reserveCapacity(options.visits)
    var closedAtVisit = 0
    for _ in 0..<options.visits {
        let visit = sampler.next(&rng)
        let fix = visit.fix(sigma: sigma, &rng)
        let hours = world.hours[visit.place]
        let time = world.visitTime(hours, whileOpen: rng.uniform(in: 0...1) >= options.closedVisits, &rng)
        if world.state(hours, at: time) == .closed { closedAtVisit += 1 }
        // The query's candidates: every place the ranker could weigh, and perhaps a few more.
        let inReach = try catalog.candidates(within: plain.searchRadius(for: fix), of: fix.coordinate).contains {
            indexOfID[$0.id].map { world.hours[$0] != nil } ?? false
        }
        trials.append(
            Trial(
                fix: fix, truth: places[visit.place].id, time: time, truthHasHours: hours != nil,
                hoursInReach: inReach))
    }
    print("visits at a time the true place is closed: \(closedAtVisit)")

    var without: [Ranking] = []
    for trial in trials {
        without.append(
            try catalog.rank(trial.fix, with: plain, picks: PickMemory(), now: 0, limit: Ranker.maximumLimit))
    }
    func score(_ rankings: [Ranking]) -> HoursScores {
        var scores = HoursScores()
        for (trial, ranking) in zip(trials, rankings) {
            scores.add(ranking, trial.truth, trial.truthHasHours, trial.hoursInReach)
        }
        return scores
    }
    let base = score(without)
    print(
        "\nclosed weight c     top1: true place has hours  hours in reach  all     top5 all  ECE top-1  mean log L(true)"
    )
    print(base.row("1 (no factor)"))
    var changedWithoutHours = 0
    var chosen: HoursScores?
    var unchangedTop1 = HitRate(), unchangedTop1Without = HitRate()
    for weight in options.closedWeights {
        let ranker = try Ranker(model: RankingModel(closedWeight: weight))
        var rankings: [Ranking] = []
        for (index, trial) in trials.enumerated() {
            let ranking = try catalog.rank(
                trial.fix, with: ranker, picks: PickMemory(), now: 0,
                openState: { number, _, _ in world.state(world.hoursByNumber[number], at: trial.time) },
                limit: Ranker.maximumLimit)
            rankings.append(ranking)
            if weight == RankingModel.defaultClosedWeight, !trial.hoursInReach {
                if ranking != without[index] { changedWithoutHours += 1 }
                unchangedTop1.score(ranking.places.map(\.place.id), truth: trial.truth)
                unchangedTop1Without.score(without[index].places.map(\.place.id), truth: trial.truth)
            }
        }
        let scores = score(rankings)
        let isDefault = weight == RankingModel.defaultClosedWeight
        print(scores.row(weight.formatted(decimals: 2) + (isDefault ? " (default)" : "")))
        if isDefault { chosen = scores }
    }
    guard let chosen else {
        print("(the default closed weight \(RankingModel.defaultClosedWeight) was not in the sweep)")
        return
    }
    let gain = (chosen.hoursTop1.rate(chosen.hoursTop1.top1) - base.hoursTop1.rate(base.hoursTop1.top1)) * 100
    print(
        "\ngoal: top-1 over visits whose true place has hours \(chosen.hoursTop1.rate(chosen.hoursTop1.top1).formatted(decimals: 3)) "
            + "with the closed weight \(RankingModel.defaultClosedWeight.formatted(decimals: 2)), "
            + "\(base.hoursTop1.rate(base.hoursTop1.top1).formatted(decimals: 3)) without: "
            + "\(gain >= 0 ? "+" : "")\(gain.formatted(decimals: 1)) points (goal >= +3)")
    let reachGain = (chosen.reachTop1.rate(chosen.reachTop1.top1) - base.reachTop1.rate(base.reachTop1.top1)) * 100
    print(
        "goal: top-1 over visits with a place with hours within reach (\(chosen.reachTop1.total) visits) "
            + "\(chosen.reachTop1.rate(chosen.reachTop1.top1).formatted(decimals: 3)) with, "
            + "\(base.reachTop1.rate(base.reachTop1.top1).formatted(decimals: 3)) without: "
            + "\(reachGain >= 0 ? "+" : "")\(reachGain.formatted(decimals: 1)) points (goal >= +3)")
    print(
        "goal: no hours within reach (\(unchangedTop1.total) visits): top-1 \(unchangedTop1.rate(unchangedTop1.top1).formatted(decimals: 3)) "
            + "with, \(unchangedTop1Without.rate(unchangedTop1Without.top1).formatted(decimals: 3)) without; "
            + "rankings not bit-identical \(changedWithoutHours) (goal 0)")
    print(
        "goal: ECE top-1 with the closed weight \(chosen.reliability.topExpectedError.formatted(decimals: 4)) "
            + "(goal <= 0.03), without \(base.reliability.topExpectedError.formatted(decimals: 4))")
    if changedWithoutHours > 0 {
        throw BenchmarkFailure("\(changedWithoutHours) rankings with no hours in reach changed")
    }
}

struct HoursScores {
    var all = HitRate()
    var hoursTop1 = HitRate()
    var reachTop1 = HitRate()
    var reliability = Reliability()
    var logLikelihood = 0.0

    mutating func add(_ ranking: Ranking, _ truth: String, _ truthHasHours: Bool, _ hoursInReach: Bool) {
        let ids = ranking.places.map(\.place.id)
        all.score(ids, truth: truth)
        if truthHasHours { hoursTop1.score(ids, truth: truth) }
        if hoursInReach { reachTop1.score(ids, truth: truth) }
        reliability.add(ranking.limited(to: Ranker.defaultLimit), truth: truth)
        // A true place not listed among 20 counts as 10⁻⁴: rare, and it keeps the mean finite.
        let likelihood = ranking.places.first { $0.place.id == truth }?.likelihood ?? 0
        logLikelihood += log(max(likelihood, 1e-4))
    }

    func row(_ label: String) -> String {
        label.padding(26) + hoursTop1.rate(hoursTop1.top1).formatted(decimals: 3).padding(22)
            + reachTop1.rate(reachTop1.top1).formatted(decimals: 3).padding(10)
            + all.rate(all.top1).formatted(decimals: 3).padding(10)
            + all.rate(all.top5).formatted(decimals: 3).padding(9)
            + reliability.topExpectedError.formatted(decimals: 4).padding(11)
            + (logLikelihood / Double(max(all.total, 1))).formatted(decimals: 4)
    }
}
