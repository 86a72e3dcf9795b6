// placed-bench own: own places at fleet scale. 10,000 sites (circles of 5 to 50 m, every tenth a
// polygon of 12 positions with a hole) spread over the bundled Helsinki extract, and the figures the
// issue sets goals for: the ranking time per fix with them beside the OSM places (goal p50 <= 50 us),
// reading, checking and storing 10,000 sites (goal <= 1 s; `placectl own import` end to end is timed
// by Tests/integration/test_own_places.py), and the boundary check per fix (goal p50 <= 5 us).
#if canImport(Glibc)
    import Glibc
#endif
import PlacedCore
import PlacedJSON
import PlacedOSM
import PlacedStore
import PlacedTestSupport
import PlacedWire

func ownBenchmark(_ arguments: [String]) throws {
    let count = 10_000
    // Fewer fixes for a profile (`valgrind --tool=callgrind placed-bench own --fixes 500`).
    guard arguments.isEmpty || (arguments.count == 2 && arguments[0] == "--fixes" && Int(arguments[1]) ?? 0 > 0) else {
        throw BenchmarkUsage("placed-bench own [--fixes N]")
    }
    let fixCount = arguments.isEmpty ? 20_000 : Int(arguments[1])!
    let places = try OSM.readPlaces(path: helsinkiExtractPath())
    let catalog = try BenchCatalog(places, name: "own")
    let ranker = try Ranker()
    var rng = SplitMix64(seed: 35)
    let sites = ownSites(count: count, around: places, &rng)
    print("own: \(count) own places over the \(places.count) places of \(helsinkiExtractPath())")

    // Reading, checking and storing, as placed does for PutPlaces (JSON parse, validation, one transaction).
    let file = try OwnPlace.collection(sites).encoded()
    var directory = Array("/tmp/placed-bench-own-XXXXXX".utf8CString)
    let path = String(cString: mkdtemp(&directory)!) + "/selections.db"
    defer {
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        rmdir(String(path.dropLast("/selections.db".count)))
    }
    let store = OwnPlaceStore(log: try SelectionLog(path: path))
    var read: [OwnPlace] = []
    let parse = try BenchClock.seconds { read = try OwnPlace.readCollection(file) }
    let put = try BenchClock.seconds { try store.put(read) }
    var index = OwnPlaceIndex()
    let build = BenchClock.seconds { index = OwnPlaceIndex(read) }
    var loaded: [OwnPlace] = []
    let load = try BenchClock.seconds { loaded = try store.all() }
    guard loaded.count == count else { throw BenchmarkFailure("stored \(loaded.count) of \(count) own places") }
    print(
        "import of \(count) sites (\(file.count / 1024) KiB GeoJSON): parse + check \(ms(parse)) ms, "
            + "store \(ms(put)) ms, index \(ms(build)) ms; total \(ms(parse + put + build)) ms (goal <= 1000)")
    print("start-up: read \(count) sites back \(ms(load)) ms")

    // Two layouts: every site within 100 m of one of the extract's places (the 2 km² of central
    // Helsinki holding all 10,000: about 200 sites near each fix), and the sites spread over 20 km by
    // 20 km around it as a city's fleet sites are (the fixes still at the extract's places).
    let sampler = VisitSampler(places: places, mix: .byKind)
    let sigma = AccuracyReading.radius95.sigma(forAccuracy: 15)
    let fixes = (0..<fixCount).map { _ in sampler.next(&rng).fix(sigma: sigma, &rng) }
    let centre = places[0].coordinate
    let spread = ownSites(count: count, around: places, &rng, spreadOver: 20_000, centre: centre)
    for (label, layout) in [("dense", read), ("city", spread)] {
        var layoutIndex = OwnPlaceIndex(layout)
        try timeOwnRanking(label: label, fixes: fixes, index: &layoutIndex, catalog: catalog.catalog, ranker: ranker)
        try timeBoundaries(label: label, fixes: fixes, index: &layoutIndex)
    }
    precondition(index.count == count, "the index holds every site")
}

