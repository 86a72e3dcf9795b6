import CSQLite
import PlacedCore
import PlacedStore
import PlacedTestSupport

// placed-bench index: "within 250 m" on the packed kd-tree beside an SQLite R*Tree, same places,
// same queries, same answers.
#if canImport(Glibc)
    import Glibc
#endif

/// `placed-bench index [--places N[,N…]] [--queries N] [--radius M] [--node-size N]`
/// `placed-bench index --places-file FILE [--rtree-cache DIR] [--queries N] [--radius M]`
/// Defaults: 1 M and 5 M places, 10 000 queries, 250 m, node size 64; with `--rtree-cache`, the places
/// file's R*Tree is kept in DIR (named by the pack id, so by the places, whatever the file) and read back
/// on later runs instead of built again (minutes at 10 M places).
func runIndexBenchmark(_ arguments: [String]) throws {
    var sizes = [1_000_000, 5_000_000]
    var queryCount = 10_000
    var radius = 250.0
    var nodeSize = 64
    var placesFile: String?
    var rtreeCache: String?
    var withinOnly = false
    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
        if argument == "--within-only" {
            withinOnly = true
            continue
        }
        guard let value = remaining.popFirst() else { throw BenchmarkUsage("\(argument) needs a value") }
        switch argument {
        case "--places-file": placesFile = value
        case "--rtree-cache": rtreeCache = value
        case "--places": sizes = value.split(separator: ",").compactMap { Int($0) }
        case "--queries": queryCount = Int(value) ?? queryCount
        case "--radius": radius = Double(value) ?? radius
        case "--node-size": nodeSize = Int(value) ?? nodeSize
        default: throw BenchmarkUsage("unknown option \(argument)")
        }
    }

    if let placesFile {
        return try indexOnPlacesFile(
            placesFile, queries: queryCount, radius: radius, rtreeCache: rtreeCache, withinOnly: withinOnly)
    }
    print(
        "index: \(queryCount) queries \"within \(Int(radius)) m, nearest first\" near synthetic places (\(SyntheticCountry.summary))"
    )
    print("  kd-tree: PlaceIndex (node size \(nodeSize)), reused result buffer")
    print("  R*Tree:  SQLite rtree in memory (+lat, +lon auxiliary columns), box query, same exact filter and sort")
    print("places     build s  kd p50 µs  kd p99 µs  rtree p50 µs  rtree p99 µs  p50 ratio  p99 ratio  results/query")
    for count in sizes {
        let coordinates = SyntheticCountry.coordinates(count: count, seed: 1)
        let queries = SyntheticCountry.queries(near: coordinates, count: queryCount, seed: 2)

        let buildStart = BenchClock.now()
        let index = PlaceIndex(coordinates: coordinates, nodeSize: nodeSize)
        let buildSeconds = BenchClock.seconds(since: buildStart)

        var buffer: [PlaceIndex.Neighbor] = []
        buffer.reserveCapacity(4096)
        var kdTimes: [Double] = []
        // Answers kept flat and copied out after the clock stops: keeping `buffer` itself would
        // share its storage and make the next query pay for a fresh allocation.
        var kdAnswers: [PlaceIndex.Neighbor] = []
        var kdAnswerEnds: [Int] = []
        kdTimes.reserveCapacity(queries.count)
        for q in queries {  // warm-up pass: fault in the arrays the way a running daemon has them
            index.within(radius, of: q, into: &buffer)
        }
        for q in queries {
            let start = BenchClock.now()
            index.within(radius, of: q, into: &buffer)
            kdTimes.append(BenchClock.microseconds(since: start))
            kdAnswers.append(contentsOf: buffer)
            kdAnswerEnds.append(kdAnswers.count)
        }

        let rtree = try RTreeBaseline(coordinates: coordinates)
        var rtreeTimes: [Double] = []
        rtreeTimes.reserveCapacity(queries.count)
        var mismatches = 0
        var results = 0
        for q in queries { _ = try rtree.within(radius, of: q) }  // same warm-up
        for (i, q) in queries.enumerated() {
            let start = BenchClock.now()
            let answer = try rtree.within(radius, of: q)
            rtreeTimes.append(BenchClock.microseconds(since: start))
            let kdAnswer = kdAnswers[(i == 0 ? 0 : kdAnswerEnds[i - 1])..<kdAnswerEnds[i]]
            if !answer.elementsEqual(kdAnswer) { mismatches += 1 }
            results += answer.count
        }
        guard mismatches == 0 else {
            throw BenchmarkFailure("kd-tree and R*Tree disagree on \(mismatches) of \(queries.count) queries")
        }

        let kd = Percentiles(kdTimes)
        let rt = Percentiles(rtreeTimes)
        print(
            BenchFormat.column(count, 9), BenchFormat.column(buildSeconds, 9, decimals: 2),
            BenchFormat.column(kd.p50, 10, decimals: 2), BenchFormat.column(kd.p99, 10, decimals: 2),
            BenchFormat.column(rt.p50, 13, decimals: 1), BenchFormat.column(rt.p99, 13, decimals: 1),
            BenchFormat.column(rt.p50 / kd.p50, 9, decimals: 1) + "x",
            BenchFormat.column(rt.p99 / kd.p99, 9, decimals: 1) + "x",
            BenchFormat.column(Double(results) / Double(queries.count), 14, decimals: 1))
    }
    print("answers: kd-tree == R*Tree (same ids, distances and order) for every query")
}

