import CSQLite
import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Why a place database could not be written or read. Every failure leaves the previous database
/// (and whatever a daemon has loaded from it) as it was.
public enum PlaceDatabaseError: Error, Equatable, CustomStringConvertible {
    /// A place the importer produced is unusable; nothing was written.
    case invalidPlace(id: String, reason: String)
    /// A file-system call failed while writing: `path` names the file or directory concerned.
    case cannotWrite(path: String, operation: String, errno: Int32)
    /// No file at the path.
    case missing(path: String)
    /// The file is not an SQLite database at all.
    case notADatabase(path: String)
    /// An SQLite database, but not a place database of this version (`version` nil: no meta table).
    case unsupportedSchema(path: String, version: String?)
    /// A place database whose content does not hold together (truncated, damaged, inconsistent).
    case corrupt(path: String, detail: String)
    /// `place(at:)` with a number outside `0..<count`.
    case noSuchPlace(index: Int, count: Int)
    /// A map feature the importer produced is unusable; nothing was written.
    case invalidFeature(id: String, reason: String)
    /// `features(within:of:limit:)` on a file imported without its map layer (`placectl import --no-map`).
    case noMapLayer(path: String)
    /// `features(within:of:limit:)` with a radius or limit that is not a finite number >= 0.
    case invalidMapQuery(reason: String)
    /// Any other SQLite failure.
    case sqlite(SQLiteError)
    /// The new file is in place, but its directory could not be synced: a power loss may undo it.
    case replacedWithoutSync(path: String, errno: Int32)

    public var description: String {
        switch self {
        case .invalidPlace(let id, let reason):
            "invalid place \(id.isEmpty ? "(empty id)" : id): \(reason)"
        case .cannotWrite(let path, let operation, let code):
            "cannot write \(path): \(operation): \(String(cString: strerror(code)))"
        case .missing(let path): "no place database at \(path)"
        case .notADatabase(let path): "\(path) is not an SQLite database"
        case .unsupportedSchema(let path, let version):
            "\(path) is not a place database of schema version \(PlaceDatabase.schemaVersion) (found \(version ?? "no meta table"))"
        case .corrupt(let path, let detail): "place database \(path) is damaged: \(detail)"
        case .noSuchPlace(let index, let count): "no place number \(index): there are \(count)"
        case .invalidFeature(let id, let reason): "invalid map feature \(id.isEmpty ? "(empty id)" : id): \(reason)"
        case .noMapLayer(let path): "\(path) has no map layer (it was imported with --no-map)"
        case .invalidMapQuery(let reason): "invalid map query: \(reason)"
        case .sqlite(let error): error.description
        case .replacedWithoutSync(let path, let code):
            "\(path) is replaced, but syncing its directory failed (\(String(cString: strerror(code)))): "
                + "a power loss may bring back the file before it"
        }
    }
}

extension PlaceDatabaseError {
    /// A file-system call on `path` failed.
    static func cannotWrite(path: String, _ error: SystemError) -> Self {
        .cannotWrite(path: path, operation: error.call, errno: error.errno)
    }
}

