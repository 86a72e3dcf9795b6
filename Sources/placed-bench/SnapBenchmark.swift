// placed-bench snap: does the ranker put the place a device is at on top?
//
// Visits are sampled from the places of an extract (a place drawn by how often people go to its kind,
// a true position inside it), a fix is the true position plus GPS noise of a stated accuracy, and the
// ranker's top 1 and top 5 are scored beside two baselines on the same fixes: the nearest place by
// distance, and Home Assistant's zone rule. Then the time to rank one fix, candidates included, on the
// extract and on a million places made by tiling it.
#if canImport(Glibc)
    import Glibc
#endif
import PlacedCore
import PlacedOSM

func snapBenchmark(_ arguments: [String]) throws {
    let options = try SnapOptions(arguments)
    let places = try OSM.readPlaces(path: options.path)
    guard !places.isEmpty else { throw SnapError.noPlaces(options.path) }
    let ranker = try Ranker()
    let finder = PlaceFinder(places: places)
    print(
        "snap: \(places.count) places from \(options.path); seed \(options.seed)"
            + (options.seed == SnapOptions.tuningSeed
                ? " (the tuning seed)" : " (held out: tuned on seed \(SnapOptions.tuningSeed))")
            + "; \(options.visits) visits per accuracy")

    print(
        "density: a place has on average \(neighbours(of: places, within: 20).formatted(decimals: 1)) others within 20 m"
    )

    for mix in VisitMix.allCases {
        let oracle = try Ranker(model: mix.oracleModel(for: places))
        print("\nvisits \(mix.summary)")
        print(
            "accuracy  ranker top1 top5    oracle priors top1 top5   nearest top1 top5   HA zone top1 top5   top1 ranker/nearest"
        )
        for accuracy in SnapOptions.accuracies {
            var rng = SplitMix64(seed: options.seed &+ UInt64(accuracy) &* 1_000_003 &+ UInt64(mix.rawValue))
            let sampler = VisitSampler(places: places, mix: mix)
            var scores = SnapScores()
            for _ in 0..<options.visits {
                let visit = sampler.next(&rng)
                let fix = visit.fix(accuracy: accuracy, &rng)
                let truth = places[visit.place].id
                let candidates = finder.candidates(for: fix, ranker: ranker)
                scores.ranker.score(
                    try ranker.rank(fix: fix, candidates: candidates).places.map(\.place.id), truth: truth)
                scores.oracle.score(
                    try oracle.rank(fix: fix, candidates: candidates).places.map(\.place.id), truth: truth)
                scores.nearest.score(Baselines.nearest(to: fix, in: places), truth: truth)
                scores.zone.score(Baselines.homeAssistantZone(for: fix, in: places), truth: truth)
            }
            print(
                "\(pad("\(Int(accuracy)) m", 17))\(scores.ranker.columns)          \(scores.oracle.columns)"
                    + "               \(scores.nearest.columns)          \(scores.zone.columns)   "
                    + "\(scores.ranker.top1Ratio(to: scores.nearest).formatted(decimals: 2))x")
        }
    }

    print("\nranking time per fix (candidate query + rank, limit 5), \(options.timedFixes) fixes")
    print("places      accuracy  candidates  listed  p50 us   p99 us")
    try timeRanking(places: places, finder: finder, ranker: ranker, label: "\(places.count)", options: options)
    let million = tiled(places, toAtLeast: 1_000_000)
    try timeRanking(
        places: million, finder: PlaceFinder(places: million), ranker: ranker, label: "\(million.count)",
        options: options)
}

// MARK: - Options

struct SnapOptions {
    static let accuracies: [Double] = [5, 15, 30]
    static let tuningSeed: UInt64 = 1
    var path = "../shared/data/helsinki-center.osm.pbf"
    var seed: UInt64 = 2
    var visits = 20_000
    var timedFixes = 20_000

