import CSQLite
import PlacedCore

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
        }
    }
}

/// The places file: one SQLite database, written whole by an import and only read by the daemon.
///
/// Layout (schema version 3):
/// - `places`: one row per place, rowid 1…n **in the spatial index's tree order**, so the index's
///   place numbers are `rowid - 1` and the rows of nearby places share pages. `address_source` says
///   where the address came from (`AddressSource`); `names` holds the `name:<language>` tags
///   (`LocalizedNamesCoding`).
/// - `meta`: `schema_version`, `place_count`, `imported_at` (ISO 8601 UTC), `map_layer` (1 or 0),
///   `map_feature_count`.
/// - `kinds`: the distinct `kind` strings, numbered from 0.
/// - `place_columns`: what start-up needs, as BLOBs, so loading is a few large reads rather than a
///   scan of every row: `index` (`PlaceIndex.serialized()`), `area` (float32 m² per place),
///   `reach` (float32 metres from the point to the farthest bounding-box corner, `Place.reach`; 0 for
///   a point), `kind` (uint32 code per place), all little-endian.
///
/// - `map_features`: the map layer (`MapFeature`), rowid 1…n in Z-order of their centres so that a
///   neighbourhood's rows share pages; `geometry` is `MapGeometryCoding`. `map_bounds`: SQLite's
///   R*Tree (`rtree_i32`, 1e-7 degree, `BoundsCoding`) over their bounding boxes (`id` = the
///   feature's rowid). Both empty without a map layer.
///
/// Version 2 added `reach`, so that start-up need not read every area's row; version 3 the address
/// source, localized names and the map layer. An older file is refused by name and imported again.
///
/// Other tables (selections) can join later under a higher schema version; the places part is
/// replaced as a whole file by `replace(at:with:)`.
public final class PlaceDatabase {
    public static let schemaVersion = 3

    public let path: String
    public let placeCount: Int
    /// When the file was written, ISO 8601 UTC: "2024-05-01T12:00:00Z".
    public let importedAt: String
    /// Whether the file has a map layer (an import without `--no-map`).
    public let hasMapLayer: Bool
    /// Features in the map layer.
    public let mapFeatureCount: Int

    let database: Database
    private var detailStatement: Statement?
    private var idStatement: Statement?
    var boundsStatement: Statement?
    var featureStatement: Statement?

    private init(
        path: String, database: Database, placeCount: Int, importedAt: String, hasMapLayer: Bool,
        mapFeatureCount: Int
    ) {
        self.path = path
        self.database = database
        self.placeCount = placeCount
        self.importedAt = importedAt
        self.hasMapLayer = hasMapLayer
        self.mapFeatureCount = mapFeatureCount
    }

    // MARK: Opening

    /// Opens a place database read-only and checks that it is one: schema version, meta, and that
    /// the rows are numbered as meta says. A missing, foreign, damaged or wrong-version file is a
    /// named error. `load()` then checks every BLOB it reads (sizes, index ids and coordinates,
    /// kind codes); a damaged row elsewhere surfaces as `.corrupt` from `place(at:)`.
    public static func open(path: String) throws(PlaceDatabaseError) -> PlaceDatabase {
        let database: Database
        do {
            database = try Database(path: path, mode: .readOnly)
        } catch {
            if access(path, F_OK) != 0 { throw .missing(path: path) }
            throw classify(error, path: path)
        }
        let version: String?
        do {
            version = try database.meta("schema_version")
        } catch {
            // A database without a meta table is someone else's; NOTADB and CORRUPT keep their names.
            if error.primaryCode == SQLITE_ERROR { throw .unsupportedSchema(path: path, version: nil) }
            throw classify(error, path: path)
        }
        guard version == String(schemaVersion) else {
            throw .unsupportedSchema(path: path, version: version)
        }

        let countText: String?
        let importedAt: String?
        let mapLayer: String?
        let featureCountText: String?
        let last: Int64?
        do {
            countText = try database.meta("place_count")
            importedAt = try database.meta("imported_at")
            mapLayer = try database.meta("map_layer")
            featureCountText = try database.meta("map_feature_count")
            // Rows are numbered 1…n: max(rowid) is one b-tree descent. (A truncated file loses its
            // end first, where the column BLOBs were written last, so `load` catches that.)
            last = try database.scalarInt64("SELECT max(rowid) FROM places")
        } catch {
            throw classify(error, path: path)
        }
        guard let countText, let placeCount = Int(countText), placeCount >= 0 else {
            throw .corrupt(path: path, detail: "meta place_count is missing or not a count")
        }
        guard last ?? 0 == Int64(placeCount) else {
            throw .corrupt(path: path, detail: "meta says \(placeCount) places, the last row is \(last ?? 0)")
        }
        guard mapLayer == "0" || mapLayer == "1", let featureCountText, let featureCount = Int(featureCountText),
            featureCount >= 0, mapLayer == "1" || featureCount == 0
        else {
            throw .corrupt(path: path, detail: "meta map_layer or map_feature_count is missing or wrong")
        }
        return PlaceDatabase(
            path: path, database: database, placeCount: placeCount, importedAt: importedAt ?? "",
            hasMapLayer: mapLayer == "1", mapFeatureCount: featureCount)
    }