/// The places file: one file, written whole by an import and only read by the daemon, in two parts —
/// an SQLite database (what tools and SQL read, and the map layer's R*Tree), then the pack
/// (`PlacePack`): the spatial index, the per-place columns and a compact record per place, laid out to
/// be used in place from a read-only mapping.
///
/// The SQLite part comes first, so the file is an ordinary SQLite database to every tool: SQLite reads
/// the number of pages its header states and nothing after them. The pack follows on the next page
/// boundary and a trailer at the very end finds it. The daemon maps the whole file once
/// (`MappedFile`) and opens the SQLite part from that same mapping (`sqlite3_deserialize`, read-only),
/// so both parts are always the same version of the file: one inode, one mapping, and the pack's id
/// must equal meta `pack_id`. A newer import renames a whole new file over the path; the mapping keeps
/// the old one until the catalog is released. Nothing writes to a places file after the rename; a tool
/// that does (sqlite3 growing the database into the pack) is caught by the pack's header, id and
/// trailer checks.
///
/// SQLite part (schema version 6):
/// - `places`: one row per place, rowid 1…n **in the spatial index's tree order**, so the index's
///   place numbers are `rowid - 1`. `address_source` says where the address came from
///   (`AddressSource`); `names` holds the `name:<language>` tags (`LocalizedNamesCoding`). A place's
///   details (`PlaceDetails`) are in the pack's records only: the ~90 bytes of the 70 % of places that have
///   any, written twice, made a Helsinki file 22 % larger instead of 11 %.
/// - `meta`: `schema_version`, `place_count`, `imported_at` (ISO 8601 UTC), `map_layer` (1 or 0),
///   `map_feature_count`, `pack_id` (hex of the pack's 16-byte id).
/// - `kinds`: the distinct `kind` strings, numbered from 0 as the pack numbers them.
/// - `map_features`: the map layer (`MapFeature`), rowid 1…n in the Hilbert order of their centres
///   (`HilbertOrder`; older imports wrote them in Z-order, and no reader relies
///   on the order) so that a neighbourhood's rows share pages; `geometry` is
///   `MapGeometryCoding`. `map_bounds`: SQLite's R*Tree (`rtree_i32`, 1e-7 degree, `BoundsCoding`) over their bounding boxes (`id` = the
///   feature's rowid), written by the import as a packed Hilbert R-tree (`MapBoundsTreeWriter`), which
///   SQLite reads and changes as its own. Both empty without a map layer.
///
/// Version 2 added `reach`; version 3 the address source, localized names and the map layer; version 4
/// the pack, replacing the `place_columns` BLOBs (start-up reads no place at all); version 5 the trees'
/// node blocks in the pack (pack version 2, `PlaceIndex` format 3: a first ranking reads a few pages a
/// tree, not one a level); version 6 the places' details (`PlaceDetails`) in the pack's records. An older
/// file is refused by name; `placectl upgrade` (`PlaceFileUpgrade`) rewrites a
/// schema-4 or schema-5 file in this schema (without details: those need a new import), anything older is
/// imported again.
public final class PlaceDatabase {
    public static let schemaVersion = 6

    public let path: String
    public let placeCount: Int
    /// When the file was written, ISO 8601 UTC: "2024-05-01T12:00:00Z".
    public let importedAt: String
    /// Whether the file has a map layer (an import without `--no-map`).
    public let hasMapLayer: Bool
    /// Features in the map layer.
    public let mapFeatureCount: Int

    let database: Database
    let file: MappedFile
    let pack: PackView
    let index: PlaceIndex
    let areaIndex: ReachIndex
    let kinds: [String]
    private var idStatement: Statement?
    var boundsStatement: Statement?
    var featureStatement: Statement?

    private init(
        path: String, database: Database, file: MappedFile, pack: PackView, importedAt: String, hasMapLayer: Bool,
        mapFeatureCount: Int
    ) throws(PlaceDatabaseError) {
        self.path = path
        self.database = database
        self.file = file
        self.pack = pack
        kinds = try pack.kinds(path: path)
        (index, areaIndex) = try Self.indexes(of: pack, in: file, path: path)
        placeCount = pack.placeCount
        self.importedAt = importedAt
        self.hasMapLayer = hasMapLayer
        self.mapFeatureCount = mapFeatureCount
    }

    /// The file as it was mapped.
    public var identity: FileIdentity { file.identity }

    /// True once the file was found shorter than when it was mapped (something truncated it in place):
    /// reads since then saw zeros, and every query reports `.corrupt` until a new file is loaded.
    public var isDamaged: Bool { file.isDamaged }

    /// The mapping's pages out of this process's RSS (still cached by the kernel).
    func releaseResidentPages() { file.releaseResidentPages() }

    static let sqliteMagic = Array("SQLite format 3\u{0}".utf8)

    // MARK: Opening

