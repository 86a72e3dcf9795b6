import CSQLite
import PlacedCore

/// Why a selection could not be recorded or read. The daemon answers the client with it and goes
/// on serving rankings.
public enum SelectionLogError: Error, Equatable, CustomStringConvertible {
    case cannotOpen(path: String, reason: String)
    case diskFull(path: String)
    case readOnly(path: String)
    case failed(path: String, reason: String)

    public var description: String {
        switch self {
        case let .cannotOpen(path, reason): "cannot open selection log \(path): \(reason)"
        case let .diskFull(path): "selection log \(path): the disk is full"
        case let .readOnly(path): "selection log \(path) is read-only"
        case let .failed(path, reason): "selection log \(path): \(reason)"
        }
    }

    init(_ error: SQLiteError, path: String) {
        switch error.primaryCode {
        case SQLITE_FULL: self = .diskFull(path: path)
        case SQLITE_READONLY, SQLITE_PERM: self = .readOnly(path: path)
        case SQLITE_BUSY, SQLITE_LOCKED: self = .failed(path: path, reason: "locked by another writer")
        default: self = .failed(path: path, reason: error.message)
        }
    }

    /// What a store call throws for an error raised inside it: the log's own as it is, SQLite's with the
    /// log's path, anything else as a failure.
    init(raisedInside error: any Error, path: String) {
        switch error {
        case let error as SelectionLogError: self = error
        case let error as SQLiteError: self.init(error, path: path)
        default: self = .failed(path: path, reason: "\(error)")
        }
    }
}

/// The durable log of selections, in its own SQLite file beside the places database (which an import
/// replaces whole). WAL with synchronous=FULL: `append` returns only once the row is on disk, so an
/// acknowledged selection survives a crash or a power cut.
public final class SelectionLog {
    public let path: String
    private let busyTimeout: Int
    /// nil only when `reopen` could open the file in neither way: then every call fails.
    private var connection: Connection?
    /// Selections per place id: the ranking priors, kept current as selections are appended.
    public private(set) var counts: [String: Int] = [:]

    static let schema = """
        CREATE TABLE IF NOT EXISTS selections(
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            time REAL NOT NULL,
            generation INTEGER NOT NULL,
            place_id TEXT NOT NULL,
            place_name TEXT NOT NULL,
            place_kind TEXT NOT NULL,
            place_address TEXT,
            place_latitude REAL NOT NULL,
            place_longitude REAL NOT NULL,
            distance REAL NOT NULL,
            likelihood REAL NOT NULL,
            latitude REAL NOT NULL,
            longitude REAL NOT NULL,
            accuracy REAL,
            speed REAL,
            heading REAL,
            altitude REAL,
            mode INTEGER NOT NULL,
            automatic INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX IF NOT EXISTS selections_place ON selections(place_id);
        """

    /// Added after the first release: a log written before it gets the column, 0 for its rows.
    static let automaticColumn = "ALTER TABLE selections ADD COLUMN automatic INTEGER NOT NULL DEFAULT 0"

    static let firstColumns = """
        time, generation, place_id, place_name, place_kind, place_address, place_latitude,
        place_longitude, distance, likelihood, latitude, longitude, accuracy, speed, heading, altitude, mode
        """
    static let insertedColumns = firstColumns + ", automatic"

    /// What `marker(from:)` reads; a log that could only be opened for reading may predate `automatic`.
    static func columns(hasAutomatic: Bool) -> String {
        "id, " + firstColumns + (hasAutomatic ? ", automatic" : ", 0")
    }

    /// `busyTimeout`: milliseconds to wait for another writer (placectl, a backup) before failing.
    ///
    /// A log that can only be read (a read-only file system or file) still opens, with `isReadOnly`
    /// set: the history, the last marker and the counts are served, and every `append` fails with
    /// `readOnly`, so the daemon keeps ranking instead of refusing to start.
    public init(path: String, busyTimeout: Int = 5000) throws(SelectionLogError) {
        self.path = path
        self.busyTimeout = busyTimeout
        let opened = try Connection.open(path, busyTimeout: busyTimeout)
        connection = opened
        counts = opened.counts
    }

