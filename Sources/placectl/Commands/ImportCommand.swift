import PlacectlKit
import PlacedCore
import PlacedOSM
import PlacedStore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// `placectl import FILE.osm.pbf [--db PATH]`: read an OpenStreetMap extract, write the place database.
enum ImportCommand: Command {
    static let defaultDatabasePath = "/var/lib/placed/places.db"

    static let spec = CommandSpec(
        name: "import",
        abstract: "replace the place database with the places of an OpenStreetMap extract",
        synopsis: "FILE.osm.pbf [--db PATH]",
        discussion: """
            Reads the places of an OpenStreetMap extract (.osm.pbf) and replaces the place database
            atomically: a failed import leaves the existing database as it was. placed loads the new
            places on 'placectl refresh' (or SIGHUP).
            """,
        positionals: [Positional("FILE.osm.pbf", help: "the extract to read")],
        options: [.value("db", "PATH", help: "the database to replace (default \(defaultDatabasePath))")],
        epilogue: "Exit status: 0 imported, 1 error (named on stderr), 2 usage.")

    static func run(_ context: Context) throws {
        let file = context.arguments.positionals[0]
        let database = context.arguments.value("db") ?? defaultDatabasePath
        guard !database.isEmpty else { throw UsageError("--db needs a path", command: spec.qualifiedName) }

        let start = monotonicSeconds()
        let bar = isatty(2) == 1 ? ProgressBar(start: start) : nil
        let extract: PlaceExtract
        do {
            extract = try OSM.extractPlaces(path: file) { bar?.update($0) }
            bar?.show("writing \(extract.places.count.grouped) places to \(database)")
            try PlaceDatabase.replace(at: database, with: extract.places)
        } catch {
            bar?.clear()
            throw CommandFailure(command: spec.qualifiedName, message: "\(error)")
        }
        bar?.clear()
        let seconds = monotonicSeconds() - start
        print(
            "imported \(extract.places.count.grouped) places from "
                + "\(extract.statistics.elements.grouped) elements in \(seconds.formatted(decimals: 2)) s → \(database)"
        )
    }
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
    func show(_ text: String) { writeAll(2, "\r\(text)\u{1B}[K") }

    func clear() { writeAll(2, "\r\u{1B}[K") }

    private func clock(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        let s = total % 60
        return "\(total / 60):\(s < 10 ? "0" : "")\(s)"
    }
}

func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
