import CSQLite
import PlacedCore

/// The own places, durable in the selection log's database (WAL, synchronous=FULL): a batch put or
/// delete is one transaction, on disk before it returns, and all of it or none of it survives a crash.
/// A places import replaces only the places file, never this one, so own places outlive every import
/// and Refresh.
public final class OwnPlaceStore {
    public let log: SelectionLog

    static let schema = """
        CREATE TABLE IF NOT EXISTS own_places(
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            address TEXT,
            weight REAL,
            names BLOB NOT NULL,
            geometry BLOB NOT NULL,
            details TEXT
        ) WITHOUT ROWID;
        """
    /// The own places the device was inside at its last crossing of each: a restart (a vehicle switched
    /// off in its depot overnight) then neither enters them again nor misses leaving them.
    static let presenceSchema = "CREATE TABLE IF NOT EXISTS own_place_presence(id TEXT PRIMARY KEY) WITHOUT ROWID"

    /// `details` (`PlaceDetails.encoded`), added in place to a table made before it.
    static let detailsColumn = "ALTER TABLE own_places ADD COLUMN details TEXT"

    static let putSQL = """
        INSERT OR REPLACE INTO own_places(id, name, kind, address, weight, names, geometry, details)
        VALUES(?,?,?,?,?,?,?,?)
        """

    public init(log: SelectionLog) {
        self.log = log
    }

    /// Every own place, in id order. A log that could only be opened for reading and has no table yet
    /// holds none.
    public func all() throws(SelectionLogError) -> [OwnPlace] {
        try reading("own_places") { database in
            // A log only read may have the table from before `details`.
            let details = try Self.hasDetailsColumn(database) ? "details" : "NULL"
            let query = try database.prepare(
                "SELECT id, name, kind, address, weight, names, geometry, \(details) FROM own_places ORDER BY id")
            var places: [OwnPlace] = []
            while try query.step() {
                let id = query.text(at: 0) ?? ""
                guard let names = query.withBlob(at: 5, { OwnPlaceCodec.decodeNames($0) }),
                    let geometry = query.withBlob(at: 6, { OwnPlaceCodec.decodeGeometry($0) })
                else {
                    throw SelectionLogError.failed(path: log.path, reason: "own place \(id) does not decode")
                }
                places.append(
                    OwnPlace(
                        id: id, name: query.text(at: 1) ?? "", kind: query.text(at: 2) ?? "",
                        address: query.text(at: 3),
                        localizedNames: names, weight: query.isNull(at: 4) ? nil : query.double(at: 4),
                        geometry: geometry, details: PlaceDetails(encoded: query.text(at: 7))))
            }
            releaseCache(database)
            return places
        } ?? []
    }

    /// The ids of the own places the device was inside when placed last stopped (`recordPresence`). A
    /// log opened read-only without the table knows of none.
    public func presence() throws(SelectionLogError) -> Set<String> {
        try reading("own_place_presence") { database in
            let query = try database.prepare("SELECT id FROM own_place_presence")
            var ids: Set<String> = []
            while try query.step() { ids.insert(query.text(at: 0) ?? "") }
            return ids
        } ?? []
    }