    /// Whether appends are refused because the file could only be opened for reading.
    public var isReadOnly: Bool { connection?.isReadOnly ?? true }

    /// Opens a log that could only be read again, for writing if it now can be (remounted read-write,
    /// mode changed). Returns whether appends are taken now.
    @discardableResult
    public func reopen() -> Bool {
        guard isReadOnly else { return true }
        // Close first: SQLite shares one WAL index among a process's connections to a file, and the
        // read-only one would keep a new connection from writing.
        connection = nil
        // Another writer holding the lock is no reason to stop serving the history: read it again.
        connection =
            (try? Connection.open(path, busyTimeout: busyTimeout))
            ?? (try? Connection.reading(path, busyTimeout: busyTimeout))
        counts = connection?.counts ?? counts
        return !isReadOnly
    }

    /// The open database, or `readOnly` when `reopen` left none.
    private func open() throws(SelectionLogError) -> Connection {
        guard let connection else { throw .readOnly(path: path) }
        return connection
    }

    private struct Connection {
        let database: Database
        let insert: Statement
        let history: Statement
        let counts: [String: Int]
        /// Whether the table has the `automatic` column (every log opened for writing has).
        let hasAutomatic: Bool
        /// Statements other parts of the store prepare on this connection (the outbox): they go with it
        /// when `reopen` replaces it.
        let statements = StatementCache()

        var isReadOnly: Bool { database.isReadOnly }

        /// For writing if the file can be written, else for reading.
        static func open(_ path: String, busyTimeout: Int) throws(SelectionLogError) -> Connection {
            let database: Database
            do {
                database = try SelectionLog.openForWriting(path, busyTimeout: busyTimeout)
            } catch let writeError {
                // Read-only media or file: serve what is there. Busy is another writer, not a read-only log.
                guard writeError.primaryCode != SQLITE_BUSY, writeError.primaryCode != SQLITE_LOCKED,
                    let reader = try? SelectionLog.openForReading(path, busyTimeout: busyTimeout)
                else {
                    throw .cannotOpen(path: path, reason: writeError.message)
                }
                database = reader
            }
            return try Connection(database, path: path)
        }

        /// For reading only.
        static func reading(_ path: String, busyTimeout: Int) throws(SelectionLogError) -> Connection {
            let database: Database
            do {
                database = try SelectionLog.openForReading(path, busyTimeout: busyTimeout)
            } catch {
                throw .cannotOpen(path: path, reason: error.message)
            }
            return try Connection(database, path: path)
        }

        private init(_ database: Database, path: String) throws(SelectionLogError) {
            self.database = database
            do {
                hasAutomatic = try SelectionLog.hasAutomaticColumn(database)
                // A read-only log without the column prepares the insert it can never run without it.
                insert = try database.prepare(
                    "INSERT INTO selections(\(hasAutomatic ? SelectionLog.insertedColumns : SelectionLog.firstColumns))"
                        + " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?\(hasAutomatic ? ",?" : ""))")
                history = try database.prepare(
                    "SELECT \(SelectionLog.columns(hasAutomatic: hasAutomatic)) FROM selections"
                        + " WHERE id < ? ORDER BY id DESC LIMIT ?")
                let count = try database.prepare("SELECT place_id, count(*) FROM selections GROUP BY place_id")
                var counts: [String: Int] = [:]
                while try count.step() {
                    counts[count.text(at: 0) ?? "", default: 0] = Int(count.int64(at: 1))
                }
                self.counts = counts
            } catch {
                throw .cannotOpen(path: path, reason: error.message)
            }
        }
    }

