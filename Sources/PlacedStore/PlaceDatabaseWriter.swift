import CSQLite
import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

extension PlaceDatabase {
    /// Replaces the database at `path` with one holding exactly `places` and, unless it is nil, the
    /// map layer `mapFeatures`, atomically.
    ///
    /// The new database is written whole at `path.new-<pid>`, synced, renamed over `path` and the
    /// directory synced: a reader sees the old file or the new one, never a mix, and a crash at any
    /// point leaves one of the two. On any failure before the rename the temporary file is removed
    /// and the old database is untouched. A running daemon keeps its old file open until it
    /// reloads, so it is not disturbed either.
    public static func replace(at path: String, with places: [Place], mapFeatures: [MapFeature]? = nil)
        throws(PlaceDatabaseError)
    {
        try validate(places)
        try validate(mapFeatures ?? [])
        let temporaryPath = "\(path).new-\(getpid())"
        // A leftover of this same pid is ours by name (a crash before it could clean up).
        unlink(temporaryPath)
        let descriptor = Glibc.open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw .cannotWrite(path: temporaryPath, operation: "create", errno: errno)
        }
        var renamed = false
        defer {
            close(descriptor)
            if !renamed { unlink(temporaryPath) }
        }

        let id = PlacePack.newID()
        let ordered = try write(places, mapFeatures: mapFeatures, packID: id, toEmptyFile: temporaryPath)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw .cannotWrite(path: temporaryPath, operation: "fstat", errno: errno)
        }
        try PlacePack.append(
            places: ordered.places, index: ordered.index, kinds: ordered.kinds, kindCodes: ordered.kindCodes, id: id,
            to: descriptor, path: temporaryPath, imageSize: Int(status.st_size))
        // SQLite wrote with synchronous=OFF; one fsync of the finished file is all the durability needed.
        guard fsync(descriptor) == 0 else {
            throw .cannotWrite(path: temporaryPath, operation: "fsync", errno: errno)
        }
        // The pages written are clean now: out of the page cache, so that the daemon's mapping reads them
        // back page by page as queries touch them (small pages, each counted once in its RSS) instead of
        // in the large folios the writes left.
        _ = posix_fadvise(descriptor, 0, 0, Int32(POSIX_FADV_DONTNEED))
        guard rename(temporaryPath, path) == 0 else {
            throw .cannotWrite(path: path, operation: "rename", errno: errno)
        }
        renamed = true
        // Makes the rename itself durable. Should this fail, the new file is already in place.
        let directory = directoryName(of: path)
        let directoryDescriptor = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryDescriptor >= 0 else {
            throw .cannotWrite(path: directory, operation: "open directory", errno: errno)
        }
        defer { close(directoryDescriptor) }
        guard fsync(directoryDescriptor) == 0 else {
            throw .cannotWrite(path: directory, operation: "fsync directory", errno: errno)
        }
    }

    /// Bad input changes nothing: every place is checked before a file is created.
    static func validate(_ places: [Place]) throws(PlaceDatabaseError) {
        guard places.count < Int(Int32.max) else {
            throw .invalidPlace(id: "", reason: "\(places.count) places are more than a database holds")
        }
        for place in places {
            guard !place.id.isEmpty else {
                throw .invalidPlace(id: "", reason: "empty id (name \"\(place.name)\")")
            }
            guard place.coordinate.isValid else {
                throw .invalidPlace(
                    id: place.id, reason: "coordinate \(place.coordinate) is not a valid position")
            }
            guard place.area.isFinite, place.area >= 0 else {
                throw .invalidPlace(
                    id: place.id, reason: "area \(place.area) is not a finite non-negative number")
            }
            if let b = place.bounds {
                let corners = [
                    Coordinate(latitude: b.minLatitude, longitude: b.minLongitude),
                    Coordinate(latitude: b.maxLatitude, longitude: b.maxLongitude),
                ]
                guard corners.allSatisfy(\.isValid), b.minLatitude <= b.maxLatitude,
                    b.minLongitude <= b.maxLongitude
                else { throw .invalidPlace(id: place.id, reason: "bounding box is not valid") }
            }
            if let outline = place.outline, !outline.allSatisfy(\.isValid) {
                throw .invalidPlace(id: place.id, reason: "outline has an invalid coordinate")
            }
            if place.localizedNames.keys.contains(where: { $0.isEmpty || $0.contains(where: \.isNamesSeparator) })
                || place.localizedNames.values.contains(where: { $0.contains(where: \.isNamesSeparator) })
            {
                throw .invalidPlace(id: place.id, reason: "a localized name holds U+001E or U+001F, or has no language")
            }
        }
    }

    /// The places in tree order with what the pack needs beside them.
    struct Ordered {
        var places: [Place]
        var index: PlaceIndex
        var kinds: [String]
        var kindCodes: [UInt32]
    }

    /// Writes the SQLite part and returns the places in tree order for the pack. The connection is
    /// closed on return, so the file holds the whole image.
    private static func write(
        _ places: [Place], mapFeatures: [MapFeature]?, packID: [UInt8], toEmptyFile path: String
    ) throws(PlaceDatabaseError) -> Ordered {
        do {
            let database = try Database(path: path, mode: .readWrite)
            // A fresh private file that is renamed only once complete: no journal, no syncs, no locks
            // to share. A big page cache keeps the id index's b-tree in memory while it grows.
            try database.execute(
                """
                PRAGMA journal_mode = OFF;
                PRAGMA synchronous = OFF;
                PRAGMA locking_mode = EXCLUSIVE;
                PRAGMA cache_size = -65536;
                CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE places(
                    rowid INTEGER PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    name TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    address TEXT,
                    latitude REAL NOT NULL,
                    longitude REAL NOT NULL,
                    area REAL NOT NULL DEFAULT 0,
                    min_lat REAL, min_lon REAL, max_lat REAL, max_lon REAL,
                    outline BLOB,
                    address_source TEXT NOT NULL,
                    names TEXT);
                CREATE TABLE kinds(code INTEGER PRIMARY KEY, kind TEXT NOT NULL UNIQUE);
                CREATE TABLE map_features(
                    rowid INTEGER PRIMARY KEY,
                    id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    class TEXT NOT NULL,
                    name TEXT,
                    names TEXT,
                    geometry BLOB NOT NULL);
                CREATE VIRTUAL TABLE map_bounds USING rtree_i32(id, min_lat, max_lat, min_lon, max_lon);
                """)
            // Rows in tree order: place number == tree position == rowid - 1.
            let (index, order) = PlaceIndex(coordinates: places.map(\.coordinate)).renumberedByPosition()

            return try database.transaction {
                let insert = try database.prepare(
                    """
                    INSERT INTO places(rowid, id, name, kind, address, latitude, longitude, area,
                                       min_lat, min_lon, max_lat, max_lon, outline, address_source, names)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
                var kindCodes: [String: UInt32] = [:]
                var kinds: [UInt32] = []
                var ordered: [Place] = []
                kinds.reserveCapacity(places.count)
                ordered.reserveCapacity(places.count)
                for (number, original) in order.enumerated() {
                    let place = places[Int(original)]
                    ordered.append(place)
                    try insert.bind(Int64(number + 1), at: 1)
                    try insert.bind(place.id, at: 2)
                    try insert.bind(place.name, at: 3)
                    try insert.bind(place.kind, at: 4)
                    try insert.bind(place.address, at: 5)
                    try insert.bind(place.coordinate.latitude, at: 6)
                    try insert.bind(place.coordinate.longitude, at: 7)
                    try insert.bind(place.area, at: 8)
                    try insert.bind(place.bounds?.minLatitude, at: 9)
                    try insert.bind(place.bounds?.minLongitude, at: 10)
                    try insert.bind(place.bounds?.maxLatitude, at: 11)
                    try insert.bind(place.bounds?.maxLongitude, at: 12)
                    if let outline = place.outline, !outline.isEmpty {
                        try insert.bind(blob: OutlineCoding.encode(outline), at: 13)
                    } else {
                        try insert.bindNull(at: 13)
                    }
                    try insert.bind(place.addressSource.rawValue, at: 14)
                    try insert.bind(LocalizedNamesCoding.encode(place.localizedNames), at: 15)
                    do throws(SQLiteError) {
                        try insert.step()
                    } catch {
                        // (Not `catch where`: with a typed error that crashes the 6.3 compiler.)
                        if error.code == sqliteConstraintUnique {
                            throw PlaceDatabaseError.invalidPlace(id: place.id, reason: "duplicate id")
                        }
                        throw error
                    }
                    insert.reset()

                    let code: UInt32
                    if let known = kindCodes[place.kind] {
                        code = known
                    } else {
                        code = UInt32(kindCodes.count)
                        kindCodes[place.kind] = code
                    }
                    kinds.append(code)
                }

                let insertKind = try database.prepare("INSERT INTO kinds(code, kind) VALUES (?, ?)")
                for (kind, code) in kindCodes.sorted(by: { $0.value < $1.value }) {
                    try insertKind.bind(Int64(code), at: 1)
                    try insertKind.bind(kind, at: 2)
                    try insertKind.step()
                    insertKind.reset()
                }

                if let mapFeatures { try writeMapLayer(mapFeatures, into: database) }

                let insertMeta = try database.prepare("INSERT INTO meta(key, value) VALUES (?, ?)")
                for (key, value) in [
                    ("schema_version", String(schemaVersion)), ("place_count", String(places.count)),
                    ("imported_at", ISO8601.utc(Double(time(nil)))),
                    ("map_layer", mapFeatures == nil ? "0" : "1"),
                    ("map_feature_count", String(mapFeatures?.count ?? 0)), ("pack_id", PlacePack.hex(packID)),
                ] {
                    try insertMeta.bind(key, at: 1)
                    try insertMeta.bind(value, at: 2)
                    try insertMeta.step()
                    insertMeta.reset()
                }
                return Ordered(
                    places: ordered, index: index,
                    kinds: kindCodes.sorted(by: { $0.value < $1.value }).map(\.key), kindCodes: kinds)
            }
        } catch {
            throw lift(error, path: path)
        }
    }

    /// SQLITE_CONSTRAINT_UNIQUE, a macro Swift does not import.
    static let sqliteConstraintUnique = SQLITE_CONSTRAINT | (8 << 8)

    static func directoryName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

extension Character {
    /// The separators of `LocalizedNamesCoding`.
    var isNamesSeparator: Bool { self == "\u{1E}" || self == "\u{1F}" }
}
