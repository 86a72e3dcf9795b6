// What every benchmark shares: the clock, percentiles, column padding, the errors, and places in a file.
import PlacedCore
import PlacedStore

#if canImport(Glibc)
    import Glibc
#endif

/// Places written to a places file in /tmp and opened as the daemon opens them, so a benchmark
/// ranks through the daemon's own path (`PlaceCatalog.rank`). The file is removed when this ends.
final class BenchCatalog {
    let path: String
    let catalog: PlaceCatalog

    init(_ places: [Place], name: String) throws {
        path = "/tmp/placed-bench-\(name)-\(getpid()).db"
        try PlaceDatabase.replace(at: path, with: places)
        catalog = try PlaceCatalog(path: path)
    }

    deinit {
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
    }
}

/// p50 and p99 of a set of timings.
struct Percentiles {
    let p50: Double
    let p99: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        func at(_ q: Double) -> Double {
            sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(q * Double(sorted.count)))]
        }
        p50 = at(0.50)
        p99 = at(0.99)
    }
}

enum BenchClock {
    static func now() -> timespec {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return t
    }

    static func seconds(since start: timespec) -> Double {
        let t = now()
        return Double(t.tv_sec - start.tv_sec) + Double(t.tv_nsec - start.tv_nsec) / 1e9
    }

    static func microseconds(since start: timespec) -> Double { seconds(since: start) * 1e6 }

    /// Seconds `body` takes.
    static func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = now()
        try body()
        return seconds(since: start)
    }
}

enum BenchFormat {
    static func column(_ value: Int, _ width: Int) -> String { pad(String(value), width) }

    static func column(_ value: Double, _ width: Int, decimals: Int) -> String {
        pad(value.formatted(decimals: decimals), width)
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }
}

struct BenchmarkUsage: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = "usage: \(description)" }
}

/// A benchmark that could not run or measure: its reason is printed and placed-bench exits 1.
struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