    /// Runs `body` on the current connection; nil for a log that has never had `table`. Making the
    /// tables is tried, not required: a read must not fail on a full disk or a log opened read-only
    /// (then what is stored is read as it is, a table from before `details` included).
    func reading<Result>(_ table: String, _ body: (Database) throws -> Result) throws(SelectionLogError)
        -> Result?
    {
        let (database, _) = try log.currentConnection()
        do {
            if !database.isReadOnly { try? prepare(database) }
            let exists = try database.scalarInt64(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '\(table)'")
            if exists == 0 { return nil }
            return try body(database)
        } catch {
            throw failure(error)
        }
    }

    /// Keeps a crossing: the device is now inside the place `id`, or no longer.
    public func recordPresence(_ id: String, inside: Bool) throws(SelectionLogError) {
        let (database, statements) = try log.writableConnection()
        do {
            try prepare(database)
            let change = try statements.statement(
                inside
                    ? "INSERT OR REPLACE INTO own_place_presence(id) VALUES(?)"
                    : "DELETE FROM own_place_presence WHERE id = ?", on: database)
            defer { change.reset() }
            try change.bind(id, at: 1)
            _ = try change.step()
        } catch {
            throw SelectionLogError(error, path: log.path)
        }
    }

    /// Deletes the places of `ids` and what is kept beside them (waypoint times, presence), inside the
    /// caller's transaction; returns how many places there were.
    static func deleteRows(of ids: [String], _ database: Database, _ statements: StatementCache)
        throws(SQLiteError) -> Int
    {
        let delete = try statements.statement("DELETE FROM own_places WHERE id = ?", on: database)
        var count = 0
        for id in ids {
            defer { delete.reset() }
            try delete.bind(id, at: 1)
            _ = try delete.step()
            count += database.changes
        }
        try forgetWaypointTimes(of: ids, database, statements)
        try forgetPresence(of: ids, database, statements)
        return count
    }

    /// What a store call throws for an error raised inside it (`SelectionLogError(raisedInside:)`).
    func failure(_ error: any Error) -> SelectionLogError {
        SelectionLogError(raisedInside: error, path: log.path)
    }

    /// A deleted place is no longer one the device is inside.
    static func forgetPresence(of ids: [String], _ database: Database, _ statements: StatementCache)
        throws(SQLiteError)
    {
        let forget = try statements.statement("DELETE FROM own_place_presence WHERE id = ?", on: database)
        for id in ids {
            defer { forget.reset() }
            try forget.bind(id, at: 1)
            _ = try forget.step()
        }
    }

    /// Inserts `places`, replacing those of the same ids, in one transaction. The batch must be valid
    /// (`OwnPlace.validate`): the store checks nothing of the places themselves.
    public func put(_ places: [OwnPlace]) throws(SelectionLogError) {
        let (database, statements) = try log.writableConnection()
        do {
            try prepare(database)
            let insert = try statements.statement(Self.putSQL, on: database)
            try database.transaction {
                for place in places { try Self.insert(place, with: insert) }
                try Self.forgetWaypointTimes(of: places.map(\.id), database, statements)
            }
            releaseCache(database)
        } catch {
            throw failure(error)
        }
    }

    /// Deletes the places of `ids` in one transaction; returns how many there were (ids not stored
    /// are no error).
    @discardableResult
    public func delete(_ ids: [String]) throws(SelectionLogError) -> Int {
        let (database, statements) = try log.writableConnection()
        do {
            try prepare(database)
            return try database.transaction { try Self.deleteRows(of: ids, database, statements) }
        } catch {
            throw failure(error)
        }
    }

    /// Reading or writing 10,000 places fills the connection's page cache (2 MB), which would then
    /// stay in placed's RSS for nothing: the places are in memory, and a selection reads little.
    private func releaseCache(_ database: Database) {
        try? database.execute("PRAGMA shrink_memory")
    }

    /// One row of `putSQL`: the one place a place's columns are written, for a put and a fleet command.
    static func insert(_ place: OwnPlace, with insert: Statement) throws(SQLiteError) {
        defer { insert.reset() }
        try insert.bind(place.id, at: 1)
        try insert.bind(place.name, at: 2)
        try insert.bind(place.kind, at: 3)
        try insert.bind(place.address, at: 4)
        try insert.bind(place.weight, at: 5)
        try insert.bind(blob: OwnPlaceCodec.encode(names: place.localizedNames), at: 6)
        try insert.bind(blob: OwnPlaceCodec.encode(place.geometry), at: 7)
        try insert.bind(place.details.encoded, at: 8)
        _ = try insert.step()
    }

    /// The table, with every column (`details` added to a table made before it).
    func prepare(_ database: Database) throws(SQLiteError) {
        try database.execute(Self.schema)
        if try !Self.hasDetailsColumn(database) { try database.execute(Self.detailsColumn) }
        try database.execute(Self.commandSchema)
        try database.execute(Self.presenceSchema)
    }

    static func hasDetailsColumn(_ database: Database) throws(SQLiteError) -> Bool {
        let columns = try database.prepare("PRAGMA table_info(own_places)")
        while try columns.step() {
            if columns.text(at: 1) == "details" { return true }
        }
        return false
    }
}

/// The blobs of an own place's row: little-endian, length-prefixed.
///
///     names:    [u32 count] then per name [u32 n][language][u32 n][name]
///     geometry: [u8 0][f64 lat][f64 lon][f64 radius]                      a circle
///               [u8 1][u32 polygons] per polygon [u32 rings] per ring
///               [u32 positions] then [f64 lat][f64 lon] each              polygons
enum OwnPlaceCodec {
    static func encode(names: [String: String]) -> [UInt8] {
        var bytes: [UInt8] = []
        append(UInt32(names.count), to: &bytes)
        for (language, name) in names.sorted(by: { $0.key < $1.key }) {
            append(string: language, to: &bytes)
            append(string: name, to: &bytes)
        }
        return bytes
    }

