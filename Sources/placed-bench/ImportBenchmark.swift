import PlacedCore
import PlacedOSM
import PlacedStore
import PlacedTestSupport

// placed-bench import: .osm.pbf → places, beside `osmium export` of the same file in the same run.
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
        if access(helsinki, R_OK) == 0 {
            files.append(helsinki)
        } else {
            print("(no \(helsinki): skipped)")
        }
        files.append(try SyntheticExtract.path(nodes: 1_500_000))
    }
    print(
        "import: best of \(runs) interleaved runs. read = .osm.pbf → [Place]; +db = read and"
            + " PlaceDatabase.replace; osmium = `osmium export -f geojsonseq` of the same file")
    print(
        "file                        elements  places   read s  +db s  osmium s   read el/s   +db el/s"
            + "  osmium el/s  read/osm  +db/osm")
    let database = "/tmp/placed-bench-import.db"
    defer { unlink(database) }
    for file in files {
        var read = Double.infinity
        var withDatabase = Double.infinity
        var osmium = Double.infinity
        var extract: PlaceExtract?
        for _ in 0..<runs {  // interleaved, so all three see the same machine load
            let start = BenchClock.now()
            extract = try OSM.extractPlaces(path: file)
            read = min(read, BenchClock.seconds(since: start))
            try PlaceDatabase.replace(at: database, with: extract!.places)
            withDatabase = min(withDatabase, BenchClock.seconds(since: start))
            osmium = min(osmium, try timeOsmiumExport(file))
        }
        let elements = Double(extract!.statistics.elements)
        func rate(_ seconds: Double) -> String { Int(elements / seconds).description }
        func ratio(_ seconds: Double) -> String { "\((osmium / seconds).formatted(decimals: 2))x" }
        print(
            String(file.split(separator: "/").last ?? "").padding(26),
            BenchFormat.pad(String(extract!.statistics.elements), 9),
            BenchFormat.pad(String(extract!.places.count), 7),
            BenchFormat.pad(read.formatted(decimals: 3), 8),
            BenchFormat.pad(withDatabase.formatted(decimals: 3), 6),
            BenchFormat.pad(osmium.formatted(decimals: 3), 9), BenchFormat.pad(rate(read), 11),
            BenchFormat.pad(rate(withDatabase), 10), BenchFormat.pad(rate(osmium), 12), BenchFormat.pad(ratio(read), 9),
            BenchFormat.pad(ratio(withDatabase), 8))
    }
}

/// The Helsinki extract, found from this source file: <repo>/data, else <repo>/../shared/data.
func helsinkiExtractPath(file: String = #filePath) -> String {
    let repository = file.split(separator: "/", omittingEmptySubsequences: false).dropLast(3)
        .joined(separator: "/")
    let candidates = ["data", "../shared/data"].map { "\(repository)/\($0)/helsinki-center.osm.pbf" }
    return candidates.first { access($0, R_OK) == 0 } ?? candidates[1]
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
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
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