    /// Maps a places file read-only and checks that it is one: the SQLite part's schema version and
    /// meta, the pack's header, sections and id. A missing, foreign, damaged or wrong-version file is a
    /// named error. Nothing of the places themselves is read (the checks cost a few pages whatever the
    /// file's size); a damaged record surfaces as `.corrupt` from `place(at:)`.
    public static func open(path: String) throws(PlaceDatabaseError) -> PlaceDatabase {
        let (file, imageSize, database, version) = try mapSQLitePart(path: path)
        let bytes = file.bytes
        guard version == String(schemaVersion) else {
            throw .unsupportedSchema(path: path, version: version)
        }

        let countText: String?
        let importedAt: String?
        let mapLayer: String?
        let featureCountText: String?
        let packID: String?
        do {
            countText = try database.meta("place_count")
            importedAt = try database.meta("imported_at")
            mapLayer = try database.meta("map_layer")
            featureCountText = try database.meta("map_feature_count")
            packID = try database.meta("pack_id")
        } catch {
            throw classify(error, path: path)
        }
        let pack = try PackView(file: bytes, imageSize: imageSize, path: path)
        guard let countText, let placeCount = Int(countText), placeCount >= 0 else {
            throw .corrupt(path: path, detail: "meta place_count is missing or not a count")
        }
        guard placeCount == pack.placeCount else {
            throw .corrupt(path: path, detail: "meta says \(placeCount) places, the pack \(pack.placeCount)")
        }
        guard packID == PlacePack.hex(pack.id) else {
            throw .corrupt(path: path, detail: "the pack is not the one meta pack_id names; import the file again")
        }
        guard mapLayer == "0" || mapLayer == "1", let featureCountText, let featureCount = Int(featureCountText),
            featureCount >= 0, mapLayer == "1" || featureCount == 0
        else {
            throw .corrupt(path: path, detail: "meta map_layer or map_feature_count is missing or wrong")
        }
        return try PlaceDatabase(
            path: path, database: database, file: file, pack: pack, importedAt: importedAt ?? "",
            hasMapLayer: mapLayer == "1", mapFeatureCount: featureCount)
    }

