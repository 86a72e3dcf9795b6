// placed-bench routine: does learning that knows the time of week put a person's regular place first
// when they go there, without costing the one-off visits?
//
// A month of people, each with regular places at regular times of week (a café on weekday mornings, a
// gym on Tuesday and Thursday evenings, a bar on Saturday nights...), all within a few hundred metres of
// each other, so other regular places and every other place near are competitors; and one-off visits at
// random times, half of them near a regular place. The device picks the true place at every visit. Each
// visit is ranked three ways in the same run: the spatial model alone, learning by place only (the time
// floor 1), and learning that weighs each pick by how close its time of week is to now.
#if canImport(Glibc)
    import Glibc
#endif
import PlacedCore
import PlacedOSM
import PlacedStore
import PlacedTestSupport

/// A kind of regular visit: where (kinds of place), on which days (0 = Monday), when, and how often.
struct RoutineHabit {
    var name: String
    var kinds: [String]
    var days: [Int]
    /// Local hours; past 24 is after midnight of the next day.
    var hours: ClosedRange<Double>
    /// Chance of going on each of those days.
    var chance: Double

    static let all: [RoutineHabit] = [
        RoutineHabit(
            name: "café, weekday mornings", kinds: ["amenity=cafe", "shop=bakery"], days: [0, 1, 2, 3, 4],
            hours: 7.5...9, chance: 0.7),
        RoutineHabit(
            name: "lunch, weekdays", kinds: ["amenity=restaurant", "amenity=fast_food"], days: [0, 1, 2, 3, 4],
            hours: 11.25...13, chance: 0.5),
        RoutineHabit(
            name: "gym, Tue and Thu evenings",
            kinds: [
                "leisure=fitness_centre", "leisure=sports_centre", "leisure=sports_hall", "leisure=fitness_station",
            ],
            days: [1, 3], hours: 17.5...19, chance: 0.9),
        RoutineHabit(
            name: "bar, Saturday nights", kinds: ["amenity=bar", "amenity=pub", "amenity=nightclub"], days: [5],
            hours: 21.5...24.5, chance: 0.8),
        RoutineHabit(
            name: "groceries, evenings", kinds: ["shop=supermarket", "shop=convenience"], days: [0, 1, 2, 3, 4, 5],
            hours: 17...19.5, chance: 0.35),
        RoutineHabit(
            name: "brunch, Sundays", kinds: ["amenity=cafe", "amenity=restaurant"], days: [6], hours: 11...13,
            chance: 0.7),
    ]
}