    init(_ arguments: [String]) throws(SnapError) {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { throw .usage("\(flag) needs a value") }
            switch flag {
            case "--places": path = value
            case "--seed":
                guard let n = UInt64(value) else { throw .usage("--seed takes a whole number") }
                seed = n
            case "--visits":
                guard let n = Int(value), n > 0 else { throw .usage("--visits takes a number > 0") }
                visits = n
                timedFixes = n
            default: throw .usage("unknown option \(flag)")
            }
        }
    }
}

enum SnapError: Error, CustomStringConvertible {
    case usage(String)
    case noPlaces(String)

    var description: String {
        switch self {
        case let .usage(problem): "\(problem)\nusage: placed-bench snap [--places FILE.osm.pbf] [--seed N] [--visits N]"
        case let .noPlaces(path): "no places in \(path)"
        }
    }
}

// MARK: - Visits

/// Which places get visited, and how often.
enum VisitMix: Int, CaseIterable {
    /// The benchmark's own guess at where people go: its numbers are not the model's priors.
    case byKind
    /// Every place alike: how much of the gain is the kind prior.
    case uniform

    var summary: String {
        switch self {
        case .byKind:
            "weighted by kind (food and drink 4, groceries 4, other shops 2, stops and stations 2, sights and services 1.5, offices 1, artworks, memorials, bare buildings 0.5, other 1)"
        case .uniform: "uniform over places (sensitivity check: no kind is visited more than another)"
        }
    }

    /// The ranker told what the sampler does: every kind weighted by its visit frequency, every point
    /// extent the premises the sampler uses. Its hit rates are about what tuning the standard model's
    /// constants could ever reach on these visits.
    func oracleModel(for places: [Place]) -> RankingModel {
        var kinds: [String: RankingModel.KindPrior] = [:]
        for place in places {
            kinds[place.kind] = .init(weight: frequency(ofKind: place.kind), pointExtent: Visit.pointPremises)
        }
        return RankingModel(kinds: kinds)
    }

    func frequency(ofKind kind: String) -> Double {
        guard self == .byKind else { return 1 }
        let key = kind.split(separator: "=", maxSplits: 1).first.map(String.init) ?? kind
        switch kind {
        case "amenity=restaurant", "amenity=cafe", "amenity=fast_food", "amenity=pub", "amenity=bar",
            "amenity=ice_cream", "amenity=nightclub", "amenity=food_court", "amenity=biergarten",
            "shop=supermarket", "shop=convenience", "shop=bakery":
            return 4
        case "highway=bus_stop", "railway=tram_stop", "railway=station", "railway=halt", "public_transport=station",
            "public_transport=platform", "public_transport=stop_position":
            return 2
        case "tourism=artwork", "tourism=information", "amenity=vending_machine", "amenity=atm",
            "amenity=bicycle_rental", "amenity=post_box":
            return 0.5
        default:
            break
        }
        switch key {
        case "shop": return 2
        case "tourism", "leisure", "healthcare": return 1.5
        case "historic", "building": return 0.5
        default:
            let services: Set = [
                "amenity=pharmacy", "amenity=bank", "amenity=post_office", "amenity=library", "amenity=theatre",
                "amenity=cinema", "amenity=place_of_worship",
            ]
            return services.contains(kind) ? 1.5 : 1
        }
    }
}

/// A device at a place: which place, and where in it.
struct Visit {
    /// Radius in metres around a place mapped as a point within which a visitor stands.
    static let pointPremises = 10.0

    var place: Int
    var position: Coordinate

    /// The position seen through a receiver of 1-σ `accuracy` (per axis, as `Fix.accuracy`), at rest.
    func fix(accuracy: Double, _ rng: inout SplitMix64) -> Fix {
        let p = LocalProjection(origin: position)
        let east = accuracy * rng.gaussian(), north = accuracy * rng.gaussian()
        let noisy = Coordinate(
            latitude: position.latitude + north / p.metresPerDegreeLatitude,
            longitude: position.longitude + east / p.metresPerDegreeLongitude)
        return Fix(coordinate: noisy, accuracy: accuracy, speed: 0)
    }
}

struct VisitSampler {
    let places: [Place]
    /// Running sum of visit frequencies, for drawing a place by binary search.
    let cumulative: [Double]