/// The reference: SQLite's R*Tree over the same points, asked for the same degree box as the
/// kd-tree's prefilter, then the same metric, filter and order.
final class RTreeBaseline {
    let database: Database
    let query: Statement

    convenience init(coordinates: [Coordinate]) throws {
        let database = try Database(path: ":memory:")
        try Self.fill(database, with: coordinates)
        try self.init(database: database)
    }

    private init(database: Database) throws {
        self.database = database
        query = try database.prepare(
            "SELECT id, lat, lon FROM points WHERE max_lat >= ?1 AND min_lat <= ?2 AND max_lon >= ?3 AND min_lon <= ?4")
    }

    /// An R*Tree saved by `save(to:)`, read back into memory whole.
    static func loaded(from path: String) throws -> RTreeBaseline {
        let memory = try Database(path: ":memory:")
        try Database(path: path, mode: .readOnly).copy(into: memory)
        return try RTreeBaseline(database: memory)
    }

    /// The R*Tree into a file (through a temporary name, so a half-written one is never read back).
    func save(to path: String) throws {
        let temporary = path + ".tmp"
        unlink(temporary)
        try database.copy(into: try Database(path: temporary))
        guard rename(temporary, path) == 0 else { throw BenchmarkFailure("cannot rename \(temporary) to \(path)") }
    }

    private static func fill(_ database: Database, with coordinates: [Coordinate]) throws {
        // R*Tree boxes are float32, rounded outward: the box query is a superset, the auxiliary
        // columns keep the exact float64 position for the exact filter.
        try database.execute(
            "CREATE VIRTUAL TABLE points USING rtree(id, min_lat, max_lat, min_lon, max_lon, +lat REAL, +lon REAL)")
        try database.transaction {
            let insert = try database.prepare("INSERT INTO points VALUES (?, ?, ?, ?, ?, ?, ?)")
            for (i, c) in coordinates.enumerated() {
                try insert.bind(Int64(i), at: 1)
                for (n, value) in [c.latitude, c.latitude, c.longitude, c.longitude, c.latitude, c.longitude]
                    .enumerated()
                {
                    try insert.bind(value, at: Int32(n + 2))
                }
                try insert.step()
                insert.reset()
            }
        }
    }

    func within(_ radius: Double, of center: Coordinate) throws -> [PlaceIndex.Neighbor] {
        let projection = LocalProjection(origin: center)
        let slack = 1 + 1e-9  // as PlaceIndex: the exact test is per point
        let dLat = radius / projection.metresPerDegreeLatitude * slack
        let dLon = radius / projection.metresPerDegreeLongitude * slack
        try query.bind(center.latitude - dLat, at: 1)
        try query.bind(center.latitude + dLat, at: 2)
        try query.bind(center.longitude - dLon, at: 3)
        try query.bind(center.longitude + dLon, at: 4)
        defer { query.reset() }
        var found: [PlaceIndex.Neighbor] = []
        while try query.step() {
            let c = Coordinate(latitude: query.double(at: 1), longitude: query.double(at: 2))
            let d = projection.distance(to: c)
            if d <= radius { found.append(PlaceIndex.Neighbor(index: Int(query.int64(at: 0)), distance: d)) }
        }
        found.sort { ($0.distance, $0.index) < ($1.distance, $1.index) }
        return found
    }
}