private func timeOwnRanking(
    label: String, fixes: [Fix], index: inout OwnPlaceIndex, catalog: PlaceCatalog, ranker: Ranker
) throws {
    var nearby: [OwnSite] = []
    var ownListed = 0
    var candidates = 0
    func time(withOwn: Bool) throws -> Percentiles {
        var microseconds: [Double] = []
        microseconds.reserveCapacity(fixes.count)
        for _ in 0..<2 {  // the second round is the one kept: every page of the mapping touched once
            microseconds.removeAll(keepingCapacity: true)
            ownListed = 0
            candidates = 0
            for fix in fixes {
                let start = BenchClock.now()
                if withOwn {
                    index.candidates(within: ranker.searchRadius(for: fix), of: fix.coordinate, into: &nearby)
                } else {
                    nearby.removeAll(keepingCapacity: true)
                }
                let ranking = try catalog.rank(
                    fix, with: ranker, picks: PickMemory(), now: 0, limit: Ranker.defaultLimit, own: nearby)
                microseconds.append(BenchClock.microseconds(since: start))
                candidates += nearby.count
                ownListed += ranking.places.count { $0.place.id.hasPrefix(OwnPlace.idPrefix) }
            }
        }
        return Percentiles(microseconds)
    }
    let without = try time(withOwn: false)
    let with = try time(withOwn: true)
    let perFix = { (n: Int) in (Double(n) / Double(fixes.count)).formatted(decimals: 1) }
    print(
        "ranking per fix, \(label) (\(fixes.count) fixes, 15 m, limit 5): without own places p50 \(us(without.p50)) us "
            + "p99 \(us(without.p99)) us; with \(index.count) p50 \(us(with.p50)) us p99 \(us(with.p99)) us "
            + "(goal p50 <= 50); own candidates per fix \(perFix(candidates)), listed \(perFix(ownListed))")
}

/// A drive through the sites, one fix a second at 8 m/s, a new street every 5 minutes.
private func timeBoundaries(label: String, fixes: [Fix], index: inout OwnPlaceIndex) throws {
    var tracker = try BoundaryTracker()
    var drive: [Fix] = []
    var position = fixes[0].coordinate
    for second in 0..<fixes.count {
        if second % 300 == 0 { position = fixes[second].coordinate }
        let heading = Double(second / 300) * 1.3
        position = LocalProjection(origin: position).coordinate(east: 8 * cos(heading), north: 8 * sin(heading))
        drive.append(
            Fix(receivedAt: UInt64(second) * 1_000_000, coordinate: position, accuracy: Fix.sigma(fromRadius95: 5)))
    }
    var crossings = 0
    var microseconds: [Double] = []
    microseconds.reserveCapacity(drive.count)
    for fix in drive {
        let start = BenchClock.now()
        crossings += tracker.consider(fix, places: &index).count
        microseconds.append(BenchClock.microseconds(since: start))
    }
    let boundary = Percentiles(microseconds)
    print(
        "boundary check per fix, \(label) (\(drive.count) fixes, 8 m/s, ±5 m): p50 \(us(boundary.p50)) us "
            + "p99 \(us(boundary.p99)) us (goal p50 <= 5); \(crossings) enter/leave events")
}

private func ms(_ seconds: Double) -> String { (seconds * 1000).formatted(decimals: 1) }
private func us(_ microseconds: Double) -> String { microseconds.formatted(decimals: 1) }

/// `count` own places near the extract's places: circles of 5 to 50 m, every tenth a 12-gon with a hole.
/// With `spreadOver`, uniformly over a square of that many metres a side around `centre` instead.
private func ownSites(
    count: Int, around places: [Place], _ rng: inout SplitMix64, spreadOver side: Double? = nil,
    centre middle: Coordinate? = nil
) -> [OwnPlace] {
    (0..<count).map { number in
        let centre: Coordinate
        if let side, let middle {
            let east = Double(rng.next() % 1_000_000) / 1_000_000 - 0.5
            let north = Double(rng.next() % 1_000_000) / 1_000_000 - 0.5
            centre = LocalProjection(origin: middle).coordinate(east: east * side, north: north * side)
        } else {
            let anchor = places[Int(rng.next() % UInt64(places.count))].coordinate
            centre = LocalProjection(origin: anchor).coordinate(
                east: Double(rng.next() % 200) - 100, north: Double(rng.next() % 200) - 100)
        }
        let radius = 5 + Double(rng.next() % 46)
        let id = "own:bench-\(number)"
        guard number % 10 == 0 else {
            return OwnPlace(
                id: id, name: "Site \(number)", kind: "customer", geometry: .circle(centre: centre, radius: radius))
        }
        let around = LocalProjection(origin: centre)
        func ring(_ r: Double, clockwise: Bool) -> [Coordinate] {
            var points = (0..<12).map { k in
                let angle = Double(k) / 12 * 2 * .pi * (clockwise ? -1 : 1)
                return around.coordinate(east: r * cos(angle), north: r * sin(angle))
            }
            points.append(points[0])
            return points
        }
        return OwnPlace(
            id: id, name: "Yard \(number)", kind: "depot",
            geometry: .polygons([[ring(radius, clockwise: false), ring(radius / 3, clockwise: true)]]))
    }
}