    static func encode(_ geometry: OwnGeometry) -> [UInt8] {
        var bytes: [UInt8] = []
        switch geometry {
        case let .circle(centre, radius):
            bytes.append(0)
            append(centre.latitude, to: &bytes)
            append(centre.longitude, to: &bytes)
            append(radius, to: &bytes)
        case .polygons(let polygons):
            bytes.reserveCapacity(1 + 16 * geometry.vertexCount + 8 * polygons.count + 8)
            bytes.append(1)
            append(UInt32(polygons.count), to: &bytes)
            for rings in polygons {
                append(UInt32(rings.count), to: &bytes)
                for ring in rings {
                    append(UInt32(ring.count), to: &bytes)
                    for point in ring {
                        append(point.latitude, to: &bytes)
                        append(point.longitude, to: &bytes)
                    }
                }
            }
        }
        return bytes
    }

    static func decodeNames(_ bytes: UnsafeRawBufferPointer) -> [String: String]? {
        var reader = Reader(bytes: bytes)
        guard let count = reader.u32() else { return nil }
        var names: [String: String] = [:]
        for _ in 0..<count {
            guard let language = reader.string(), let name = reader.string() else { return nil }
            names[language] = name
        }
        return reader.atEnd ? names : nil
    }

    static func decodeGeometry(_ bytes: UnsafeRawBufferPointer) -> OwnGeometry? {
        var reader = Reader(bytes: bytes)
        switch reader.u8() {
        case 0:
            guard let latitude = reader.f64(), let longitude = reader.f64(), let radius = reader.f64(), reader.atEnd
            else { return nil }
            return .circle(centre: Coordinate(latitude: latitude, longitude: longitude), radius: radius)
        case 1:
            guard let polygonCount = reader.u32() else { return nil }
            var polygons: [[[Coordinate]]] = []
            for _ in 0..<polygonCount {
                guard let ringCount = reader.u32() else { return nil }
                var rings: [[Coordinate]] = []
                for _ in 0..<ringCount {
                    guard let count = reader.u32(), Int(count) <= reader.remaining / 16 else { return nil }
                    var ring: [Coordinate] = []
                    ring.reserveCapacity(Int(count))
                    for _ in 0..<count {
                        guard let latitude = reader.f64(), let longitude = reader.f64() else { return nil }
                        ring.append(Coordinate(latitude: latitude, longitude: longitude))
                    }
                    rings.append(ring)
                }
                polygons.append(rings)
            }
            return reader.atEnd ? .polygons(polygons) : nil
        default:
            return nil
        }
    }

    private static func append(_ value: UInt32, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private static func append(_ value: Double, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private static func append(string: String, to bytes: inout [UInt8]) {
        append(UInt32(string.utf8.count), to: &bytes)
        bytes.append(contentsOf: string.utf8)
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var position = 0

        var remaining: Int { bytes.count - position }
        var atEnd: Bool { position == bytes.count }

        mutating func u8() -> UInt8? {
            guard remaining >= 1 else { return nil }
            defer { position += 1 }
            return bytes[position]
        }

        mutating func u32() -> UInt32? {
            guard remaining >= 4 else { return nil }
            defer { position += 4 }
            return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self))
        }

        mutating func f64() -> Double? {
            guard remaining >= 8 else { return nil }
            defer { position += 8 }
            return Double(
                bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self)))
        }

        mutating func string() -> String? {
            guard let count = u32(), Int(count) <= remaining else { return nil }
            defer { position += Int(count) }
            return String(
                validating: UnsafeRawBufferPointer(rebasing: bytes[position..<position + Int(count)]), as: UTF8.self)
        }
    }
}
