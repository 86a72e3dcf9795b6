import PlacedOSM
import PlacedStore

// placectl import FILE.osm.pbf [--db PATH]: read an OpenStreetMap extract, write the place database.
#if canImport(Glibc)
    import Glibc
#endif

let importUsage = """
    usage: placectl import FILE.osm.pbf [--db PATH]

    Reads the places of an OpenStreetMap extract (.osm.pbf) and replaces the place database
    atomically: a failed import leaves the existing database as it was.

      --db PATH   the database to replace (default \(defaultDatabasePath))
      -h, --help  show this help

    Exit status: 0 imported, 1 error (named on stderr), 2 usage.
    """

let defaultDatabasePath = "/var/lib/placed/places.db"

/// `placectl import`: exit status 0 ok, 1 error, 2 usage.
func runImport(arguments: [String]) -> Int32 {
    var file: String?
    var database = defaultDatabasePath
    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
        switch argument {
        case "-h", "--help":
            print(importUsage)
            return 0
        case "--db":
            guard let value = remaining.popFirst(), !value.isEmpty else {
                return usageError("--db needs a path")
            }
            database = value
        case _ where argument.hasPrefix("--db="):
            database = String(argument.dropFirst("--db=".count))
            guard !database.isEmpty else { return usageError("--db needs a path") }
        case _ where argument.hasPrefix("-") && argument != "-":
            return usageError("unknown option \(argument)")
        default:
            guard file == nil else {
                return usageError("one input file, please (got \(file!) and \(argument))")
            }
            file = argument
        }
    }
    guard let file else { return usageError("no input file") }

    let start = monotonicSeconds()
    let bar = isatty(2) == 1 ? ProgressBar(start: start) : nil
    let extract: PlaceExtract
    do {
        extract = try OSM.extractPlaces(path: file) { bar?.update($0) }
        bar?.show("writing \(extract.places.count.grouped) places to \(database)")
        try PlaceDatabase.replace(at: database, with: extract.places)
    } catch {
        bar?.clear()
        writeToStandardError("placectl import: \(error)\n")
        return 1
    }
    bar?.clear()
    let seconds = monotonicSeconds() - start
    print(
        "imported \(extract.places.count.grouped) places from \(extract.statistics.elements.grouped) elements"
            + " in \(seconds.formatted(decimals: 2)) s → \(database)")
    return 0
}

private func usageError(_ message: String) -> Int32 {
    writeToStandardError("placectl import: \(message)\n\(importUsage)\n")
    return 2
}

/// A one-line progress bar on stderr (only made when stderr is a terminal): share of the file
/// read, elements, rate and ETA, redrawn at most ten times a second.
final class ProgressBar {
    private let start: Double
    private var lastDrawn = -Double.infinity

    init(start: Double) { self.start = start }

    func update(_ progress: ImportProgress) {
        let now = monotonicSeconds()
        guard now - lastDrawn >= 0.1 || progress.fraction >= 1 else { return }
        lastDrawn = now
        let elapsed = max(now - start, 1e-6)
        let width = 24
        let filled = Int(progress.fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let rate = Double(progress.elements) / elapsed
        let eta = progress.fraction > 0 ? elapsed * (1 - progress.fraction) / progress.fraction : 0
        show(
            "[\(bar)] \(Int(progress.fraction * 100))%  \(progress.elements.grouped) elements"
                + "  \(Int(rate).grouped)/s  ETA \(clock(eta))")
    }

    /// Replaces the line with `text` (\r, then erase to the end of the line).
    func show(_ text: String) { writeToStandardError("\r\(text)\u{1B}[K") }

    func clear() { writeToStandardError("\r\u{1B}[K") }

    private func clock(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        let s = total % 60
        return "\(total / 60):\(s < 10 ? "0" : "")\(s)"
    }
}

/// Unbuffered, so the bar and error lines appear at once and in order.
func writeToStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var done = 0
        while done < bytes.count {
            let n = write(2, bytes.baseAddress! + done, bytes.count - done)
            if n > 0 { done += n } else if n < 0 && errno == EINTR { continue } else { return }
        }
    }
}

func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