    /// Loads what ranking needs in memory: the spatial index and the area and kind columns.
    /// Names, addresses and outlines stay in the file, fetched by `place(at:)` for the few candidates.
    public func load() throws(PlaceDatabaseError) -> PlaceSet {
        do {
            var kinds: [String] = []
            let kindRows = try database.prepare("SELECT code, kind FROM kinds ORDER BY code")
            while try kindRows.step() {
                guard kindRows.int64(at: 0) == Int64(kinds.count), let kind = kindRows.text(at: 1) else {
                    throw PlaceDatabaseError.corrupt(
                        path: path, detail: "kind codes are not 0…\(kinds.count)")
                }
                kinds.append(kind)
            }

            let indexBlob = try openColumn("index")
            let indexBytes = try [UInt8](unsafeUninitializedCapacity: indexBlob.count) {
                buffer, initialized in
                try indexBlob.read(into: UnsafeMutableRawBufferPointer(buffer))
                initialized = buffer.count
            }
            let index: PlaceIndex
            do {
                index = try PlaceIndex(serialized: indexBytes)
            } catch {
                throw PlaceDatabaseError.corrupt(path: path, detail: error.description)
            }
            guard index.count == placeCount, index.isNumberedByPosition else {
                throw PlaceDatabaseError.corrupt(
                    path: path, detail: "index does not match the places table")
            }

            let areas: [Float] = try readArrayColumn("area")
            let reaches: [Float] = try readArrayColumn("reach")
            if let bad = reaches.firstIndex(where: { !($0.isFinite && $0 >= 0) }) {
                throw PlaceDatabaseError.corrupt(path: path, detail: "place \(bad) has reach \(reaches[bad])")
            }
            let kindCodes: [UInt32] = try readArrayColumn("kind")
            if let bad = kindCodes.firstIndex(where: { Int($0) >= kinds.count }) {
                throw PlaceDatabaseError.corrupt(
                    path: path, detail: "place \(bad) has kind code \(kindCodes[bad]) of \(kinds.count)")
            }
            return PlaceSet(
                database: self, index: index, areas: areas, reaches: reaches, kindCodes: kindCodes, kinds: kinds)
        } catch {
            throw Self.lift(error, path: path)
        }
    }

    private func openColumn(_ name: String) throws -> Blob {
        let lookup = try database.prepare("SELECT rowid FROM place_columns WHERE name = ?")
        try lookup.bind(name, at: 1)
        guard try lookup.step() else {
            throw PlaceDatabaseError.corrupt(path: path, detail: "column \(name) missing")
        }
        return try database.openBlob(table: "place_columns", column: "data", rowid: lookup.int64(at: 0))
    }

    /// A little-endian column of one fixed-size number per place.
    private func readArrayColumn<Element: FixedWidthLittleEndian>(_ name: String) throws -> [Element] {
        let blob = try openColumn(name)
        guard blob.count == placeCount * MemoryLayout<Element>.size else {
            throw PlaceDatabaseError.corrupt(
                path: path, detail: "column \(name) is \(blob.count) bytes for \(placeCount) places")
        }
        let values = try [Element](unsafeUninitializedCapacity: placeCount) { buffer, initialized in
            try blob.read(into: UnsafeMutableRawBufferPointer(buffer))
            initialized = placeCount
        }
        #if _endian(big)
            return values.map { Element(littleEndianStorage: $0) }
        #else
            return values
        #endif
    }

    // MARK: Places by number