    private static func openForWriting(_ path: String, busyTimeout: Int) throws(SQLiteError) -> Database {
        let database = try Database(path: path, mode: .readWriteCreate)
        try database.execute("PRAGMA busy_timeout=\(busyTimeout)")
        try database.execute("PRAGMA journal_mode=WAL")
        try database.execute("PRAGMA synchronous=FULL")
        try database.execute(Self.schema)
        if try !hasAutomaticColumn(database) { try database.execute(automaticColumn) }
        return database
    }

    static func hasAutomaticColumn(_ database: Database) throws(SQLiteError) -> Bool {
        let columns = try database.prepare("PRAGMA table_info(selections)")
        while try columns.step() {
            if columns.text(at: 1) == "automatic" { return true }
        }
        return false
    }

    /// On read-only media a WAL database without its -shm file (closed cleanly) opens only as immutable:
    /// nothing can change it there anyway.
    private static func openForReading(_ path: String, busyTimeout: Int) throws(SQLiteError) -> Database {
        do {
            let database = try Database(path: path, mode: .readOnly)
            try database.execute("PRAGMA busy_timeout=\(busyTimeout)")
            _ = try database.prepare("SELECT count(*) FROM selections")
            return database
        } catch {
            let database = try Database(path: path, mode: .immutable)
            _ = try database.prepare("SELECT count(*) FROM selections")
            return database
        }
    }

    /// Records `marker` durably and returns it with its selection id.
    public func append(_ marker: Marker) throws(SelectionLogError) -> Marker {
        let connection = try open()
        let recorded = try insert(marker, into: connection)
        counts[marker.place.place.id, default: 0] += 1
        return recorded
    }

    /// Records `marker` and, in the same transaction, what `alongside` writes for the recorded marker
    /// (its fleet outbox rows, `Outbox.append`): both are on disk, or neither is. An error from
    /// `alongside` rolls the selection back too; it is reported as `failed` unless it is a
    /// `SelectionLogError` already.
    public func append(_ marker: Marker, alongside: (Marker) throws -> Void) throws(SelectionLogError) -> Marker {
        let connection = try open()
        let recorded: Marker
        do {
            recorded = try connection.database.transaction {
                let recorded = try insert(marker, into: connection)
                try alongside(recorded)
                return recorded
            }
        } catch {
            throw SelectionLogError(raisedInside: error, path: path)
        }
        counts[marker.place.place.id, default: 0] += 1
        return recorded
    }

    private func insert(_ marker: Marker, into connection: Connection) throws(SelectionLogError) -> Marker {
        let insert = connection.insert
        do {
            defer { insert.reset() }
            let place = marker.place.place, fix = marker.location
            try insert.bind(marker.time, at: 1)
            try insert.bind(Int64(bitPattern: marker.generation), at: 2)
            try insert.bind(place.id, at: 3)
            try insert.bind(place.name, at: 4)
            try insert.bind(place.kind, at: 5)
            try insert.bind(place.address, at: 6)
            try insert.bind(place.coordinate.latitude, at: 7)
            try insert.bind(place.coordinate.longitude, at: 8)
            try insert.bind(marker.place.distance, at: 9)
            try insert.bind(marker.place.likelihood, at: 10)
            try insert.bind(fix.coordinate.latitude, at: 11)
            try insert.bind(fix.coordinate.longitude, at: 12)
            try insert.bind(fix.accuracy, at: 13)
            try insert.bind(fix.speed, at: 14)
            try insert.bind(fix.heading, at: 15)
            try insert.bind(fix.altitude, at: 16)
            try insert.bind(Int64(fix.mode.rawValue), at: 17)
            // Without the column the log is read-only (a writer adds it), so this insert fails anyway.
            if connection.hasAutomatic { try insert.bind(Int64(marker.automatic ? 1 : 0), at: 18) }
            _ = try insert.step()
        } catch {
            throw SelectionLogError(error, path: path)
        }
        var recorded = marker
        recorded.selection = connection.database.lastInsertRowID
        return recorded
    }

