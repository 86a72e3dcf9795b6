import PlacedCore
import PlacedStore
import PlacedTestSupport

// placed-bench load: daemon start-up with a 1 M-place database — open + load time and RSS, measured
// in fresh child processes so nothing of the generator's memory is counted.
#if canImport(Glibc)
    import Glibc
#endif

/// `placed-bench load [--places N] [--database PATH] [--keep]`. Default 1 M places in /tmp, deleted at
/// the end unless `--keep` (bench/startup.py starts the daemon on it).
func runLoadBenchmark(_ arguments: [String]) throws {
    if arguments.first == "--measure", arguments.count == 3 {
        return try LoadMeasurement.run(path: arguments[1], mode: arguments[2])
    }
    var count = 1_000_000
    var path = "/tmp/placed-bench-load.db"
    var keep = false
    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
        if argument == "--keep" {
            keep = true
            continue
        }
        guard let value = remaining.popFirst() else { throw BenchmarkUsage("\(argument) needs a value") }
        switch argument {
        case "--places": count = Int(value) ?? count
        case "--database": path = value
        default: throw BenchmarkUsage("unknown option \(argument)")
        }
    }
    defer { if !keep { unlink(path) } }

    let places = LoadMeasurement.syntheticPlaces(count: count)
    let writeStart = BenchClock.now()
    try PlaceDatabase.replace(at: path, with: places)
    let writeSeconds = BenchClock.seconds(since: writeStart)
    var status = stat()
    stat(path, &status)
    print(
        "load: \(count) places written by PlaceDatabase.replace in \(writeSeconds.formatted(decimals: 1)) s,"
            + " file \((Double(status.st_size) / 1e6).formatted(decimals: 0)) MB")
    print("  stored = PlaceDatabase.open + load (index and columns read as BLOBs; names stay on disk)")
    print("  rebuild = open + scan rows (lat, lon, area, kind) + PlaceIndex build, the design not taken")
    print("  cold = file pages evicted first (posix_fadvise DONTNEED); each run a fresh process")
    print("mode             open+load ms   RSS before MB   RSS after MB   peak RSS MB   goal")
    for (mode, cold) in [("stored", false), ("stored", true), ("rebuild", false), ("rebuild", true)] {
        if cold { try LoadMeasurement.evictFromPageCache(path) }
        fflush(nil)  // our lines first: the child writes to the same stdout
        try LoadMeasurement.spawnSelf(["load", "--measure", path, mode + (cold ? "-cold" : "-warm")])
    }
}

enum LoadMeasurement {
    /// In the child: time open + load, then report memory.
    static func run(path: String, mode: String) throws {
        let before = memory()
        let start = BenchClock.now()
        // What was loaded stays alive until memory is read.
        let loaded: AnyObject
        let count: Int
        if mode.hasPrefix("stored") {
            let set = try PlaceDatabase.open(path: path).load()
            (loaded, count) = (set, set.count)
        } else {
            let rebuilt = try rebuild(path: path)
            (loaded, count) = (rebuilt, rebuilt.index.count)
        }
        let milliseconds = BenchClock.seconds(since: start) * 1000
        let after = memory()
        withExtendedLifetime(loaded) {}
        guard count > 0 else { throw BenchmarkFailure("nothing loaded from \(path)") }
        let goal = mode.hasPrefix("stored") ? (milliseconds <= 300 && after.rss <= 100 ? "met" : "MISSED") : "-"
        print(
            mode.padding(15), BenchFormat.column(milliseconds, 13, decimals: 1),
            BenchFormat.column(before.rss, 15, decimals: 1), BenchFormat.column(after.rss, 14, decimals: 1),
            BenchFormat.column(after.peak, 13, decimals: 1), "  " + goal)
    }

    /// The alternative start-up: read every row's position, area and kind, then build the tree.
    final class Rebuilt {
        let index: PlaceIndex
        let areas: [Float]
        let kindCodes: [UInt32]
        let kinds: [String: UInt32]

        init(index: PlaceIndex, areas: [Float], kindCodes: [UInt32], kinds: [String: UInt32]) {
            self.index = index
            self.areas = areas
            self.kindCodes = kindCodes
            self.kinds = kinds
        }
    }