    /// The full record of place `index` (0-based: rowid - 1).
    public func place(at index: Int) throws(PlaceDatabaseError) -> Place {
        guard index >= 0, index < placeCount else {
            throw .noSuchPlace(index: index, count: placeCount)
        }
        do {
            if detailStatement == nil {
                detailStatement = try database.prepare(
                    """
                    SELECT id, name, kind, address, latitude, longitude, area, min_lat, min_lon, max_lat, max_lon, outline,
                           address_source, names
                    FROM places WHERE rowid = ?
                    """)
            }
            let row = detailStatement!
            defer { row.reset() }
            try row.bind(Int64(index + 1), at: 1)
            guard try row.step() else {
                throw PlaceDatabaseError.corrupt(path: path, detail: "place \(index) missing")
            }
            guard let place = Self.place(from: row) else {
                throw PlaceDatabaseError.corrupt(path: path, detail: "place \(index) has an unknown address source")
            }
            return place
        } catch {
            throw Self.lift(error, path: path)
        }
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
            return try row.step() ? Int(row.int64(at: 0)) - 1 : nil
        } catch {
            throw Self.classify(error, path: path)
        }
    }

    /// The name of place `index` for a reader of `language` ("sv", "sv-FI", "sv_FI.UTF-8"), falling
    /// back to its `name` tag (`Place.name(forLanguage:)`).
    public func name(ofPlace index: Int, language: String?) throws(PlaceDatabaseError) -> String {
        try place(at: index).name(forLanguage: language)
    }

    static func place(from row: Statement) -> Place? {
        var bounds: BoundingBox?
        if !row.isNull(at: 7), !row.isNull(at: 8), !row.isNull(at: 9), !row.isNull(at: 10) {
            bounds = BoundingBox(
                minLatitude: row.double(at: 7), minLongitude: row.double(at: 8),
                maxLatitude: row.double(at: 9), maxLongitude: row.double(at: 10))
        }
        let outline: [Coordinate]? =
            row.isNull(at: 11) ? nil : row.withBlob(at: 11, OutlineCoding.decode)
        guard let source = AddressSource(rawValue: row.text(at: 12) ?? "") else { return nil }
        return Place(
            id: row.text(at: 0) ?? "", name: row.text(at: 1) ?? "", kind: row.text(at: 2) ?? "",
            address: row.text(at: 3),
            coordinate: Coordinate(latitude: row.double(at: 4), longitude: row.double(at: 5)),
            area: row.double(at: 6), bounds: bounds, outline: outline, addressSource: source,
            localizedNames: LocalizedNamesCoding.decode(row.text(at: 13)))
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

/// The loaded form the daemon ranks from: the spatial index plus compact per-place columns, all
/// indexed by place number (`0..<count`, the index's numbering). Everything else about a place is
/// read from the file on demand by `place(at:)`. Holds its database open, so an old file keeps
/// serving after a new one is renamed over it, until this set is released.
public final class PlaceSet {
    public let database: PlaceDatabase
    public let index: PlaceIndex
    /// Area in square metres per place (0 for points).
    public let areas: [Float]
    /// How far each place's footprint reaches from its point, metres (0 for points; `Place.reach`).
    public let reaches: [Float]
    /// Kind code per place; `kinds[code]` is the kind ("amenity=cafe").
    public let kindCodes: [UInt32]
    public let kinds: [String]

    init(
        database: PlaceDatabase, index: PlaceIndex, areas: [Float], reaches: [Float], kindCodes: [UInt32],
        kinds: [String]
    ) {
        self.database = database
        self.index = index
        self.areas = areas
        self.reaches = reaches
        self.kindCodes = kindCodes
        self.kinds = kinds
    }

    public var count: Int { index.count }

    public func kind(of place: Int) -> String { kinds[Int(kindCodes[place])] }

    /// The place's point (rows are in tree order, so its number is its tree position).
    public func coordinate(of place: Int) -> Coordinate { index.entry(atPosition: place).coordinate }

    /// The full record (name, address, outline…), read from the file.
    public func place(at index: Int) throws(PlaceDatabaseError) -> Place {
        try database.place(at: index)
    }

    public func placeIndex(ofID id: String) throws(PlaceDatabaseError) -> Int? {
        try database.placeIndex(ofID: id)
    }

    /// The name of place `index` for a reader of `language`, else its `name` tag.
    public func name(of index: Int, language: String?) throws(PlaceDatabaseError) -> String {
        try database.name(ofPlace: index, language: language)
    }

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
        for entry in text.split(separator: "\u{1E}") {
            let parts = entry.split(separator: "\u{1F}", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2 { names[String(parts[0])] = String(parts[1]) }
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
protocol FixedWidthLittleEndian {
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
    init(littleEndianStorage value: Float) {
        self = Float(bitPattern: UInt32(littleEndian: value.bitPattern))
    }
    var littleEndianStorage: Float { Float(bitPattern: bitPattern.littleEndian) }
}

extension UInt32: FixedWidthLittleEndian {
    init(littleEndianStorage value: UInt32) { self = UInt32(littleEndian: value) }
    var littleEndianStorage: UInt32 { littleEndian }
}

extension Database {
    func meta(_ key: String) throws(SQLiteError) -> String? {
        let statement = try prepare("SELECT value FROM meta WHERE key = ?")
        try statement.bind(key, at: 1)
        return try statement.step() ? statement.text(at: 0) : nil
    }
}