func routineBenchmark(_ arguments: [String]) throws {
    if arguments.contains("--help") || arguments.contains("-h") {
        print(RoutineOptions.usageText)
        return
    }
    let options = try RoutineOptions(arguments)
    let places = try OSM.readPlaces(path: options.path)
    guard !places.isEmpty else { throw BenchmarkFailure("no places in \(options.path)") }
    let file = try BenchCatalog(places, name: "routine")
    let catalog = file.catalog
    let ranker = try Ranker()
    var placeOnly = options.settings
    placeOnly.timeFloor = 1
    let timeZone = HoursWorld.timeZone
    print(
        "routine: \(places.count) places from \(options.path); seed \(options.seed)"
            + (options.seed == SnapOptions.tuningSeed
                ? " (the tuning seed)" : " (held out: tuned on seed \(SnapOptions.tuningSeed))")
            + "; \(options.persons) people, 30 days each, in UTC+2")
    print(
        "time of week: floor \(options.settings.timeFloor.formatted(decimals: 2)), time-of-day width "
            + "\(options.settings.timeOfDayWidth.formatted(decimals: 2)) h, other kind of day "
            + "\(options.settings.otherDayKindWeight.formatted(decimals: 2)), peak "
            + "\(options.settings.timePeak.formatted(decimals: 2))")

    var byKind: [String: [Int]] = [:]
    for (i, place) in places.enumerated() { byKind[place.kind, default: []].append(i) }
    var indexOfID: [String: Int] = [:]
    for (i, place) in places.enumerated() { indexOfID[place.id] = i }
    let sampler = VisitSampler(places: places, mix: .byKind)
    var rng = SplitMix64(seed: options.seed &* 0x2545_F491 &+ 0x7A3E)
    var scores = RoutineTable()
    var habitScores = [RoutineTable.Row](repeating: .init(), count: RoutineHabit.all.count)
    var reliability = Reliability()

    for _ in 0..<options.persons {
        // Regular places: for each habit (some people skip one or two), a place of its kinds within
        // 300 m of where the person lives their days, 1 km if none is that near.
        let centre = places[sampler.next(&rng).place].coordinate
        var habits: [(habit: Int, place: Int)] = []
        for (h, habit) in RoutineHabit.all.enumerated() where rng.uniform(in: 0...1) < 0.85 {
            for radius in [300.0, 1_000] {
                let near = habit.kinds.flatMap { byKind[$0] ?? [] }.filter {
                    Geodesy.distance(places[$0].coordinate, centre) <= radius && !habits.map(\.place).contains($0)
                }
                if !near.isEmpty {
                    habits.append((h, near[Int(rng.next() % UInt64(near.count))]))
                    break
                }
            }
        }
        var visited = Set(habits.map(\.place))
        var timed = try PickMemory(settings: options.settings, timeZone: timeZone)
        var untimed = try PickMemory(settings: placeOnly, timeZone: timeZone)

        for dayIndex in 0..<30 {
            let weekday = dayIndex % 7
            var today: [(place: Int, habit: Int?, hour: Double)] = []
            for (h, place) in habits {
                let habit = RoutineHabit.all[h]
                if habit.days.contains(weekday), rng.uniform(in: 0...1) < habit.chance {
                    today.append((place, h, rng.uniform(in: habit.hours)))
                }
            }
            for _ in 0..<Int(rng.next() % 4) {  // 0 to 3 one-off visits a day, half near a regular place
                let around = rng.next() % 2 == 0 ? habits.map(\.place) : []
                if let place = try routineOneOff(
                    near: around, places, catalog, indexOfID, sampler, &visited, &rng)
                {
                    today.append((place, nil, rng.uniform(in: 7...26)))
                }
            }
            for visit in today.sorted(by: { $0.hour < $1.hour }) {
                let time = HoursWorld.weekStart + Double(dayIndex) * 86_400 + visit.hour * 3_600
                let truth = places[visit.place].id
                let position = sampler.position(inside: places[visit.place], &rng)
                let sigma = Fix.sigma(fromRadius95: rng.uniform(in: 8...25))
                let noisy = LocalProjection(origin: position).coordinate(
                    east: sigma * rng.gaussian(), north: sigma * rng.gaussian())
                let fix = Fix(coordinate: noisy, accuracy: sigma, speed: 0)
                let candidates = try catalog.candidates(within: ranker.searchRadius(for: fix), of: fix.coordinate)
                let spatial = try ranker.rank(fix: fix, candidates: candidates)
                let byPlace = try ranker.rank(fix: fix, candidates: candidates, picks: untimed, now: time)
                let byTime = try ranker.rank(fix: fix, candidates: candidates, picks: timed, now: time)
                let group: RoutineTable.Group =
                    visit.habit == nil ? .oneOff : (dayIndex >= 6 ? .regularLate : .regularEarly)
                scores.score(group, spatial: spatial, placeOnly: byPlace, timeOfWeek: byTime, truth: truth)
                if let h = visit.habit, dayIndex >= 6 {
                    habitScores[h].add(spatial: spatial, placeOnly: byPlace, timeOfWeek: byTime, truth: truth)
                }
                reliability.add(byTime, truth: truth)
                let pick = Pick(placeID: truth, coordinate: fix.coordinate, accuracy: fix.accuracy, time: time)
                timed.append(pick)
                untimed.append(pick)
            }
        }
    }

    print(
        "\nvisits                          count   spatial only   learned by place   learned by place and time of week")
    for (name, group) in [
        ("regular places, day 7 on", RoutineTable.Group.regularLate),
        ("regular places, days 1-6", .regularEarly), ("one-off visits", .oneOff),
    ] {
        print(scores.rows[group.rawValue].line(name))
    }
    print("\nregular places from day 7, by habit:")
    for (h, habit) in RoutineHabit.all.enumerated() { print(habitScores[h].line("  " + habit.name)) }
    let late = scores.rows[RoutineTable.Group.regularLate.rawValue]
    let oneOff = scores.rows[RoutineTable.Group.oneOff.rawValue]
    let oneOffGap = (oneOff.rate(oneOff.timeOfWeek) - oneOff.rate(oneOff.spatial)) * 100
    let oneOffGapPlace = (oneOff.rate(oneOff.placeOnly) - oneOff.rate(oneOff.spatial)) * 100
    print(
        "\ngoal: regular places from day 7 top-1 \(late.rate(late.timeOfWeek).formatted(decimals: 3)) with the time of "
            + "week (goal >= 0.92), \(late.rate(late.placeOnly).formatted(decimals: 3)) by place only")
    print(
        "goal: one-off visits \(signed(oneOffGap)) points against no learning with the time of week (goal >= -0.5), "
            + "\(signed(oneOffGapPlace)) by place only")
    print(
        "calibration with the time of week: ECE top-1 \(reliability.topExpectedError.formatted(decimals: 4))")
}