/// A synthetic country at Helsinki's latitude: towns whose sizes follow Zipf's law (the largest a
/// Helsinki of ~15 % of all places), each a Gaussian cluster with a dense core (1000 places/km² at
/// the centre, like a city centre's named shops, cafés and buildings), plus 10 % scattered
/// countryside. The country widens eastward with the place count (one town per 5000 places), so
/// a town looks the same at 1 M and 5 M and only the index grows.
enum SyntheticCountry {
    static let summary = "Zipf towns, 1000/km² cores, 60–62.5° N"

    static func coordinates(count: Int, seed: UInt64) -> [Coordinate] {
        var random = SplitMix64(seed: seed)
        let townCount = max(1, count / 5000)
        let lonSpan = 4.0 * Double(townCount) / 200  // 200 towns: 4° of longitude (~220 km)
        let harmonic = (1...townCount).reduce(0.0) { $0 + 1 / Double($1) }
        let townPlaces = (1...townCount).map { 0.9 * Double(count) / (harmonic * Double($0)) }
        var towns: [(center: Coordinate, sigmaMetres: Double)] = []
        for (i, places) in townPlaces.enumerated() {
            let center =
                i == 0
                ? Coordinate(latitude: 60.17, longitude: 24.94)
                : Coordinate(latitude: random.uniform(in: 60...62.5), longitude: 22 + random.uniform(in: 0...lonSpan))
            // Central density of a 2-D Gaussian: n / (2π σ²) = 1000 per km².
            towns.append((center, (places / (2 * Double.pi * 1000e-6)).squareRoot()))
        }
        // Cumulative weights for picking a town in proportion to its size.
        var cumulative: [Double] = []
        var total = 0.0
        for places in townPlaces {
            total += places
            cumulative.append(total)
        }

        var points: [Coordinate] = []
        points.reserveCapacity(count)
        while points.count < count {
            if random.next() % 10 == 0 {
                points.append(
                    Coordinate(latitude: random.uniform(in: 60...62.5), longitude: 22 + random.uniform(in: 0...lonSpan))
                )
                continue
            }
            let pick = random.uniform(in: 0...total)
            var low = 0
            var high = cumulative.count - 1
            while low < high {
                let mid = (low + high) / 2
                if cumulative[mid] < pick { low = mid + 1 } else { high = mid }
            }
            let town = towns[low]
            let north = random.gaussian() * town.sigmaMetres, east = random.gaussian() * town.sigmaMetres
            points.append(LocalProjection(origin: town.center).coordinate(east: east, north: north))
        }
        return points
    }

    /// Where devices are: near places (a random place, moved by ~50 m).
    static func queries(near points: [Coordinate], count: Int, seed: UInt64) -> [Coordinate] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let p = points[Int(random.next() % UInt64(points.count))]
            let north = random.gaussian() * 50, east = random.gaussian() * 50
            return LocalProjection(origin: p).coordinate(east: east, north: north)
        }
    }
}

