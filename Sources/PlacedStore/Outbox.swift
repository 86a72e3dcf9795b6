import CSQLite

/// The fleet export's durable outbox: every event meant for the brokers is a row in the selection log's
/// database, numbered in order, until the brokers of the active configuration acknowledge it.
///
/// A marker's rows commit in the selection's own transaction (`SelectionLog.append(_:alongside:)`), so a
/// selection the user saw acknowledged is always in the outbox. A cursor per broker configuration moves
/// only when a broker acknowledges (PUBACK); acknowledged rows are deleted with it. Past `limit` rows, the
/// oldest location and state updates are dropped first; markers, visits, transitions and command
/// results are never dropped.
public final class Outbox {
    /// What a row holds, which decides whether it may be dropped when the backlog is full.
    public enum Kind: String, Sendable, CaseIterable {
        case marker, visit, state, location
        /// An own place entered or left; the result of a fleet command.
        case transition, result

        /// Location and state updates are superseded by the next ones; markers, visits, transitions and
        /// command results are not.
        public var isDroppable: Bool { self == .state || self == .location }
    }

    /// One message to publish.
    public struct Message: Sendable, Equatable {
        public var kind: Kind
        /// The full MQTT topic.
        public var topic: String
        /// JSON bytes, carrying the message's stable id.
        public var payload: [UInt8]
        public var retained: Bool
        /// Wall-clock time the event was made, seconds since the Unix epoch.
        public var systemTime: Double
        /// The fix's own time (GPS), when the event has a fix with a time.
        public var gpsTime: Double?
        /// Whether the system clock was synchronized when the event was made.
        public var clockSynchronized: Bool

        public init(
            kind: Kind, topic: String, payload: [UInt8], retained: Bool, systemTime: Double, gpsTime: Double?,
            clockSynchronized: Bool
        ) {
            self.kind = kind
            self.topic = topic
            self.payload = payload
            self.retained = retained
            self.systemTime = systemTime
            self.gpsTime = gpsTime
            self.clockSynchronized = clockSynchronized
        }
    }

    /// A stored message and its sequence number.
    public struct Entry: Sendable, Equatable {
        public var sequence: Int64
        public var message: Message
    }

    /// What an `append` did.
    public struct Appended: Sendable, Equatable {
        /// The sequence numbers given, in order.
        public var sequences: [Int64]
        /// Location and state updates dropped to keep the backlog within its bound.
        public var dropped: Int
    }

    public let log: SelectionLog
    /// The broker configuration this cursor belongs to (`FleetSettings.configurationKey`).
    public let configuration: String
    /// Most rows kept; markers and visits may exceed it, since they are never dropped.
    public let limit: Int
    /// The last sequence number the configuration's brokers acknowledged, with every one before it.
    public private(set) var acknowledged: Int64 = 0
    /// Rows waiting for an acknowledgement.
    public private(set) var count = 0
    /// Updates dropped past the bound, over the outbox's life.
    public private(set) var dropped: Int64 = 0

    static let schema = """
        CREATE TABLE IF NOT EXISTS outbox(
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            topic TEXT NOT NULL,
            payload BLOB NOT NULL,
            retained INTEGER NOT NULL,
            system_time REAL NOT NULL,
            gps_time REAL,
            clock_synchronized INTEGER NOT NULL
        );
        CREATE INDEX IF NOT EXISTS outbox_droppable ON outbox(seq) WHERE kind IN ('state', 'location');
        CREATE TABLE IF NOT EXISTS outbox_cursors(
            configuration TEXT PRIMARY KEY,
            acknowledged INTEGER NOT NULL
        );
        CREATE TABLE IF NOT EXISTS outbox_counters(
            name TEXT PRIMARY KEY,
            value INTEGER NOT NULL
        );
        """

