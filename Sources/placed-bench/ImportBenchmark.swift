import PlacedCore
import PlacedOSM
import PlacedStore
import PlacedSystem
import PlacedTestSupport

// placed-bench import: .osm.pbf → places and map layer, beside `osmium export` of the same file in the same run.
#if canImport(Glibc)
    import Glibc
#endif

/// `placed-bench import [--runs N] [FILE.osm.pbf ...]`: without files, the Helsinki extract and a
/// synthetic city of 1.5 M nodes (generated once under /tmp, converted by `osmium cat`).
func runImportBenchmark(_ arguments: [String]) throws {
    var runs = 3
    var files: [String] = []
    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
        if argument == "--runs", let value = remaining.popFirst(), let n = Int(value), n > 0 {
            runs = n
        } else {
            files.append(argument)
        }
    }
    if files.isEmpty {
        let helsinki = helsinkiExtractPath()
        guard access(helsinki, R_OK) == 0 else { throw BenchmarkFailure("\(helsinki) is missing") }
        files.append(helsinki)
        files.append(try SyntheticExtract.path(nodes: 1_500_000))
    }
    print(
        "import: best of \(runs) interleaved runs. +map = .osm.pbf → places and map layer → PlaceDatabase.replace"
            + " (placectl import); no-map = the same with --no-map; osmium = `osmium export -f geojsonseq` of the"
            + " same file (it too assembles multipolygons); MB = the places file")
    print(
        "file                        elements  places  features   +map s  no-map s  osmium s   +map el/s"
            + "  no-map el/s  osmium el/s  map/osm  no-map/osm  +map MB  no-map MB")
    let database = "/tmp/placed-bench-import.db"
    let bare = "/tmp/placed-bench-import-no-map.db"
    defer {
        unlink(database)
        unlink(bare)
    }
    var layers: [(file: String, bytes: Int, features: Int, squareKilometres: Double)] = []
    for file in files {
        var withMap = Double.infinity
        var withoutMap = Double.infinity
        var osmium = Double.infinity
        var extract: PlaceExtract?
        for _ in 0..<runs {  // interleaved, so all three see the same machine load
            withMap = min(
                withMap,
                try BenchClock.seconds {
                    extract = try OSM.extractPlaces(path: file)
                    try PlaceDatabase.replace(at: database, with: extract!.places, mapFeatures: extract!.features)
                })
            withoutMap = min(
                withoutMap,
                try BenchClock.seconds {
                    let places = try OSM.extractPlaces(path: file, mapLayer: false)
                    try PlaceDatabase.replace(at: bare, with: places.places)
                })
            osmium = min(osmium, try timeOsmiumExport(file))
        }
        let elements = Double(extract!.statistics.elements)
        func rate(_ seconds: Double) -> String { Int(elements / seconds).description }
        func ratio(_ seconds: Double) -> String { "\((osmium / seconds).formatted(decimals: 2))x" }
        let mapBytes = fileSize(database)
        let bareBytes = fileSize(bare)
        let features = extract!.features ?? []
        print(
            String(file.split(separator: "/").last ?? "").padding(26),
            BenchFormat.pad(String(extract!.statistics.elements), 9),
            BenchFormat.pad(String(extract!.places.count), 7), BenchFormat.pad(String(features.count), 9),
            BenchFormat.pad(withMap.formatted(decimals: 3), 8), BenchFormat.pad(withoutMap.formatted(decimals: 3), 9),
            BenchFormat.pad(osmium.formatted(decimals: 3), 9), BenchFormat.pad(rate(withMap), 11),
            BenchFormat.pad(rate(withoutMap), 12), BenchFormat.pad(rate(osmium), 12),
            BenchFormat.pad(ratio(withMap), 8), BenchFormat.pad(ratio(withoutMap), 11),
            BenchFormat.pad((Double(mapBytes) / 1e6).formatted(decimals: 2), 8),
            BenchFormat.pad((Double(bareBytes) / 1e6).formatted(decimals: 2), 10))
        layers.append(
            (
                String(file.split(separator: "/").last ?? ""), mapBytes - bareBytes, features.count,
                squareKilometres(features.map(\.bounds))
            ))
    }
    for layer in layers {
        print(
            "map layer \(layer.file): \(layer.bytes / 1000) kB for \(layer.features) features over"
                + " \(layer.squareKilometres.formatted(decimals: 2)) km² = "
                + "\((Double(layer.bytes) / 1000 / max(layer.squareKilometres, 1e-9)).formatted(decimals: 0)) kB/km²")
    }
}

/// Bytes in a file; 0 when it cannot be read.
func fileSize(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : 0
}

/// The area of the box around every box, km² (an extract is cut to a box).
func squareKilometres(_ boxes: [BoundingBox]) -> Double {
    guard let first = boxes.first else { return 0 }
    var all = first
    for box in boxes.dropFirst() {
        all.minLatitude = min(all.minLatitude, box.minLatitude)
        all.maxLatitude = max(all.maxLatitude, box.maxLatitude)
        all.minLongitude = min(all.minLongitude, box.minLongitude)
        all.maxLongitude = max(all.maxLongitude, box.maxLongitude)
    }
    let middle = Coordinate(
        latitude: (all.minLatitude + all.maxLatitude) / 2, longitude: (all.minLongitude + all.maxLongitude) / 2)
    let projection = LocalProjection(origin: middle)
    return (all.maxLatitude - all.minLatitude) * projection.metresPerDegreeLatitude
        * (all.maxLongitude - all.minLongitude) * projection.metresPerDegreeLongitude / 1e6
}