/// `--places-file`: the index as the daemon has it, used in place from the file's mapping, and the
/// daemon's ranking (`PlaceCatalog.rank`, accuracy 10 m), each timed on a cold page cache (the file's
/// pages evicted first, as an import leaves them) and then warm; beside SQLite's R*Tree over the same
/// points in memory (the same answers are checked for every query).
/// `--within-only`: the kd-tree's within alone, cold and then five warm rounds (a focused run to profile).
func indexOnPlacesFile(
    _ path: String, queries queryCount: Int, radius: Double, rtreeCache: String?, withinOnly: Bool
) throws {
    let catalog = try PlaceCatalog(path: path)
    let index = catalog.placeSet.index
    let count = index.count
    var random = SplitMix64(seed: 2)
    let queries = (0..<queryCount).map { _ in
        let p = index.entry(atPosition: Int(random.next() % UInt64(count))).coordinate
        return LocalProjection(origin: p).coordinate(east: random.gaussian() * 50, north: random.gaussian() * 50)
    }
    var buffer: [PlaceIndex.Neighbor] = []
    buffer.reserveCapacity(4096)
    var found = 0
    func timeWithin() -> [Double] {
        found = 0
        return queries.map { q in
            let start = BenchClock.now()
            index.within(radius, of: q, into: &buffer)
            let microseconds = BenchClock.microseconds(since: start)
            found += buffer.count
            return microseconds
        }
    }
    // Mapped pages are not evicted while this process maps them: out of its page tables first.
    catalog.releaseResidentPages()
    try LoadMeasurement.evictFromPageCache(path)
    let cold = Percentiles(timeWithin())
    let warm = Percentiles(timeWithin())
    if withinOnly {
        let rounds = (0..<5).map { _ in Percentiles(timeWithin()).p50.formatted(decimals: 2) }
        print(
            "index on \(path): \(count) places, within \(Int(radius)) m, \((Double(found) / Double(queryCount)).formatted(decimals: 1))"
                + " places a query: p50 cold \(cold.p50.formatted(decimals: 2)) us, warm \(warm.p50.formatted(decimals: 2)) us,"
                + " then \(rounds.joined(separator: " / ")) us")
        return
    }
    let ranker = try Ranker()
    func timeRanking() throws -> [Double] {
        try queries.map { q in
            let fix = Fix(receivedAt: 0, coordinate: q, mode: .twoD, accuracy: Fix.sigma(fromRadius95: 10))
            let start = BenchClock.now()
            _ = try catalog.rank(fix, with: ranker, picks: PickMemory(), now: 0, limit: 5)
            return BenchClock.microseconds(since: start)
        }
    }
    catalog.releaseResidentPages()
    try LoadMeasurement.evictFromPageCache(path)
    let coldRanking = Percentiles(try timeRanking())
    _ = try timeRanking()  // the catalog's cache too: as a device that has been here
    let warmRanking = Percentiles(try timeRanking())
    let memory = LoadMeasurement.memory()
    print(
        "index on \(path): \(count) places (mapped), \(queryCount) queries near places, within \(Int(radius)) m"
            + " (\((Double(found) / Double(queryCount)).formatted(decimals: 1)) places a query)")
    print(
        "  kd-tree within p50 cold \(cold.p50.formatted(decimals: 2)) us (p99 \(cold.p99.formatted(decimals: 1))),"
            + " warm \(warm.p50.formatted(decimals: 2)) us (p99 \(warm.p99.formatted(decimals: 1)))")
    print(
        "  ranking p50 cold \(coldRanking.p50.formatted(decimals: 1)) us (p99 \(coldRanking.p99.formatted(decimals: 0))),"
            + " warm \(warmRanking.p50.formatted(decimals: 1)) us (p99 \(warmRanking.p99.formatted(decimals: 0)))")
    print("  RSS now \(memory.rss.formatted(decimals: 1)) MB")
    let buildStart = BenchClock.now()
    let cached = rtreeCache.map { "\($0)/rtree-\(catalog.packID).db" }
    let rtree: RTreeBaseline
    let made: String
    if let cached, access(cached, R_OK) == 0 {
        rtree = try RTreeBaseline.loaded(from: cached)
        made = "read back from \(cached) in \(BenchClock.seconds(since: buildStart).formatted(decimals: 0)) s"
    } else {
        rtree = try RTreeBaseline(coordinates: (0..<count).map { index.entry(atPosition: $0).coordinate })
        made = "built in \(BenchClock.seconds(since: buildStart).formatted(decimals: 0)) s"
        if let cached, let directory = rtreeCache {
            mkdir(directory, 0o755)
            try rtree.save(to: cached)
        }
    }
    for q in queries.prefix(1000) { _ = try rtree.within(radius, of: q) }
    var rtreeTimes: [Double] = []
    var mismatches = 0
    for q in queries {
        let start = BenchClock.now()
        let answer = try rtree.within(radius, of: q)
        rtreeTimes.append(BenchClock.microseconds(since: start))
        index.within(radius, of: q, into: &buffer)
        if answer != buffer { mismatches += 1 }
    }
    guard mismatches == 0 else { throw BenchmarkFailure("kd-tree and R*Tree disagree on \(mismatches) queries") }
    let rt = Percentiles(rtreeTimes)
    print(
        "  R*Tree (SQLite, in memory, \(made)) within p50"
            + " \(rt.p50.formatted(decimals: 1)) us (p99 \(rt.p99.formatted(decimals: 1))): kd-tree warm"
            + " \((rt.p50 / warm.p50).formatted(decimals: 1))x, cold \((rt.p50 / cold.p50).formatted(decimals: 1))x;"
            + " same answers for every query")
}
