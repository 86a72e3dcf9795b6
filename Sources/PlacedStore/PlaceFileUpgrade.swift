import CSQLite
import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Rewrites a places file of an older schema (4: no node blocks; 5: no details) in this schema without
/// importing it again: the SQLite part as it was but for meta `schema_version`, the pack's id, columns,
/// records and kinds byte for byte, and the two spatial indexes (the points' kd-tree, the areas' reach
/// index) written again in this format, at the offsets an import puts them. The places and every answer
/// stay the same; the places have no details (`PlaceDetails`) until the next import, as the older file
/// kept none. A device's file is upgraded in place by `placectl upgrade` (the package's postinst runs
/// it), the benchmarks' big files by `placed-bench upgrade-places`. A file of this schema is rewritten the
/// same way (its pack comes out byte for byte as it was).
///
/// The new file is written beside the target, synced, given the old file's mode and owner and renamed
/// over it, and the directory synced: a reader sees the old file or the new one, a daemon keeps the one
/// it mapped until it refreshes, and a failure leaves the old file as it was and nothing beside it.
public enum PlaceFileUpgrade {
    /// The schemas this upgrade rewrites: the two before `PlaceDatabase.schemaVersion`.
    public static let upgradableSchemas: Set<String> = ["4", "5"]

    /// What `upgrade(inPlace:)` did.
    public enum Outcome: Equatable, Sendable {
        /// The file was of schema `from` and is of this schema now.
        case upgraded(from: String)
        /// The file was of this schema already (and opens as one); nothing was written.
        case alreadyCurrent
    }

    /// Upgrades the places file at `path` to this schema where it is of the one before; leaves a file of
    /// this schema alone. Any other file (missing, foreign, damaged, of another schema) is a named error
    /// and stays as it was.
    public static func upgrade(inPlace path: String) throws(PlaceDatabaseError) -> Outcome {
        let version = try PlaceDatabase.mapSQLitePart(path: path).version
        if version == String(PlaceDatabase.schemaVersion) {
            _ = try PlaceDatabase.open(path: path)  // a damaged file of this schema is named, not passed
            return .alreadyCurrent
        }
        guard let version, upgradableSchemas.contains(version) else {
            throw .unsupportedSchema(path: path, version: version)
        }
        try rewrite(path, to: path)
        return .upgraded(from: version)
    }

    /// The file an upgrade of `target` writes before renaming it into place: this process's own.
    public static func temporaryPath(for target: String) -> String { "\(target).upgrading-\(getpid())" }

    /// Reads `source`, writes `target` through a temporary file in its directory and renames it into place.
    public static func rewrite(_ source: String, to target: String) throws(PlaceDatabaseError) {
        try rewrite(source, to: target, schema: PlaceDatabase.schemaVersion)
    }

    /// Writes `source` as a file of the schema before this one (pack version 1, indexes of format 2), as an
    /// older placed did: what the upgrade's tests start from (`placed-bench downgrade-places`).
    public static func rewriteInPreviousSchema(_ source: String, to target: String) throws(PlaceDatabaseError) {
        try rewrite(source, to: target, schema: 4)
    }