/// The Helsinki extract in the repository's data/, found from this source file.
func helsinkiExtractPath(file: String = #filePath) -> String {
    let repository = file.split(separator: "/", omittingEmptySubsequences: false).dropLast(3)
        .joined(separator: "/")
    return "\(repository)/data/helsinki-center.osm.pbf"
}

private func timeOsmiumExport(_ file: String) throws -> Double {
    let output = "/tmp/placed-bench-osmium-export.geojsonseq"
    defer { unlink(output) }
    var status: Int32 = 0
    let elapsed = try BenchClock.seconds {
        status = try spawn(["osmium", "export", file, "-f", "geojsonseq", "-o", output, "--overwrite"])
    }
    guard status == 0 else { throw BenchmarkFailure("osmium export exited with \(status)") }
    return elapsed
}

/// Runs a program from PATH with output discarded; its exit status.
func spawn(_ argv: [String]) throws -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    var cArguments = argv.map { strdup($0) } + [nil]
    defer { cArguments.forEach { free($0) } }
    var pid = pid_t()
    let result = posix_spawnp(&pid, argv[0], &actions, nil, &cArguments, environ)
    guard result == 0 else {
        throw BenchmarkFailure("\(argv[0]): \(String(cString: strerror(result)))")
    }
    var status: Int32 = 0
    try retryingOnInterrupt("waitpid") { waitpid(pid, &status, 0) }
    return status
}

/// A deterministic synthetic city for the benchmark: a grid of nodes around Helsinki, 4 % of them
/// tagged places, closed building rings and open streets over those nodes, and multipolygon
/// relations; written as OPL with metadata (like a real extract) and converted by osmium.
enum SyntheticExtract {
    static func path(nodes: Int) throws -> String {
        let path = "/tmp/placed-bench/synthetic-\(nodes / 1000)k.osm.pbf"
        if access(path, R_OK) == 0 { return path }
        mkdir("/tmp/placed-bench", 0o755)
        let opl = "/tmp/placed-bench/synthetic.opl"
        print("generating \(path) (once)...")
        try write(nodes: nodes, to: opl)
        defer { unlink(opl) }
        guard try spawn(["osmium", "cat", opl, "-o", path, "--overwrite"]) == 0 else {
            throw BenchmarkFailure("osmium cat failed to convert \(opl)")
        }
        return path
    }

    private static let kinds = [
        "amenity=cafe", "amenity=restaurant", "shop=bakery", "shop=clothes", "tourism=hotel",
        "office=company",
        "amenity=bench", "highway=bus_stop", "historic=memorial", "leisure=park",
    ]

    private static func write(nodes: Int, to path: String) throws {
        guard let file = fopen(path, "w") else { throw BenchmarkFailure("cannot write \(path)") }
        defer { fclose(file) }
        var random = SplitMix64(seed: 42)
        let meta = "v1 dV c1 t2020-01-01T00:00:00Z i1 umapper"
        let columns = 1000
        func emit(_ line: String) { fputs(line, file) }
        for id in 1...nodes {
            let row = (id - 1) / columns
            let column = (id - 1) % columns
            let lat = 60.1 + Double(row) * 0.0001 + Double(random.next() % 50) * 1e-6
            let lon = 24.8 + Double(column) * 0.0002 + Double(random.next() % 50) * 1e-6
            var tags = ""
            if random.next() % 25 == 0 {
                tags = "name=Place%20%\(id)," + kinds[Int(random.next() % UInt64(kinds.count))]
            } else if random.next() % 10 == 0 {
                tags = "created_by=synthetic"
            }
            emit(
                "n\(id) \(meta) T\(tags) x\(lon.formatted(decimals: 7)) y\(lat.formatted(decimals: 7))\n")
        }
        // Ways over grid cells: closed 4-node rings (buildings, some named) and open 8-node streets.
        let ways = nodes / 15
        for id in 1...ways {
            let cell = Int(random.next() % UInt64(nodes - 10 * columns))
            let refs: [Int]
            var tags: String
            if id % 5 < 3 {
                let a = cell + 1
                let b = a + 1
                let c = b + columns
                let d = a + columns
                refs = [a, b, c, d, a]
                tags = "building=yes"
                if id % 7 == 0 { tags += ",name=Building%20%\(id)" }
                if id % 31 == 0 { tags += ",shop=supermarket,addr:street=Katu,addr:housenumber=\(id % 90)" }
            } else {
                refs = (0..<8).map { cell + 1 + $0 }
                tags = "highway=residential,name=Street%20%\(id)"
            }
            emit("w\(id) \(meta) T\(tags) N\(refs.map { "n\($0)" }.joined(separator: ","))\n")
        }
        for id in 1...(ways / 30) {
            let way = 1 + Int(random.next() % UInt64(ways))
            emit("r\(id) \(meta) Ttype=multipolygon,landuse=grass Mw\(way)@outer\n")
        }
    }
}
