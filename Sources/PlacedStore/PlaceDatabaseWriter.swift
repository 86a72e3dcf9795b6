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
        for feature in mapFeatures ?? [] { try validate(feature) }
        let writer = try PlaceFileWriter(path: path, mapLayer: mapFeatures != nil)
        for place in places { writer.add(place) }
        for feature in mapFeatures ?? [] { writer.add(feature) }
        try writer.finish()
    }

    /// Bad input changes nothing: every place is checked before a file is created.
    static func validate(_ places: [Place]) throws(PlaceDatabaseError) {
        guard places.count < Int(Int32.max) else {
            throw .invalidPlace(id: "", reason: "\(places.count) places are more than a database holds")
        }
        for place in places { try validate(place) }
    }

    /// One place checked, as `add` checks each (no array made a place).
    static func validate(_ place: Place) throws(PlaceDatabaseError) {
        guard !place.id.isEmpty else {
            throw .invalidPlace(id: "", reason: "empty id (name \"\(place.name)\")")
        }
        guard place.coordinate.isValid else {
            throw .invalidPlace(id: place.id, reason: "coordinate \(place.coordinate) is not a valid position")
        }
        guard place.area.isFinite, place.area >= 0 else {
            throw .invalidPlace(id: place.id, reason: "area \(place.area) is not a finite non-negative number")
        }
        if let b = place.bounds {
            guard Coordinate(latitude: b.minLatitude, longitude: b.minLongitude).isValid,
                Coordinate(latitude: b.maxLatitude, longitude: b.maxLongitude).isValid,
                b.minLatitude <= b.maxLatitude, b.minLongitude <= b.maxLongitude
            else { throw .invalidPlace(id: place.id, reason: "bounding box is not valid") }
        }
        if let outline = place.outline, !outline.allSatisfy(\.isValid) {
            throw .invalidPlace(id: place.id, reason: "outline has an invalid coordinate")
        }
        // The separators are ASCII controls, each a character of its own: found among the UTF-8 bytes.
        if place.localizedNames.contains(where: { key, value in
            key.isEmpty || key.utf8.contains(where: \.isNamesSeparator)
                || value.utf8.contains(where: \.isNamesSeparator)
        }) {
            throw .invalidPlace(id: place.id, reason: "a localized name holds U+001E or U+001F, or has no language")
        }
        if place.details.tags.contains(where: { key, value in
            key.isEmpty || key.utf8.contains(where: \.isNamesSeparator)
                || value.utf8.contains(where: \.isNamesSeparator)
        }) {
            throw .invalidPlace(id: place.id, reason: "a detail holds U+001E or U+001F, or has no key")
        }
    }

    /// A fresh file's tables. No journal, no syncs, no locks to share: the file is private until it
    /// is renamed into place complete. The id index is made after the rows (`indexIDs`): sorting once
    /// is far faster than keeping a b-tree of millions of random ids in order row by row.
    static func createSchema(in database: Database, cacheBytes: Int) throws(SQLiteError) {
        try database.execute(
            """
            PRAGMA journal_mode = OFF;
            PRAGMA synchronous = OFF;
            PRAGMA locking_mode = EXCLUSIVE;
            PRAGMA cache_size = -\(max(cacheBytes / 1024, 2048));
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE places(
                rowid INTEGER PRIMARY KEY,
                id TEXT NOT NULL,
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
    }

    /// One place's row, bound to parameters `offset + 1` on from its spilled record's own bytes (no copy:
    /// they, `kind` and `source` must stay valid until the statement is stepped): the columns of
    /// `placeColumns`, the values a `Place` decoded from the record would bind.
    static func bind(
        _ row: RecordColumns, kind: UnsafeRawBufferPointer, source: UnsafeRawBufferPointer, coordinate: Coordinate,
        to insert: Statement, after offset: Int32
    ) throws(SQLiteError) {
        try insert.bind(borrowedText: row.id, at: offset + 1)
        try insert.bind(borrowedText: row.name, at: offset + 2)
        try insert.bind(borrowedText: kind, at: offset + 3)
        if let address = row.address {
            try insert.bind(borrowedText: address, at: offset + 4)
        } else {
            try insert.bindNull(at: offset + 4)
        }
        try insert.bind(coordinate.latitude, at: offset + 5)
        try insert.bind(coordinate.longitude, at: offset + 6)
        try insert.bind(row.area, at: offset + 7)
        if let bounds = row.bounds {
            try insert.bind(bounds.minLatitude, at: offset + 8)
            try insert.bind(bounds.minLongitude, at: offset + 9)
            try insert.bind(bounds.maxLatitude, at: offset + 10)
            try insert.bind(bounds.maxLongitude, at: offset + 11)
        } else {
            for column in 8...11 { try insert.bindNull(at: offset + Int32(column)) }
        }
        if let outline = row.outline {
            try insert.bind(borrowedBlob: outline, at: offset + 12)
        } else {
            try insert.bindNull(at: offset + 12)
        }
        try insert.bind(borrowedText: source, at: offset + 13)
        if let names = row.names {
            try insert.bind(borrowedText: names, at: offset + 14)
        } else {
            try insert.bindNull(at: offset + 14)
        }
    }

    /// The places table's columns in the order `bind` binds them. Not the rowid: SQLite numbers the rows
    /// 1, 2, … in the order they come into the empty table (the place's number + 1), each appended after
    /// the last row without a search for it, as an explicit rowid would need.
    static let placeColumns = """
        id, name, kind, address, latitude, longitude, area, min_lat, min_lon, max_lat, max_lon, outline,
        address_source, names
        """

    /// Parameters a row takes.
    static let parametersARow: Int32 = 14

    /// The unique index of ids, after the rows; a repeated id is named.
    static func indexIDs(in database: Database, path: String) throws {
        do throws(SQLiteError) {
            // SQLite's sorter on two threads (the build allows 8, the default is none): at 30 M ids the
            // index is an external merge sort.
            try database.execute("PRAGMA threads = 2; CREATE UNIQUE INDEX places_id ON places(id)")
        } catch {
            // (Not `catch where`: with a typed error that crashes the 6.3 compiler.)
            guard error.code == sqliteConstraintUnique else { throw error }
            let repeated = try database.prepare("SELECT id FROM places GROUP BY id HAVING count(*) > 1 LIMIT 1")
            let id = try repeated.step() ? repeated.text(at: 0) ?? "" : ""
            throw PlaceDatabaseError.invalidPlace(id: id, reason: "duplicate id")
        }
    }

    static func writeMeta(into database: Database, placeCount: Int, mapFeatures: Int?, packID: String)
        throws(SQLiteError)
    {
        let insertMeta = try database.prepare("INSERT INTO meta(key, value) VALUES (?, ?)")
        for (key, value) in [
            ("schema_version", String(schemaVersion)), ("place_count", String(placeCount)),
            ("imported_at", ISO8601.utc(Double(time(nil)))), ("map_layer", mapFeatures == nil ? "0" : "1"),
            ("map_feature_count", String(mapFeatures ?? 0)), ("pack_id", packID),
        ] {
            try insertMeta.bind(key, at: 1)
            try insertMeta.bind(value, at: 2)
            try insertMeta.step()
            insertMeta.reset()
        }
    }

    /// SQLITE_CONSTRAINT_UNIQUE, a macro Swift does not import.
    static let sqliteConstraintUnique = SQLITE_CONSTRAINT | (8 << 8)

    static func directoryName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

extension UInt8 {
    /// The separators of `LocalizedNamesCoding` (U+001E, U+001F).
    var isNamesSeparator: Bool { self == 0x1E || self == 0x1F }
}
