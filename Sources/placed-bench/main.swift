// placed-bench: the project's benchmarks. Build release, run `placed-bench NAME [options]`.
// Each benchmark prints its figures; `placed-bench all` runs them in turn.
#if canImport(Glibc)
    import Glibc
#endif

/// name → (one-line description, run with the remaining arguments).
let benchmarks: [(name: String, summary: String, run: ([String]) throws -> Void)] = [
    (
        "import", ".osm.pbf import speed (elements/s) with and without the map layer beside osmium export",
        runImportBenchmark
    ),
    (
        "map", "map layer: query around random points, Map reply size, placectl map to SVG and PNG; kB/km²",
        runMapBenchmark
    ),
    (
        "snap",
        "ranker top-1/top-5 vs nearest and HA zone at accuracy 5/15/30 m; time per fix; --hours: the closed factor",
        snapBenchmark
    ),
    ("index", "within-250 m query p50/p99: packed kd-tree beside SQLite R*Tree, 1 M and 5 M places", runIndexBenchmark),
    ("load", "start-up: open + load 1 M places (ms, RSS) in a fresh process", runLoadBenchmark),
    ("json", "JSON encode/parse of a 20-place Watch reply beside Foundation", jsonBenchmark),
    ("visits", "visit detection on generated drives: recall, precision, delay to VisitStarted", visitBenchmark),
    (
        "learn", "learning from picks: picks-to-first, routine month, calibration, time with 10,000 picks",
        learnBenchmark
    ),
    (
        "routine", "time-of-week learning: a month of regular places at regular times and one-off visits",
        routineBenchmark
    ),
    (
        "synthesize", "write a synthetic .osm.pbf (--shape city|countryside --places N --out FILE), for bench/big.py",
        runSynthesize
    ),
    (
        "upgrade-places", "rewrite a places file of the schema before this one in this one (OLD NEW), for bench/big.py",
        runUpgradePlaces
    ),
    (
        "downgrade-places", "write a places file in the schema before this one (NEW OLD), for the upgrade's tests",
        runDowngradePlaces
    ),
    (
        "hours", "opening hours: evaluate lines from stdin (differential tests), or --time: parse/evaluate p50",
        hoursBenchmark
    ),
    ("fleet", "fleet export to mosquitto: markers/s, 100,000-event backlog drain, idle wake-ups", fleetBenchmark),
    (
        "own", "10,000 own places: ranking p50 beside OSM places, import of 10,000 sites, boundary check per fix",
        ownBenchmark
    ),
]

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.isEmpty || arguments[0] == "--help" || arguments[0] == "-h" {
    print("usage: placed-bench NAME [options] | all\n")
    for b in benchmarks { print("  \(b.name.padding(12))\(b.summary)") }
    exit(arguments.isEmpty ? 2 : 0)
}
let selected = arguments[0] == "all" ? benchmarks : benchmarks.filter { $0.name == arguments[0] }
guard !selected.isEmpty else {
    print("placed-bench: unknown benchmark '\(arguments[0])'")
    exit(2)
}
for b in selected {
    do {
        try b.run(Array(arguments.dropFirst()))
    } catch {
        print("placed-bench \(b.name): \(error)")
        exit(1)
    }
}

extension String {
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
