import PlacectlKit
import PlacedCore
import PlacedOSM
import PlacedStore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// `placectl import FILE.osm.pbf [--db PATH] [--no-map]`: read an OpenStreetMap extract, write the
/// place database (places and, unless --no-map, the map layer).
enum ImportCommand: Command {
    static let defaultDatabasePath = "/var/lib/placed/places.db"

    static let spec = CommandSpec(
        name: "import",
        abstract: "replace the place database with the places of an OpenStreetMap extract",
        synopsis: "FILE.osm.pbf [--db PATH] [--no-map] [--memory-limit SIZE]",
        discussion: """
            Reads the places of an OpenStreetMap extract (.osm.pbf), with an address for each where
            one is near, and the map layer 'placectl map' draws (streets, buildings, water, green
            areas), and replaces the place database atomically: a failed import leaves the existing
            database as it was. placed loads the new places on 'placectl refresh' (or SIGHUP).
            Multipolygons whose rings do not close are skipped and named.

            A file that would not fit in --memory-limit (default 512M; K, M, G suffixes) read in
            memory is imported from disk: every node's location goes to a temporary file beside the
            database and the addresses to temporary files by area, so memory is bounded by the limit
            and 20 bytes a place (the places' final sort), not by the nodes or the map layer
            (its features are ordered on disk, a bucket the limit sizes at a time). It is read
            twice (nodes and ways, then the multipolygons' member ways) and must be sorted by
            type, then id, as 'osmium sort' and OpenStreetMap's extracts write it; the progress
            bar names the pass. Its temporary files need free disk beside the database: 8 to 12
            bytes a node for the locations (8 where ids run consecutively), and the addresses,
            places and map features.
            """,
        positionals: [Positional("FILE.osm.pbf", help: "the extract to read")],
        options: [
            .value("db", "PATH", help: "the database to replace (default \(defaultDatabasePath))"),
            .flag("no-map", help: "leave the map layer out (a smaller file; no 'placectl map')"),
            .value(
                "memory-limit", "SIZE",
                help: "import from disk, within about SIZE of memory, unless one read fits in it (default 512M)"),
        ],
        epilogue: "Exit status: 0 imported, 1 error (named on stderr), 2 usage.")

    static func run(_ context: Context) throws {
        let file = context.arguments.positionals[0]
        let database = context.arguments.value("db") ?? defaultDatabasePath
        guard !database.isEmpty else { throw UsageError("--db needs a path", command: spec.qualifiedName) }

        var limit = ImportPasses.defaultLimit
        if let text = context.arguments.value("memory-limit") {
            guard let bytes = parseSize(text) else {
                throw UsageError(
                    "--memory-limit \(text) is not a size (bytes, or a number with K, M or G)",
                    command: spec.qualifiedName)
            }
            limit = bytes
        }

        let start = monotonicSeconds()
        let bar = isatty(2) == 1 ? ProgressBar(start: start) : nil
        let extract: PlaceExtract
        let writer: PlaceFileWriter
        // Ctrl-C during an import of many minutes leaves no file of gigabytes beside the database.
        let temporary = PlaceFileWriter.temporaryPath(for: database)
        RemoveOnInterrupt.add(temporary)
        defer { RemoveOnInterrupt.remove(temporary) }
        do {
            // The places stream to the file's writer as they are made: memory holds a few bytes a place.
            let mapLayer = !context.arguments.has("no-map")
            writer = try PlaceFileWriter(path: database, memoryLimit: limit / 2, mapLayer: mapLayer)
            extract = try OSM.importPlaces(
                path: file, into: writer, mapLayer: mapLayer ? writer : nil,
                passes: .automatic(memoryLimit: limit), scratchDirectory: writer.scratchDirectory
            ) {
                bar?.update($0)
            }
            try writer.finish { step in bar?.show("\(step) → \(database)") }
        } catch {
            bar?.clear()
            throw CommandFailure(command: spec.qualifiedName, message: "\(error)")
        }
        bar?.clear()
        let seconds = monotonicSeconds() - start
        print(
            "imported \(writer.count.grouped) places from "
                + "\(extract.statistics.elements.grouped) elements in \(seconds.formatted(decimals: 2)) s → \(database)"
        )
        print(
            summary(
                of: extract, places: writer.count, mapFeatures: writer.mapFeatureCount, sources: writer.addressSources
            ).joined(separator: "\n"))
    }