    static func rebuild(path: String) throws -> Rebuilt {
        let database = try Database(path: path, mode: .readOnly)
        let rows = try database.prepare("SELECT latitude, longitude, area, kind FROM places ORDER BY rowid")
        var coordinates: [Coordinate] = []
        var areas: [Float] = []
        var kindCodes: [UInt32] = []
        var kinds: [String: UInt32] = [:]
        while try rows.step() {
            coordinates.append(Coordinate(latitude: rows.double(at: 0), longitude: rows.double(at: 1)))
            areas.append(Float(rows.double(at: 2)))
            let kind = rows.text(at: 3) ?? ""
            if let code = kinds[kind] {
                kindCodes.append(code)
            } else {
                kinds[kind] = UInt32(kinds.count)
                kindCodes.append(UInt32(kinds.count - 1))
            }
        }
        return Rebuilt(index: PlaceIndex(coordinates: coordinates), areas: areas, kindCodes: kindCodes, kinds: kinds)
    }

    /// VmRSS and VmHWM from /proc/self/status, in MB.
    static func memory() -> (rss: Double, peak: Double) {
        guard let file = fopen("/proc/self/status", "r") else { return (.nan, .nan) }
        defer { fclose(file) }
        var rss = Double.nan
        var peak = Double.nan
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let kilobytes = Double(text.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
            if text.hasPrefix("VmRSS:") { rss = (kilobytes ?? .nan) / 1024 }
            if text.hasPrefix("VmHWM:") { peak = (kilobytes ?? .nan) / 1024 }
        }
        return (rss, peak)
    }

    /// Drops this file's pages from the page cache (it was fsynced, so they are clean): a cold start
    /// without disturbing anything else on the machine.
    static func evictFromPageCache(_ path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw BenchmarkFailure("cannot open \(path)") }
        defer { close(descriptor) }
        _ = posix_fadvise(descriptor, 0, 0, Int32(POSIX_FADV_DONTNEED))
    }

    /// Runs this executable with `arguments` and waits for it.
    static func spawnSelf(_ arguments: [String]) throws {
        let executable = "/proc/self/exe"
        var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let result = posix_spawn(&pid, executable, nil, nil, &argv, environ)
        guard result == 0 else { throw BenchmarkFailure("posix_spawn: \(String(cString: strerror(result)))") }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        guard status == 0 else { throw BenchmarkFailure("measurement child failed (status \(status))") }
    }

    /// Places with everything a real import has: names, kinds, addresses, a third of them areas
    /// with an outline and bounds.
    static func syntheticPlaces(count: Int) -> [Place] {
        let kinds = [
            "amenity=cafe", "amenity=restaurant", "shop=supermarket", "shop=clothes", "amenity=bank",
            "tourism=hotel", "amenity=pharmacy", "leisure=park", "office=company", "building=yes",
            "public_transport=platform", "highway=bus_stop", "amenity=school", "craft=carpenter",
        ]
        var random = SplitMix64(seed: 3)
        return SyntheticCountry.coordinates(count: count, seed: 1).enumerated().map { i, c in
            var place = Place(
                id: "osm:node/\(100_000 + i)", name: "Place number \(i)", kind: kinds[i % kinds.count],
                address: i % 3 == 0 ? "Mannerheimintie \(i % 200), 00100 Helsinki" : nil, coordinate: c)
            if i % 3 == 1 {
                let p = LocalProjection(origin: c)
                let half = random.uniform(in: 5...40)
                let dLat = half / p.metresPerDegreeLatitude
                let dLon = half / p.metresPerDegreeLongitude
                place.id = "osm:way/\(100_000 + i)"
                place.area = 4 * half * half
                place.bounds = BoundingBox(
                    minLatitude: c.latitude - dLat, minLongitude: c.longitude - dLon,
                    maxLatitude: c.latitude + dLat, maxLongitude: c.longitude + dLon)
                place.outline = [
                    Coordinate(latitude: c.latitude - dLat, longitude: c.longitude - dLon),
                    Coordinate(latitude: c.latitude - dLat, longitude: c.longitude + dLon),
                    Coordinate(latitude: c.latitude + dLat, longitude: c.longitude + dLon),
                    Coordinate(latitude: c.latitude + dLat, longitude: c.longitude - dLon),
                    Coordinate(latitude: c.latitude - dLat, longitude: c.longitude - dLon),
                ]
            }
            return place
        }
    }
}