    /// Maps a file and opens its SQLite part from the mapping: the mapping, where the SQLite part ends, the
    /// connection and meta `schema_version`.
    static func mapSQLitePart(path: String) throws(PlaceDatabaseError) -> (
        file: MappedFile, imageSize: Int, database: Database, version: String?
    ) {
        let file: MappedFile
        do {
            file = try MappedFile(path: path)
        } catch {
            if error.errno == ENOENT { throw .missing(path: path) }
            if error.errno == EINVAL { throw .notADatabase(path: path) }
            throw .sqlite(SQLiteError(code: SQLITE_CANTOPEN, message: error.reason, operation: "\(error.call) \(path)"))
        }
        let bytes = file.bytes
        // What every start reads, asked for at once rather than fault by fault (`PlaceFileReadahead`): the
        // head and trailer, then, as soon as the trailer is in, the pack (while SQLite opens).
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        file.advise(PlaceFileReadahead.opening(fileSize: bytes.count, pageSize: page))
        if bytes.count >= PlacePack.trailerSize {
            file.advise(
                PlaceFileReadahead.pack(
                    fileSize: bytes.count,
                    trailer: UnsafeRawBufferPointer(rebasing: bytes.suffix(PlacePack.trailerSize)),
                    pageSize: page))
        }
        guard bytes.count >= 100, bytes.prefix(16).elementsEqual(sqliteMagic) else { throw .notADatabase(path: path) }
        // The SQLite header's page size (1 means 65536) and page count: where the image ends.
        let pageSizeField = Int(UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 16, as: UInt16.self)))
        let pageSize = pageSizeField == 1 ? 65536 : pageSizeField
        let pages = Int(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: 28, as: UInt32.self)))
        let countValid = bytes[24..<28].elementsEqual(bytes[92..<96])
        guard pageSize >= 512, pageSize & (pageSize - 1) == 0, pages > 0, countValid else {
            throw .notADatabase(path: path)
        }
        let imageSize = pages * pageSize
        guard imageSize <= bytes.count else {
            throw .corrupt(
                path: path, detail: "the file is \(bytes.count) bytes, its SQLite part alone should be \(imageSize)")
        }
        let database: Database
        do {
            database = try Database(image: UnsafeRawBufferPointer(rebasing: bytes[0..<imageSize]), name: path)
        } catch {
            throw classify(error, path: path)
        }
        do {
            return (file, imageSize, database, try database.meta("schema_version"))
        } catch {
            // A database without a meta table is someone else's; NOTADB and CORRUPT keep their names.
            if error.primaryCode == SQLITE_ERROR { throw .unsupportedSchema(path: path, version: nil) }
            throw classify(error, path: path)
        }
    }

    /// The pack's two spatial indexes, read in place from `file` and checked (headers and sizes, and that
    /// the points' tree numbers the pack's places by position): what opening a file and upgrading one
    /// both need.
    static func indexes(of pack: PackView, in file: MappedFile, path: String) throws(PlaceDatabaseError) -> (
        points: PlaceIndex, areas: ReachIndex
    ) {
        let points: PlaceIndex
        let areas: ReachIndex
        do {
            points = try PlaceIndex(mapping: pack[.index], owner: file)
        } catch {
            throw .corrupt(path: path, detail: error.description)
        }
        guard points.count == pack.placeCount, points.isNumberedByPosition else {
            throw .corrupt(path: path, detail: "index does not match the places")
        }
        do {
            areas = try ReachIndex(mapping: pack[.areas], owner: file)
        } catch {
            throw .corrupt(path: path, detail: error.description)
        }
        return (points, areas)
    }

    /// What ranking reads, in place in the mapping: the spatial index, the columns, the index of the
    /// areas by reach, and the kinds, all found when the file was opened (headers and sizes only: O(1) in
    /// the places).
    public func load() throws(PlaceDatabaseError) -> PlaceSet { PlaceSet(database: self) }

    // MARK: Places by number

    /// The full record of place `index` (0-based: rowid - 1), decoded from the mapped pack.
    public func place(at index: Int) throws(PlaceDatabaseError) -> Place {
        guard index >= 0, index < placeCount else {
            throw .noSuchPlace(index: index, count: placeCount)
        }
        let codes = pack[.kind]
        let code = Int(UInt32(littleEndian: codes.loadUnaligned(fromByteOffset: 4 * index, as: UInt32.self)))
        guard let record = pack.record(index), var place = Self.decode(record) else {
            throw .corrupt(path: path, detail: "place \(index) does not decode")
        }
        place.kind = code < kinds.count ? kinds[code] : ""
        place.coordinate = self.index.entry(atPosition: index).coordinate
        if file.isDamaged { throw .corrupt(path: path, detail: Self.shrunk) }
        return place
    }

    static let shrunk = "the file was truncated under placed; import it again (placectl import, then placectl refresh)"

    /// A record, with the point and kind left for the caller.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> Place? {
        var reader = RecordReader(bytes)
        guard let flags = reader.byte(), let sourceCode = reader.byte(), Int(sourceCode) < PlacePack.sourceCodes.count,
            let id = reader.text(), let name = reader.text()
        else { return nil }
        var place = Place(
            id: id, name: name, kind: "", coordinate: Coordinate(latitude: 0, longitude: 0),
            addressSource: PlacePack.sourceCodes[Int(sourceCode)])
        if flags & PlacePack.RecordFlag.address != 0 {
            guard let address = reader.text() else { return nil }
            place.address = address
        }
        if flags & PlacePack.RecordFlag.names != 0 {
            guard let names = reader.text() else { return nil }
            place.localizedNames = LocalizedNamesCoding.decode(names)
        }
        if flags & PlacePack.RecordFlag.area != 0 {
            guard let area = reader.double() else { return nil }
            place.area = area
        }
        if flags & PlacePack.RecordFlag.bounds != 0 {
            guard let bounds = reader.bounds() else { return nil }
            place.bounds = bounds
        }
        if flags & PlacePack.RecordFlag.outline != 0 {
            guard let count = reader.varint(), count <= (bytes.count - reader.position) / 16 else { return nil }
            var outline: [Coordinate] = []
            outline.reserveCapacity(count)
            for _ in 0..<count {
                outline.append(Coordinate(latitude: reader.double()!, longitude: reader.double()!))
            }
            place.outline = outline
        }
        if flags & PlacePack.RecordFlag.details != 0 {
            guard let details = reader.text() else { return nil }
            place.details = PlaceDetails(encoded: details)
        }
        return place
    }

    /// The number of the place with a stable id (`osm:node/123`), or nil when there is none.
    public func placeIndex(ofID id: String) throws(PlaceDatabaseError) -> Int? {
        do throws(SQLiteError) {
            if idStatement == nil {
                idStatement = try database.prepare("SELECT rowid FROM places WHERE id = ?")
            }
            let row = idStatement!
            defer { row.reset() }
            try row.bind(id, at: 1)
            let found = try row.step() ? Int(row.int64(at: 0)) - 1 : nil
            if file.isDamaged { throw SQLiteError(code: SQLITE_CORRUPT, message: Self.shrunk, operation: "read") }
            return found.flatMap { $0 >= 0 && $0 < placeCount ? $0 : nil }
        } catch {
            throw Self.classify(error, path: path)
        }
    }

    /// The name of place `index` for a reader of `language` ("sv", "sv-FI", "sv_FI.UTF-8"), falling
    /// back to its `name` tag (`Place.name(forLanguage:)`).
    public func name(ofPlace index: Int, language: String?) throws(PlaceDatabaseError) -> String {
        try place(at: index).name(forLanguage: language)
    }

    /// Funnels the errors of a mixed SQLite/validation block into the one public error type.
    static func lift(_ error: any Error, path: String) -> PlaceDatabaseError {
        switch error {
        case let error as PlaceDatabaseError: error
        case let error as SQLiteError: classify(error, path: path)
        default: preconditionFailure("unexpected error \(error)")
        }
    }

    static func classify(_ error: SQLiteError, path: String) -> PlaceDatabaseError {
        switch error.primaryCode {
        case SQLITE_NOTADB: .notADatabase(path: path)
        case SQLITE_CORRUPT: .corrupt(path: path, detail: error.message)
        default: .sqlite(error)
        }
    }
}

