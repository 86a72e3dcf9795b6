import CSQLite
import PlacedCore

/// Fleet commands (`[Fleet] AcceptCommands=yes`) change the own places as PutPlaces and DeletePlaces do,
/// and are applied once per request id: the id is remembered in the change's own transaction, so a
/// broker delivering the command again, before or after a crash, finds it done. The `tst` of places
/// an OwnTracks setWaypoints made is kept beside them: their `wtst` in the transitions they cause.
extension OwnPlaceStore {
    /// What a command did the first time, by request id.
    public struct CommandRecord: Sendable, Equatable {
        public var put: Int
        public var deleted: Int
    }

    /// Request ids remembered: the newest, in the order they came. A broker redelivers a message it has
    /// not seen acknowledged, within one session: far fewer than this.
    public static let rememberedCommands = 10_000

    /// `sequence` orders the commands as they came, for forgetting the oldest: not `applied`, the wall
    /// clock, which a device may start with years in the past (the id just stored would be the oldest).
    static let commandSchema = """
        CREATE TABLE IF NOT EXISTS fleet_commands(
            sequence INTEGER PRIMARY KEY,
            request TEXT NOT NULL UNIQUE,
            put INTEGER NOT NULL,
            deleted INTEGER NOT NULL,
            applied REAL NOT NULL
        );
        CREATE TABLE IF NOT EXISTS own_place_waypoints(
            id TEXT PRIMARY KEY,
            tst INTEGER NOT NULL
        ) WITHOUT ROWID;
        """

    /// A place put again by other means than a waypoint, or deleted, has no waypoint time: its
    /// transitions' `wtst` would otherwise be an earlier place's.
    static func forgetWaypointTimes(
        of ids: [String], _ database: Database, _ statements: StatementCache
    ) throws(SQLiteError) {
        let forget = try statements.statement("DELETE FROM own_place_waypoints WHERE id = ?", on: database)
        for id in ids {
            defer { forget.reset() }
            try forget.bind(id, at: 1)
            _ = try forget.step()
        }
    }

    /// The command of `request` if it was applied (and is still remembered).
    public func command(_ request: String) throws(SelectionLogError) -> CommandRecord? {
        try reading("fleet_commands") { database -> CommandRecord? in
            let query = try database.prepare("SELECT put, deleted FROM fleet_commands WHERE request = ?")
            try query.bind(request, at: 1)
            guard try query.step() else { return nil }
            return CommandRecord(put: Int(query.int64(at: 0)), deleted: Int(query.int64(at: 1)))
        } ?? nil
    }

    /// The `tst` of the OwnTracks waypoint that made place `id`, if one did.
    public func waypointTime(of id: String) throws(SelectionLogError) -> Int64? {
        try reading("own_place_waypoints") { database -> Int64? in
            let query = try database.prepare("SELECT tst FROM own_place_waypoints WHERE id = ?")
            try query.bind(id, at: 1)
            return try query.step() ? query.int64(at: 0) : nil
        } ?? nil
    }

    /// Puts `put` and deletes `delete` in one transaction with the request id (and the waypoints'
    /// times; the newest `limit` request ids are kept), then runs `alongside` in it (the fleet's result row): all of it commits, or none.
    /// Returns what it did. The batch must be valid and its ids distinct (`FleetCommand.parse`).
    public func apply(
        request: String, put: [OwnPlace], delete: [String], waypointTimes: [String: Int64], at time: Double,
        remembering limit: Int = OwnPlaceStore.rememberedCommands, alongside: (CommandRecord) throws -> Void
    ) throws(SelectionLogError) -> CommandRecord {
        let (database, statements) = try log.writableConnection()
        do {
            try prepare(database)
            let record = try database.transaction {
                let insert = try statements.statement(Self.putSQL, on: database)
                for place in put { try Self.insert(place, with: insert) }
                let deleted = try Self.deleteRows(of: delete, database, statements)
                try Self.forgetWaypointTimes(of: put.map(\.id), database, statements)
                let keep = try statements.statement(
                    "INSERT INTO own_place_waypoints(id, tst) VALUES(?, ?)", on: database)
                for (id, tst) in waypointTimes.sorted(by: { $0.key < $1.key }) {
                    defer { keep.reset() }
                    try keep.bind(id, at: 1)
                    try keep.bind(tst, at: 2)
                    _ = try keep.step()
                }
                let record = CommandRecord(put: put.count, deleted: deleted)
                let remember = try statements.statement(
                    "INSERT INTO fleet_commands(request, put, deleted, applied) VALUES(?, ?, ?, ?)", on: database)
                defer { remember.reset() }
                try remember.bind(request, at: 1)
                try remember.bind(Int64(record.put), at: 2)
                try remember.bind(Int64(record.deleted), at: 3)
                try remember.bind(time, at: 4)
                _ = try remember.step()
                try database.execute(
                    "DELETE FROM fleet_commands WHERE sequence <= (SELECT max(sequence) FROM fleet_commands) - "
                        + "\(max(1, limit))")
                try alongside(record)
                return record
            }
            return record
        } catch {
            throw failure(error)
        }
    }
}
