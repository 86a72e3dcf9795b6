import Foundation
import PlacedCore
import Testing

/// Shared inputs and tools for the OSM tests.
enum Fixtures {
    /// The Helsinki extract in the repository's data/, found from this file's path. It is part of
    /// the repository: a test reading it fails, not skips, when it is missing.
    static let helsinki: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("data/helsinki-center.osm.pbf").standardized.path

    static let osmium = ["/usr/bin/osmium", "/usr/local/bin/osmium"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    /// A fresh directory, removed by the caller (`defer { try? FileManager.default.removeItem(...) }`).
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "placed-osm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Runs osmium; throws with its stderr on failure.
    static func runOsmium(_ arguments: [String]) throws {
        guard let osmium else { throw FixtureError("osmium-tool is not installed") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: osmium)
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw FixtureError(
                "osmium \(arguments.joined(separator: " ")): \(String(decoding: message, as: UTF8.self))")
        }
    }

    /// Converts OPL text (osmium's line format) to a .osm.pbf file; `options` are osmium's PBF
    /// output options, e.g. `pbf_compression=none`, `pbf_dense_nodes=false`.
    static func pbf(
        fromOPL opl: String, in directory: URL, name: String = "test", options: [String] = []
    )
        throws -> String
    {
        let source = directory.appendingPathComponent("\(name).opl")
        try opl.write(to: source, atomically: true, encoding: .utf8)
        let output = directory.appendingPathComponent("\(name).osm.pbf").path
        let format = (["pbf"] + options).joined(separator: ",")
        try runOsmium(["cat", source.path, "-o", output, "-f", format, "--overwrite"])
        return output
    }
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Whether a point is inside a ring: ray casting with the even-odd rule (independent of Shape).
func ringContains(_ ring: [Coordinate], _ p: Coordinate) -> Bool {
    var inside = false
    var j = ring.count - 1
    for i in ring.indices {
        let a = ring[i]
        let b = ring[j]
        if (a.latitude > p.latitude) != (b.latitude > p.latitude),
            p.longitude < (b.longitude - a.longitude) * (p.latitude - a.latitude)
                / (b.latitude - a.latitude)
                + a.longitude
        {
            inside.toggle()
        }
        j = i
    }
    return inside
}