    static let insertSQL = """
        INSERT INTO outbox(seq, kind, topic, payload, retained, system_time, gps_time, clock_synchronized)
        VALUES(?,?,?,?,?,?,?,?)
        """
    static let lastSequenceSQL = "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0)"
    static let dropSQL = """
        DELETE FROM outbox WHERE seq IN
            (SELECT seq FROM outbox WHERE kind IN ('state', 'location') ORDER BY seq LIMIT ?)
        """
    static let pendingSQL = """
        SELECT seq, kind, topic, payload, retained, system_time, gps_time, clock_synchronized
        FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?
        """

    /// Opens the outbox in `log`'s file for broker configuration `configuration`. A configuration seen
    /// for the first time starts before the oldest row kept: its brokers get the whole backlog.
    public init(log: SelectionLog, configuration: String, limit: Int) throws(SelectionLogError) {
        self.log = log
        self.configuration = configuration
        self.limit = max(1, limit)
        try load()
    }

    /// Reads the cursor, the row count and the dropped count again (after the log was reopened).
    public func load() throws(SelectionLogError) {
        try run { database, statements throws(SQLiteError) in
            let start = try statements.statement(
                "INSERT OR IGNORE INTO outbox_cursors(configuration, acknowledged) VALUES(?,"
                    + " coalesce((SELECT min(seq) FROM outbox), (\(Self.lastSequenceSQL)) + 1) - 1)",
                on: database)
            defer { start.reset() }
            try start.bind(configuration, at: 1)
            try start.step()
            let cursor = try statements.statement(
                "SELECT acknowledged FROM outbox_cursors WHERE configuration = ?", on: database)
            defer { cursor.reset() }
            try cursor.bind(configuration, at: 1)
            acknowledged = try cursor.step() ? cursor.int64(at: 0) : 0
            let pending = try statements.statement("SELECT count(*) FROM outbox WHERE seq > ?", on: database)
            defer { pending.reset() }
            try pending.bind(acknowledged, at: 1)
            count = try pending.step() ? Int(pending.int64(at: 0)) : 0
            dropped = try database.scalarInt64("SELECT value FROM outbox_counters WHERE name = 'dropped'") ?? 0
        }
    }

    /// Appends messages in order. `builders` get each message's sequence number, for the stable id in its
    /// payload. Inside an open transaction (a marker's, through `SelectionLog.append(_:alongside:)`) the
    /// rows join it; otherwise they commit on their own, fsynced only when `durable` (a lost location
    /// update at a power cut is replaced by the next one; a visit is not).
    @discardableResult
    public func append(durable: Bool = true, _ builders: [(Int64) -> Message]) throws(SelectionLogError)
        -> Appended
    {
        var appended = Appended(sequences: [], dropped: 0)
        try run { database, statements throws(SQLiteError) in
            let standalone = !database.isInTransaction
            if standalone {
                if !durable { try database.execute("PRAGMA synchronous=NORMAL") }
                try database.execute("BEGIN IMMEDIATE")
            }
            do throws(SQLiteError) {
                appended = try insert(builders, database: database, statements: statements)
                if standalone { try database.execute("COMMIT") }
            } catch {
                if standalone, database.isInTransaction { try? database.execute("ROLLBACK") }
                if standalone, !durable { try? database.execute("PRAGMA synchronous=FULL") }
                throw error
            }
            if standalone, !durable { try database.execute("PRAGMA synchronous=FULL") }
        }
        // Counted once the rows are there; inside a caller's transaction that is its commit, which the
        // caller reports (a rollback after this point is followed by `load()`).
        count += appended.sequences.count - appended.dropped
        dropped += Int64(appended.dropped)
        return appended
    }