private func signed(_ value: Double) -> String { (value >= 0 ? "+" : "") + value.formatted(decimals: 2) }

/// A place the person has not been to: within 400 m of one of `around` when it is not empty, else anywhere.
private func routineOneOff(
    near around: [Int], _ places: [Place], _ catalog: PlaceCatalog, _ indexOfID: [String: Int],
    _ sampler: VisitSampler, _ visited: inout Set<Int>, _ rng: inout SplitMix64
) throws -> Int? {
    for _ in 0..<50 {
        var place = sampler.next(&rng).place
        if !around.isEmpty {
            let centre = places[around[Int(rng.next() % UInt64(around.count))]].coordinate
            let near = try catalog.candidates(within: 400, of: centre)
            guard !near.isEmpty, let index = indexOfID[near[Int(rng.next() % UInt64(near.count))].id] else {
                continue
            }
            place = index
        }
        if visited.insert(place).inserted { return place }
    }
    return nil
}

struct RoutineTable {
    enum Group: Int {
        case regularLate, regularEarly, oneOff
    }

    struct Row {
        var count = 0, spatial = 0, placeOnly = 0, timeOfWeek = 0

        mutating func add(spatial s: Ranking, placeOnly p: Ranking, timeOfWeek t: Ranking, truth: String) {
            count += 1
            if s.places.first?.place.id == truth { spatial += 1 }
            if p.places.first?.place.id == truth { placeOnly += 1 }
            if t.places.first?.place.id == truth { timeOfWeek += 1 }
        }

        func rate(_ hits: Int) -> Double { count > 0 ? Double(hits) / Double(count) : 0 }

        func line(_ name: String) -> String {
            name.padding(32) + "\(count)".padding(8) + rate(spatial).formatted(decimals: 3).padding(15)
                + rate(placeOnly).formatted(decimals: 3).padding(19) + rate(timeOfWeek).formatted(decimals: 3)
        }
    }

    var rows = [Row](repeating: Row(), count: 3)

    mutating func score(_ group: Group, spatial: Ranking, placeOnly: Ranking, timeOfWeek: Ranking, truth: String) {
        rows[group.rawValue].add(spatial: spatial, placeOnly: placeOnly, timeOfWeek: timeOfWeek, truth: truth)
    }
}

struct RoutineOptions {
    var path = helsinkiExtractPath()
    var seed: UInt64 = 2
    var persons = 300
    var settings = LearningSettings.standard

    static let usageText = """
        usage: placed-bench routine [--places FILE.osm.pbf] [--seed N] [--persons N] [--time-floor F]
                                    [--time-width HOURS] [--other-day-kind W] [--time-peak P]
                                    [--time-concentration K]
          --places      the extract (default: the bundled data/helsinki-center.osm.pbf)
          --seed        random seed (default 2, held out; the time-of-week settings were tuned on 1)
          --persons     people simulated (default 300)
          --time-floor ... --time-concentration: override a time-of-week setting, for tuning
        """

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw BenchmarkUsage("\(flag) needs a value\n\(Self.usageText)") }
            func number() throws -> Double {
                guard let n = Double(value), n.isFinite else { throw BenchmarkUsage("\(flag) takes a number") }
                return n
            }
            switch flag {
            case "--places": path = value
            case "--seed":
                guard let n = UInt64(value) else { throw BenchmarkUsage("--seed takes a whole number") }
                seed = n
            case "--persons":
                guard let n = Int(value), n > 0 else { throw BenchmarkUsage("--persons takes a number > 0") }
                persons = n
            case "--time-floor": settings.timeFloor = try number()
            case "--time-width": settings.timeOfDayWidth = try number()
            case "--other-day-kind": settings.otherDayKindWeight = try number()
            case "--time-peak": settings.timePeak = try number()
            case "--time-concentration": settings.timeConcentration = try number()
            default: throw BenchmarkUsage("unknown option \(flag)\n\(Self.usageText)")
            }
        }
        if let problem = settings.problem { throw BenchmarkUsage(problem) }
    }
}