    /// "512M" → 536870912; nil for anything but a positive number with an optional K, M or G.
    static func parseSize(_ text: String) -> Int? {
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        var digits = Substring(text)
        var unit = 1
        if let last = text.last?.uppercased().first, let scale = units[last] {
            unit = scale
            digits = digits.dropLast()
        }
        guard let value = Int(digits), value > 0 else { return nil }
        let (bytes, overflow) = value.multipliedReportingOverflow(by: unit)
        return overflow ? nil : bytes
    }

    /// The lines after the first: addresses, the map layer, multipolygons and what was skipped.
    static func summary(of extract: PlaceExtract, places: Int, mapFeatures: Int?, sources: [AddressSource: Int])
        -> [String]
    {
        let count = max(places, 1)
        func share(_ n: Int) -> String { "\((100 * Double(n) / Double(count)).formatted(decimals: 1)) %" }
        let withAddress = places - (sources[.none] ?? 0)
        var lines = [
            "addresses: \(share(withAddress)) of places ("
                + AddressSource.allCases.filter { $0 != .none }.map { "\($0.rawValue) \(share(sources[$0] ?? 0))" }
                .joined(separator: ", ") + ")",
            "map layer: "
                + (mapFeatures.map { "\($0.grouped) features" } ?? "left out (--no-map)"),
        ]
        let skipped = extract.statistics.skippedRelations
        var multipolygons = "multipolygons: \(extract.statistics.multipolygons.grouped) assembled"
        if !skipped.isEmpty {
            multipolygons += ", \(skipped.count.grouped) skipped (incomplete or rings do not close):"
        }
        lines.append(multipolygons)
        lines += skipped.map { "  \($0)" }
        let details = extract.statistics.details
        lines.append(
            "details: \(share(details.placesWithDetails)) of places; opening_hours: \(details.openingHours.grouped), "
                + "\(details.unparsedOpeningHours.grouped) not understood (kept raw, open_now unknown)"
                + (details.unparsed.isEmpty ? "" : ", e.g.:"))
        lines += details.unparsed.map { "  \($0)" }
        if details.droppedValues > 0 {
            lines.append(
                "details dropped as longer than \(PlaceDetails.maximumValueLength) bytes: "
                    + "\(details.droppedValues.grouped), e.g.:")
            lines += details.dropped.map { "  \($0)" }
        }
        return lines
    }
}

/// A one-line progress bar on stderr (only made when stderr is a terminal): share of the file
/// read, elements, rate and ETA, redrawn at most ten times a second.
final class ProgressBar {
    private let start: Double
    private var lastDrawn = -Double.infinity
    private var lastPass = 0

    init(start: Double) { self.start = start }

    func update(_ progress: ImportProgress) {
        let now = monotonicSeconds()
        guard now - lastDrawn >= 0.1 || progress.fraction >= 1 || progress.pass != lastPass else { return }
        lastPass = progress.pass
        lastDrawn = now
        let elapsed = max(now - start, 1e-6)
        let width = 24
        let filled = Int(progress.fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let rate = Double(progress.elements) / elapsed
        let eta = progress.fraction > 0 ? elapsed * (1 - progress.fraction) / progress.fraction : 0
        let pass = progress.passes > 1 ? "pass \(progress.pass)/\(progress.passes) \(progress.passName) " : ""
        show(
            "\(pass)[\(bar)] \(Int(progress.fraction * 100))%  \(progress.elements.grouped) elements"
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