    /// The connection's database for writing, and its statement cache: for the outbox, which lives in
    /// this file so that a marker and its outbox rows commit together.
    func writableConnection() throws(SelectionLogError) -> (database: Database, statements: StatementCache) {
        let connection = try open()
        guard !connection.isReadOnly else { throw .readOnly(path: path) }
        return (connection.database, connection.statements)
    }

    /// The connection's database, read-only or not, and its statement cache: for the own places, which
    /// are read at start from a log that may only be readable.
    func currentConnection() throws(SelectionLogError) -> (database: Database, statements: StatementCache) {
        let connection = try open()
        return (connection.database, connection.statements)
    }

    /// Selections newest first; `before` (a selection id) pages back through older ones.
    public func history(limit: Int, before: Int64? = nil) throws(SelectionLogError) -> [Marker] {
        let query = try open().history
        do {
            defer { query.reset() }
            try query.bind(before ?? Int64.max, at: 1)
            try query.bind(Int64(max(0, limit)), at: 2)
            var markers: [Marker] = []
            while try query.step() { markers.append(Self.marker(from: query)) }
            return markers
        } catch {
            throw SelectionLogError(error, path: path)
        }
    }

    /// Folds the write-ahead log into the database file at shutdown, so a clean stop leaves one file.
    /// Every selection is already durable; this only tidies.
    public func checkpoint() {
        guard let connection, !connection.isReadOnly else { return }
        try? connection.database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    /// The newest selection: the marker restored at start.
    public func last() throws(SelectionLogError) -> Marker? {
        try history(limit: 1).first
    }

    public var count: Int { counts.values.reduce(0, +) }

    static func marker(from row: Statement) -> Marker {
        func optional(_ column: Int32) -> Double? { row.isNull(at: column) ? nil : row.double(at: column) }
        let place = Place(
            id: row.text(at: 3) ?? "", name: row.text(at: 4) ?? "", kind: row.text(at: 5) ?? "",
            address: row.text(at: 6),
            coordinate: Coordinate(latitude: row.double(at: 7), longitude: row.double(at: 8)))
        let fix = Fix(
            receivedAt: 0, coordinate: Coordinate(latitude: row.double(at: 11), longitude: row.double(at: 12)),
            mode: FixMode(rawValue: Int(row.int64(at: 17))) ?? .twoD, accuracy: optional(13),
            altitude: optional(16), speed: optional(14), heading: optional(15))
        return Marker(
            selection: row.int64(at: 0),
            place: RankedPlace(place: place, distance: row.double(at: 9), likelihood: row.double(at: 10)),
            location: fix, time: row.double(at: 1), generation: UInt64(bitPattern: row.int64(at: 2)),
            automatic: row.int64(at: 18) != 0)
    }

    /// Every selection as learning needs it (place, where, how accurately, when), oldest first: read once
    /// at start to build the `PickMemory`, then kept current by appending each new marker's `Pick`.
    public func picks() throws(SelectionLogError) -> [Pick] {
        let connection = try open()
        do {
            let query = try connection.database.prepare(
                "SELECT place_id, latitude, longitude, accuracy, time FROM selections ORDER BY id")
            var picks: [Pick] = []
            while try query.step() {
                picks.append(
                    Pick(
                        placeID: query.text(at: 0) ?? "",
                        coordinate: Coordinate(latitude: query.double(at: 1), longitude: query.double(at: 2)),
                        accuracy: query.isNull(at: 3) ? nil : query.double(at: 3), time: query.double(at: 4)))
            }
            return picks
        } catch {
            throw SelectionLogError(error, path: path)
        }
    }
}

/// Prepared statements kept for the life of one connection, by their SQL text.
final class StatementCache {
    private var statements: [String: Statement] = [:]
    /// Set once a part has created its tables on this connection.
    var prepared: Set<String> = []

    func statement(_ sql: String, on database: Database) throws(SQLiteError) -> Statement {
        if let statement = statements[sql] { return statement }
        let statement = try database.prepare(sql)
        statements[sql] = statement
        return statement
    }
}