/// What the daemon ranks from, used in place in the file's mapping: the spatial index, the per-place
/// columns, the areas' index by reach, all by place number (`0..<count`, the index's numbering); a
/// place's record is decoded from the mapping on demand by `place(at:)`. Holds its file mapped, so an
/// old file keeps serving after a new one is renamed over it, until this set is released.
public final class PlaceSet {
    public let database: PlaceDatabase
    public let index: PlaceIndex
    /// Area in square metres per place (0 for points), float32.
    public let areas: PackColumn<Float>
    /// How far each place's footprint reaches from its point, metres (0 for points; `Place.reach`).
    public let reaches: PackColumn<Float>
    /// Kind code per place; `kinds[code]` is the kind ("amenity=cafe").
    public let kindCodes: PackColumn<UInt32>
    public let kinds: [String]
    /// The places with an area, by how far they reach (members are place numbers).
    public let areaIndex: ReachIndex

    init(database: PlaceDatabase) {
        self.database = database
        index = database.index
        areaIndex = database.areaIndex
        areas = PackColumn(database.pack[.area], owner: database.file)
        reaches = PackColumn(database.pack[.reach], owner: database.file)
        kindCodes = PackColumn(database.pack[.kind], owner: database.file)
        kinds = database.kinds
    }

    public var count: Int { index.count }

    public func kind(of place: Int) -> String {
        let code = Int(kindCodes[place])
        return code < kinds.count ? kinds[code] : ""
    }

    /// The place's point (place numbers are tree positions).
    public func coordinate(of place: Int) -> Coordinate { index.entry(atPosition: place).coordinate }