    static func rewrite(_ source: String, to target: String, schema: Int) throws(PlaceDatabaseError) {
        precondition((4...PlaceDatabase.schemaVersion).contains(schema), "PlaceFileUpgrade: schema \(schema)")
        // Schema 5 and this one share the pack's layout (pack version 2); 6 only added records' details.
        let current = schema >= 5
        let (file, imageSize, database, version) = try PlaceDatabase.mapSQLitePart(path: source)
        guard let version, upgradableSchemas.contains(version) || version == String(PlaceDatabase.schemaVersion)
        else {
            throw .unsupportedSchema(path: source, version: version)
        }
        let packID: String?
        let countText: String?
        do {
            packID = try database.meta("pack_id")
            countText = try database.meta("place_count")
        } catch {
            throw PlaceDatabase.classify(error, path: source)
        }
        withExtendedLifetime(database) {}
        file.expectSequentialReads()
        let pack = try PackView(file: file.bytes, imageSize: imageSize, path: source, versions: 1...PlacePack.version)
        guard packID == PlacePack.hex(pack.id), countText == String(pack.placeCount) else {
            throw .corrupt(path: source, detail: "the pack is not the one meta pack_id and place_count name")
        }
        let (index, areas) = try PlaceDatabase.indexes(of: pack, in: file, path: source)
        let temporary = temporaryPath(for: target)
        unlink(temporary)
        PlaceDatabase.removeAbandonedTemporaries(of: target, marker: ".upgrading-")
        var renamed = false
        defer { if !renamed { unlink(temporary) } }  // nothing half-written is left behind
        try writeSQLitePart(UnsafeRawBufferPointer(rebasing: file.bytes[0..<imageSize]), to: temporary, schema: schema)
        let descriptor = try PlaceDatabase.reopenOwnFile(temporary)
        defer { Glibc.close(descriptor) }
        var status = stat()
        do {
            try checkPOSIX(fstat(descriptor, &status), "fstat")
        } catch {
            throw .cannotWrite(path: temporary, error)
        }
        let start = (Int(status.st_size) + PlacePack.alignment - 1) / PlacePack.alignment * PlacePack.alignment
        var writer = FileWriter(descriptor: descriptor, path: temporary, offset: start)
        try writer.append(zeros: PlacePack.headerSize)
        var sections: [(offset: Int, length: Int)] = []
        func begin(alignment: Int) throws(PlaceDatabaseError) -> Int {
            try writer.pad(to: alignment)
            return writer.offset - start
        }
        // The index, as the import streams it.
        let indexStart = try begin(alignment: 64)
        if current {
            do {
                try index.serializeNumberedByPosition { (chunk) throws in try writer.append(Array(chunk)) }
            } catch {
                throw error as? PlaceDatabaseError ?? .cannotWrite(path: temporary, operation: "write", errno: EIO)
            }
        } else {
            try writer.append(index.serialized(formatVersion: 2))
        }
        sections.append((indexStart, writer.offset - start - indexStart))
        // The columns, records and kinds as they were, each 64-aligned as the import lays them out.
        for section in [PlacePack.Section.area, .reach, .kind, .recordStarts, .records, .kinds] {
            let bytes = pack[section]
            let offset = try begin(alignment: 64)
            var at = 0
            while at < bytes.count {
                let end = min(bytes.count, at + (1 << 20))
                try writer.append(Array(bytes[at..<end]))
                at = end
            }
            sections.append((offset, bytes.count))
        }
        let areasBytes = current ? areas.serialized() : areas.serialized(indexFormat: 2)
        let areasStart = try begin(alignment: current ? PlacePack.alignment : 64)
        try writer.append(areasBytes)
        sections.append((areasStart, areasBytes.count))
        try writer.pad(to: 8)
        let length = writer.offset - start
        try writer.append(PlacePack.trailerMagic)
        try writer.append(UInt64(start))
        try writer.append(UInt64(length))
        try writer.append(Array(pack.id.prefix(8)))
        try writer.flush()

        var header = [UInt8](repeating: 0, count: PlacePack.headerSize)
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { for (i, byte) in $0.enumerated() { header[offset + i] = byte } }
        }
        header.replaceSubrange(0..<8, with: PlacePack.magic)
        put(current ? PlacePack.version : 1, at: 8)
        header.replaceSubrange(16..<32, with: pack.id)
        put(UInt64(pack.placeCount), at: 32)
        put(UInt32(sections.count), at: 40)
        for (i, entry) in sections.enumerated() {
            put(UInt64(entry.offset), at: 48 + 16 * i)
            put(UInt64(entry.length), at: 56 + 16 * i)
        }
        var headerWriter = FileWriter(descriptor: descriptor, path: temporary, offset: start)
        try headerWriter.append(header)
        try headerWriter.flush()
        do {
            try PlaceDatabase.install(temporary, descriptor: descriptor, over: target)
            renamed = true
        } catch {
            if case .replacedWithoutSync = error { renamed = true }
            throw error
        }
    }

    /// The SQLite part's bytes as a database file of its own, its meta `schema_version` raised to this one.
    private static func writeSQLitePart(_ image: UnsafeRawBufferPointer, to path: String, schema: Int)
        throws(PlaceDatabaseError)
    {
        let descriptor: Int32
        do {
            descriptor = try checkPOSIX(Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644), "create")
        } catch {
            throw .cannotWrite(path: path, error)
        }
        var writer = FileWriter(descriptor: descriptor, path: path, offset: 0)
        var at = 0
        while at < image.count {
            let end = min(image.count, at + (1 << 20))
            try writer.append(Array(image[at..<end]))
            at = end
        }
        try writer.flush()
        Glibc.close(descriptor)
        do {
            let database = try Database(path: path, mode: .readWrite)
            try database.execute(
                "UPDATE meta SET value = '\(schema)' WHERE key = 'schema_version'")

        } catch {
            throw PlaceDatabase.lift(error, path: path)
        }
    }
}