    init(places: [Place], mix: VisitMix) {
        self.places = places
        var sum = 0.0
        cumulative = places.map {
            sum += mix.frequency(ofKind: $0.kind)
            return sum
        }
    }

    func next(_ rng: inout SplitMix64) -> Visit {
        let target = rng.uniform(in: 0...cumulative[cumulative.count - 1])
        var low = 0, high = cumulative.count - 1
        while low < high {
            let mid = (low + high) / 2
            if cumulative[mid] < target { low = mid + 1 } else { high = mid }
        }
        return Visit(place: low, position: position(inside: places[low], &rng))
    }

    /// Uniform inside an area's outline; uniform within `Visit.pointPremises` of a point.
    private func position(inside place: Place, _ rng: inout SplitMix64) -> Coordinate {
        if place.area > 0, let bounds = place.bounds, let outline = place.outline, outline.count >= 4 {
            for _ in 0..<10_000 {
                let c = Coordinate(
                    latitude: rng.uniform(in: bounds.minLatitude...bounds.maxLatitude),
                    longitude: rng.uniform(in: bounds.minLongitude...bounds.maxLongitude))
                if place.footprintDistance(from: LocalProjection(origin: c)) == 0 { return c }
            }
            return place.coordinate  // a sliver: its inside point is inside by construction
        }
        let p = LocalProjection(origin: place.coordinate)
        let r = Visit.pointPremises * rng.uniform(in: 0...1).squareRoot()
        let angle = rng.uniform(in: 0...(2 * .pi))
        return Coordinate(
            latitude: place.coordinate.latitude + r * sin(angle) / p.metresPerDegreeLatitude,
            longitude: place.coordinate.longitude + r * cos(angle) / p.metresPerDegreeLongitude)
    }
}

// MARK: - Baselines

enum Baselines {
    static let listed = 5

    /// The places nearest to the fix by distance to their footprint (0 inside an area), ties by id.
    static func nearest(to fix: Fix, in places: [Place]) -> [String] {
        let projection = LocalProjection(origin: fix.coordinate)
        var best: [(distance: Double, id: String)] = []
        for place in places {
            let d = place.footprintDistance(from: projection)
            insert((d, place.id), into: &best) { ($0.distance, $0.id) < ($1.distance, $1.id) }
        }
        return best.map(\.id)
    }

    /// Home Assistant's zone rule (`async_active_zone`): a zone is active when the distance to its centre
    /// minus the fix's accuracy is less than its radius; of the active zones, the closest centre wins, a
    /// tie to the smaller radius. A place is a zone centred on its coordinate with radius √(area/π), or
    /// the default point extent. Places no zone covers are not listed, so this list may be empty.
    static func homeAssistantZone(for fix: Fix, in places: [Place]) -> [String] {
        let projection = LocalProjection(origin: fix.coordinate)
        let accuracy = fix.accuracy ?? 0
        var best: [(distance: Double, radius: Double, id: String)] = []
        for place in places {
            let radius = place.area > 0 ? (place.area / .pi).squareRoot() : RankingModel.defaultPointExtent
            let d = projection.distance(to: place.coordinate)
            guard d - accuracy < radius else { continue }
            insert((d, radius, place.id), into: &best) {
                ($0.distance, $0.radius, $0.id) < ($1.distance, $1.radius, $1.id)
            }
        }
        return best.map(\.id)
    }

    /// Keeps `list` the `listed` smallest by `less`, sorted.
    private static func insert<T>(_ element: T, into list: inout [T], by less: (T, T) -> Bool) {
        if list.count == listed, let last = list.last, !less(element, last) { return }
        let at = list.firstIndex { less(element, $0) } ?? list.count
        list.insert(element, at: at)
        if list.count > listed { list.removeLast() }
    }
}

// MARK: - Scores

struct HitRate {
    var top1 = 0
    var top5 = 0
    var total = 0

    mutating func score(_ ids: [String], truth: String) {
        total += 1
        if ids.first == truth { top1 += 1 }
        if ids.prefix(5).contains(truth) { top5 += 1 }
    }