    private func insert(_ builders: [(Int64) -> Message], database: Database, statements: StatementCache)
        throws(SQLiteError) -> Appended
    {
        let last = try statements.statement(Self.lastSequenceSQL, on: database)
        var sequence: Int64 = 0
        do {
            defer { last.reset() }
            sequence = try last.step() ? last.int64(at: 0) : 0
        }
        let insert = try statements.statement(Self.insertSQL, on: database)
        var sequences: [Int64] = []
        for build in builders {
            sequence += 1
            let message = build(sequence)
            defer { insert.reset() }
            try insert.bind(sequence, at: 1)
            try insert.bind(message.kind.rawValue, at: 2)
            try insert.bind(message.topic, at: 3)
            try insert.bind(blob: message.payload, at: 4)
            try insert.bind(Int64(message.retained ? 1 : 0), at: 5)
            try insert.bind(message.systemTime, at: 6)
            try insert.bind(message.gpsTime, at: 7)
            try insert.bind(Int64(message.clockSynchronized ? 1 : 0), at: 8)
            try insert.step()
            sequences.append(sequence)
        }
        var droppedNow = 0
        let excess = count + sequences.count - limit
        if excess > 0 {
            let drop = try statements.statement(Self.dropSQL, on: database)
            defer { drop.reset() }
            try drop.bind(Int64(excess), at: 1)
            try drop.step()
            droppedNow = database.changes
            if droppedNow > 0 {
                let counter = try statements.statement(
                    "INSERT INTO outbox_counters(name, value) VALUES('dropped', ?)"
                        + " ON CONFLICT(name) DO UPDATE SET value = value + excluded.value", on: database)
                defer { counter.reset() }
                try counter.bind(Int64(droppedNow), at: 1)
                try counter.step()
            }
        }
        return Appended(sequences: sequences, dropped: droppedNow)
    }

    /// Up to `limit` stored messages after sequence `after`, in order.
    public func pending(after: Int64, limit: Int) throws(SelectionLogError) -> [Entry] {
        var entries: [Entry] = []
        try run { database, statements throws(SQLiteError) in
            let query = try statements.statement(Self.pendingSQL, on: database)
            defer { query.reset() }
            try query.bind(after, at: 1)
            try query.bind(Int64(max(0, limit)), at: 2)
            while try query.step() {
                let payload = query.withBlob(at: 3) { Array($0) }
                let message = Message(
                    kind: Kind(rawValue: query.text(at: 1) ?? "") ?? .state, topic: query.text(at: 2) ?? "",
                    payload: payload, retained: query.int64(at: 4) != 0, systemTime: query.double(at: 5),
                    gpsTime: query.isNull(at: 6) ? nil : query.double(at: 6),
                    clockSynchronized: query.int64(at: 7) != 0)
                entries.append(Entry(sequence: query.int64(at: 0), message: message))
            }
        }
        return entries
    }

    /// Moves the cursor to `sequence` (every message up to it acknowledged) and deletes those rows. Not
    /// fsynced: a cursor lost at a power cut only sends those messages again, and consumers drop
    /// duplicates by id.
    public func acknowledge(through sequence: Int64) throws(SelectionLogError) {
        guard sequence > acknowledged else { return }
        var removed = 0
        try run { database, statements throws(SQLiteError) in
            try database.execute("PRAGMA synchronous=NORMAL")
            defer { try? database.execute("PRAGMA synchronous=FULL") }
            try database.execute("BEGIN IMMEDIATE")
            do throws(SQLiteError) {
                let cursor = try statements.statement(
                    "UPDATE outbox_cursors SET acknowledged = ? WHERE configuration = ?", on: database)
                defer { cursor.reset() }
                try cursor.bind(sequence, at: 1)
                try cursor.bind(configuration, at: 2)
                try cursor.step()
                let delete = try statements.statement("DELETE FROM outbox WHERE seq <= ?", on: database)
                defer { delete.reset() }
                try delete.bind(sequence, at: 1)
                try delete.step()
                removed = database.changes
                try database.execute("COMMIT")
            } catch {
                if database.isInTransaction { try? database.execute("ROLLBACK") }
                throw error
            }
        }
        acknowledged = sequence
        count = max(0, count - removed)
    }

    /// Runs `body` on the log's writable connection, creating the outbox's tables there first.
    private func run(_ body: (Database, StatementCache) throws(SQLiteError) -> Void) throws(SelectionLogError) {
        let (database, statements) = try log.writableConnection()
        do {
            if !statements.prepared.contains("outbox") {
                try database.execute(Self.schema)
                statements.prepared.insert("outbox")
            }
            try body(database, statements)
        } catch {
            throw SelectionLogError(error, path: log.path)
        }
    }
}