    /// The full record (name, address, outline…), decoded from the mapping.
    public func place(at number: Int) throws(PlaceDatabaseError) -> Place {
        try database.place(at: number)
    }

    public func placeIndex(ofID id: String) throws(PlaceDatabaseError) -> Int? {
        try database.placeIndex(ofID: id)
    }

    /// The name of place `index` for a reader of `language`, else its `name` tag.
    public func name(of index: Int, language: String?) throws(PlaceDatabaseError) -> String {
        try place(at: index).name(forLanguage: language)
    }

    /// Whether the file was found truncated under this set (see `PlaceDatabase.isDamaged`).
    public var isDamaged: Bool { database.isDamaged }

    /// The map features within `radius` metres of `center` (`PlaceDatabase.features`).
    public func features(within radius: Double, of center: Coordinate, limit: Int) throws(PlaceDatabaseError)
        -> [MapFeature]
    {
        try database.features(within: radius, of: center, limit: limit)
    }
}

/// `names` column: `language U+001F name` entries joined by U+001E, sorted by language (two control
/// characters no OSM tag holds); NULL for none.
enum LocalizedNamesCoding {
    static func encode(_ names: [String: String]) -> String? {
        names.isEmpty
            ? nil : names.sorted { $0.key < $1.key }.map { "\($0.key)\u{1F}\($0.value)" }.joined(separator: "\u{1E}")
    }

    static func decode(_ text: String?) -> [String: String] {
        guard let text, !text.isEmpty else { return [:] }
        var names: [String: String] = [:]
        // Split on the UTF-8: both separators are controls, each a Character of its own, so the bytes
        // split as the Characters would, without finding the grapheme breaks (most of a `Rank` call's
        // cost where places have many names).
        for entry in text.utf8.split(separator: 0x1E) {
            guard let separator = entry.firstIndex(of: 0x1F) else { continue }
            names[String(decoding: entry[..<separator], as: UTF8.self)] = String(
                decoding: entry[entry.index(after: separator)...], as: UTF8.self)
        }
        return names
    }
}

/// Outline BLOB: little-endian float64 (latitude, longitude) pairs.
enum OutlineCoding {
    static func encode(_ outline: [Coordinate]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16 * outline.count)
        for c in outline {
            withUnsafeBytes(of: c.latitude.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: c.longitude.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) -> [Coordinate] {
        (0..<bytes.count / 16).map { i in
            Coordinate(
                latitude: Double(
                    bitPattern: UInt64(
                        littleEndian: bytes.loadUnaligned(fromByteOffset: 16 * i, as: UInt64.self))),
                longitude: Double(
                    bitPattern: UInt64(
                        littleEndian: bytes.loadUnaligned(fromByteOffset: 16 * i + 8, as: UInt64.self))))
        }
    }
}

/// The fixed-width numbers stored as little-endian columns.
public protocol FixedWidthLittleEndian {
    init(littleEndianStorage: Self)
    var littleEndianStorage: Self { get }
}

extension FixedWidthLittleEndian {
    /// A column as the file stores it: each value's little-endian bytes, end to end.
    static func littleEndianBytes(_ values: [Self]) -> [UInt8] {
        values.map(\.littleEndianStorage).withUnsafeBytes { Array($0) }
    }
}

extension Float: FixedWidthLittleEndian {
    public init(littleEndianStorage value: Float) {
        self = Float(bitPattern: UInt32(littleEndian: value.bitPattern))
    }
    public var littleEndianStorage: Float { Float(bitPattern: bitPattern.littleEndian) }
}

extension UInt32: FixedWidthLittleEndian {
    public init(littleEndianStorage value: UInt32) { self = UInt32(littleEndian: value) }
    public var littleEndianStorage: UInt32 { littleEndian }
}

extension Database {
    func meta(_ key: String) throws(SQLiteError) -> String? {
        let statement = try prepare("SELECT value FROM meta WHERE key = ?")
        try statement.bind(key, at: 1)
        return try statement.step() ? statement.text(at: 0) : nil
    }
}