    var columns: String {
        "\(pad(rate(top1).formatted(decimals: 3), 6))\(rate(top5).formatted(decimals: 3))"
    }

    func top1Ratio(to other: HitRate) -> Double { rate(top1) / other.rate(other.top1) }

    func rate(_ hits: Int) -> Double { total > 0 ? Double(hits) / Double(total) : 0 }
}

struct SnapScores {
    var ranker = HitRate()
    var oracle = HitRate()
    var nearest = HitRate()
    var zone = HitRate()
}

// MARK: - Timing

func timeRanking(places: [Place], finder: PlaceFinder, ranker: Ranker, label: String, options: SnapOptions) throws {
    let sampler = VisitSampler(places: places, mix: .byKind)
    for accuracy in SnapOptions.accuracies {
        var rng = SplitMix64(seed: options.seed &+ 77 &+ UInt64(accuracy))
        let fixes = (0..<options.timedFixes).map { _ in sampler.next(&rng).fix(accuracy: accuracy, &rng) }
        var nanoseconds: [UInt64] = []
        nanoseconds.reserveCapacity(fixes.count)
        var candidates = 0
        var listed = 0
        for fix in fixes {
            let start = monotonicNanoseconds()
            let found = finder.candidates(for: fix, ranker: ranker)
            let ranking = try ranker.rank(fix: fix, candidates: found)
            nanoseconds.append(monotonicNanoseconds() - start)
            candidates += found.count
            listed += ranking.places.count
        }
        nanoseconds.sort()
        let p50 = Double(nanoseconds[nanoseconds.count / 2]) / 1000
        let p99 = Double(nanoseconds[nanoseconds.count * 99 / 100]) / 1000
        let meanCandidates = Double(candidates) / Double(fixes.count)
        let meanListed = Double(listed) / Double(fixes.count)
        print(
            "\(pad(label, 12))\(pad("\(Int(accuracy)) m", 10))\(pad(meanCandidates.formatted(decimals: 1), 12))"
                + "\(pad(meanListed.formatted(decimals: 1), 8))\(pad(p50.formatted(decimals: 1), 9))\(p99.formatted(decimals: 1))"
        )
    }
}

func monotonicNanoseconds() -> UInt64 {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
}

/// Copies of the extract laid side by side (each shifted by the extract's extent, ids made unique)
/// until there are at least `count` places: a big city at the extract's density and kind mix.
func tiled(_ places: [Place], toAtLeast count: Int) -> [Place] {
    let latitudes = places.map(\.coordinate.latitude), longitudes = places.map(\.coordinate.longitude)
    let height = latitudes.max()! - latitudes.min()!, width = longitudes.max()! - longitudes.min()!
    let copies = (count + places.count - 1) / places.count
    let side = Int(Double(copies).squareRoot().rounded(.up))
    var result: [Place] = []
    result.reserveCapacity(copies * places.count)
    for copy in 0..<copies {
        let dLat = Double(copy / side) * height, dLon = Double(copy % side) * width
        func shift(_ c: Coordinate) -> Coordinate {
            Coordinate(latitude: c.latitude + dLat, longitude: c.longitude + dLon)
        }
        for var place in places {
            if copy > 0 {
                place.id += "#\(copy)"
                place.coordinate = shift(place.coordinate)
                place.bounds = place.bounds.map {
                    BoundingBox(
                        minLatitude: $0.minLatitude + dLat, minLongitude: $0.minLongitude + dLon,
                        maxLatitude: $0.maxLatitude + dLat, maxLongitude: $0.maxLongitude + dLon)
                }
                place.outline = place.outline?.map(shift)
            }
            result.append(place)
        }
    }
    return result
}

/// Mean number of other places within `radius` metres of a place: why a few metres of noise blur a city centre.
func neighbours(of places: [Place], within radius: Double) -> Double {
    let index = PlaceIndex(coordinates: places.map(\.coordinate))
    var total = 0
    for place in places { total += index.within(radius, of: place.coordinate).count - 1 }
    return Double(total) / Double(places.count)
}

private func pad(_ s: String, _ width: Int) -> String { s.padding(width) }
