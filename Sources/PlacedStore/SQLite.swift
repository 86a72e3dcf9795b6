import CSQLite

/// The one error funnel for SQLite: the (extended) result code, SQLite's own message, and what
/// this code was doing when the call failed.
public struct SQLiteError: Error, Equatable, CustomStringConvertible {
    /// Extended result code (`SQLITE_CONSTRAINT_UNIQUE`, `SQLITE_CANTOPEN_ISDIR`, …).
    public let code: Int32
    /// `sqlite3_errmsg` at the time of the failure (or `sqlite3_errstr` when there was no handle).
    public let message: String
    /// The operation: "open /var/lib/placed/places.db", "prepare SELECT …", "step INSERT …".
    public let operation: String

    public init(code: Int32, message: String, operation: String) {
        self.code = code
        self.message = message
        self.operation = operation
    }

    /// The primary result code (`SQLITE_CONSTRAINT` for `SQLITE_CONSTRAINT_UNIQUE`).
    public var primaryCode: Int32 { code & 0xff }

    public var description: String { "SQLite error \(code) in \(operation): \(message)" }

    init(code: Int32, handle: OpaquePointer?, operation: @autoclosure () -> String) {
        let text =
            handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
        self.init(code: code, message: text, operation: operation())
    }
}

/// A connection to one SQLite database file.
///
/// Not thread-safe by design: one connection belongs to one thread (the daemon's event loop, or an
/// importer). Statements keep their connection alive.
public final class Database {
    public enum Mode: Sendable {
        /// The file must exist; nothing can be written.
        case readOnly
        /// The file must exist.
        case readWrite
        /// Creates the file when absent.
        case readWriteCreate
        /// Read-only, and nothing changes the file while it is open (read-only media): no locks and no
        /// -wal or -shm files, so a WAL database opens where they cannot be created.
        case immutable
    }

    let handle: OpaquePointer
    public let path: String

    public init(path: String, mode: Mode = .readWriteCreate) throws(SQLiteError) {
        var flags = SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_NOMUTEX
        switch mode {
        case .readOnly: flags |= SQLITE_OPEN_READONLY
        case .readWrite: flags |= SQLITE_OPEN_READWRITE
        case .readWriteCreate: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        case .immutable: flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
        }
        let name = mode == .immutable ? Self.uri(path) + "?immutable=1" : path
        var handle: OpaquePointer?
        let result = sqlite3_open_v2(name, &handle, flags, nil)
        guard result == SQLITE_OK, let handle else {
            let error = SQLiteError(code: result, handle: handle, operation: "open \(path)")
            sqlite3_close_v2(handle)  // a failed open may still allocate a handle
            throw error
        }
        self.handle = handle
        self.path = path
    }

    /// A read-only connection to a database image in memory that outlives the connection (a mapped
    /// file's SQLite part): SQLite reads its pages where they are (`sqlite3_deserialize` with
    /// `SQLITE_DESERIALIZE_READONLY`, memory-mapped I/O up to SQLite's limit), so a query makes no
    /// system call and no lock is ever taken.
    public init(image: UnsafeRawBufferPointer, name: String) throws(SQLiteError) {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY
        let result = sqlite3_open_v2(":memory:", &handle, flags, nil)
        guard result == SQLITE_OK, let handle else {
            let error = SQLiteError(code: result, handle: handle, operation: "open \(name)")
            sqlite3_close_v2(handle)
            throw error
        }
        let size = Int64(image.count)
        // SQLite never writes through the pointer of a read-only image; its API just predates const.
        let data = UnsafeMutablePointer(mutating: image.baseAddress?.assumingMemoryBound(to: UInt8.self))
        let loaded = sqlite3_deserialize(handle, "main", data, size, size, UInt32(SQLITE_DESERIALIZE_READONLY))
        guard loaded == SQLITE_OK else {
            let error = SQLiteError(code: loaded, handle: handle, operation: "open \(name)")
            sqlite3_close_v2(handle)
            throw error
        }
        self.handle = handle
        path = name
        // Pages straight from the image instead of copies in SQLite's page cache.
        try? execute("PRAGMA mmap_size = \(size)")
    }

    deinit { sqlite3_close_v2(handle) }

    /// Copies this database whole over `target`'s main database (SQLite's online backup): how a benchmark
    /// keeps an R*Tree that takes minutes to build in a file and reads it back into memory.
    public func copy(into target: Database) throws(SQLiteError) {
        guard let backup = sqlite3_backup_init(target.handle, "main", handle, "main") else {
            throw SQLiteError(code: sqlite3_errcode(target.handle), handle: target.handle, operation: "backup")
        }
        let stepped = sqlite3_backup_step(backup, -1)
        let finished = sqlite3_backup_finish(backup)
        guard stepped == SQLITE_DONE, finished == SQLITE_OK else {
            throw SQLiteError(
                code: stepped == SQLITE_DONE ? finished : stepped, handle: target.handle, operation: "backup")
        }
    }

    /// `file:` URI of a path: every byte but unreserved characters and `/` percent-encoded.
    static func uri(_ path: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes = Array("file:".utf8)
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                bytes.append(byte)
            default:
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether writes are refused: opened read-only, or SQLite fell back to reading because the file or
    /// its file system is read-only.
    public var isReadOnly: Bool { sqlite3_db_readonly(handle, "main") == 1 }

    /// Runs one or more statements that return no rows (schema, pragmas, transaction control).
    public func execute(_ sql: String) throws(SQLiteError) {
        try check(sqlite3_exec(handle, sql, nil, nil, nil), sql)
    }

    public func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        var statement: OpaquePointer?
        try check(
            sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil),
            "prepare \(sql)")
        guard let statement else {
            throw SQLiteError(
                code: SQLITE_MISUSE, message: "no statement in SQL text", operation: "prepare \(sql)")
        }
        return Statement(handle: statement, database: self, sql: sql)
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`; any error rolls back and is rethrown unchanged.
    public func transaction<Result>(_ body: () throws -> Result) throws -> Result {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            // The transaction may already be gone (SQLite rolls back itself on some errors).
            if sqlite3_get_autocommit(handle) == 0 { _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil) }
            throw error
        }
    }

    /// Runs `body` inside one read transaction (`BEGIN DEFERRED … COMMIT`): many statements take the
    /// file's shared lock once instead of once each, two fcntl calls a statement fewer.
    public func reading<Result>(_ body: () throws -> Result) throws -> Result {
        try execute("BEGIN DEFERRED")
        defer { if sqlite3_get_autocommit(handle) == 0 { _ = sqlite3_exec(handle, "COMMIT", nil, nil, nil) } }
        return try body()
    }

    /// The first column of the first row of `sql`, when it is an integer.
    /// Lets plain SQL write the shadow tables of this connection's virtual tables (SQLite's defensive
    /// mode off, whatever the library's build chose): for a writer that lays out an R*Tree itself.
    func allowShadowTableWrites() throws(SQLiteError) {
        try check(placed_sqlite_set_defensive(handle, 0), "turning defensive mode off")
    }

    public func scalarInt64(_ sql: String) throws(SQLiteError) -> Int64? {
        let statement = try prepare(sql)
        guard try statement.step(), !statement.isNull(at: 0) else { return nil }
        return statement.int64(at: 0)
    }

    /// Opens one BLOB cell for incremental reading: SQLite copies straight into caller-owned memory
    /// instead of materialising the whole value first.
    public func openBlob(table: String, column: String, rowid: Int64) throws(SQLiteError) -> Blob {
        var blob: OpaquePointer?
        try check(
            sqlite3_blob_open(handle, "main", table, column, rowid, 0, &blob),
            "open blob \(table).\(column)")
        guard let blob else {
            throw SQLiteError(
                code: SQLITE_MISUSE, message: "no blob handle", operation: "open blob \(table).\(column)")
        }
        return Blob(handle: blob, database: self, name: "\(table).\(column)")
    }

    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Rows the last INSERT, UPDATE or DELETE changed.
    public var changes: Int { Int(sqlite3_changes64(handle)) }

    /// Whether a transaction is open (BEGIN without COMMIT yet): statements run inside it.
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    @inline(__always)
    func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(SQLiteError) {
        if result != SQLITE_OK {
            throw SQLiteError(code: result, handle: handle, operation: operation())
        }
    }
}

/// A prepared statement. Bind parameters (1-based, as in SQLite), `step` through rows, read columns
/// (0-based), `reset` to run it again.
public final class Statement {
    let handle: OpaquePointer
    /// Strong: a statement must not outlive its connection.
    let database: Database
    public let sql: String

    init(handle: OpaquePointer, database: Database, sql: String) {
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    // MARK: Binding

    public func bind(_ value: Int64, at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_int64(handle, index, value), "bind")
    }

    public func bind(_ value: Int, at index: Int32) throws(SQLiteError) {
        try bind(Int64(value), at: index)
    }

    public func bind(_ value: Double, at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_double(handle, index, value), "bind")
    }

    public func bind(_ value: String, at index: Int32) throws(SQLiteError) {
        // Transient: SQLite copies the UTF-8 bytes, which live only for this call. The explicit
        // length keeps an embedded NUL from cutting the text short. A native string's own bytes when
        // it has them (no C string made a bind); a null pointer would bind NULL, so "" goes as a C string.
        var value = value
        let result = value.withUTF8 { bytes -> Int32 in
            guard let base = bytes.baseAddress, bytes.count > 0 else {
                return sqlite3_bind_text(handle, index, "", 0, placed_sqlite_transient())
            }
            return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                sqlite3_bind_text(handle, index, $0, Int32(bytes.count), placed_sqlite_transient())
            }
        }
        try check(result, "bind")
    }

    public func bind(blob bytes: UnsafeRawBufferPointer, at index: Int32) throws(SQLiteError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            // An empty blob, not NULL.
            return try check(sqlite3_bind_zeroblob(handle, index, 0), "bind")
        }
        try check(sqlite3_bind_blob64(handle, index, base, UInt64(bytes.count), placed_sqlite_transient()), "bind")
    }

    public func bind(blob bytes: [UInt8], at index: Int32) throws(SQLiteError) {
        // Array.withUnsafeBytes is untyped `rethrows`: carry the typed error out by hand.
        let failure: SQLiteError? = bytes.withUnsafeBytes { raw in
            do throws(SQLiteError) {
                try bind(blob: raw, at: index)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// UTF-8 text bound without a copy (SQLITE_STATIC): the bytes must stay valid and unchanged until the
    /// statement has been stepped and the parameter bound again. Empty is "", not NULL, as `bind(String)`.
    func bind(borrowedText bytes: UnsafeRawBufferPointer, at index: Int32) throws(SQLiteError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            return try check(sqlite3_bind_text(handle, index, "", 0, placed_sqlite_transient()), "bind")
        }
        let result = sqlite3_bind_text(
            handle, index, base.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
        try check(result, "bind")
    }

    /// A blob bound without a copy, as `bind(borrowedText:at:)`; empty is an empty blob, as `bind(blob:at:)`.
    func bind(borrowedBlob bytes: UnsafeRawBufferPointer, at index: Int32) throws(SQLiteError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            return try check(sqlite3_bind_zeroblob(handle, index, 0), "bind")
        }
        try check(sqlite3_bind_blob64(handle, index, base, UInt64(bytes.count), nil), "bind")
    }

    public func bindNull(at index: Int32) throws(SQLiteError) {
        try check(sqlite3_bind_null(handle, index), "bind")
    }

    public func bind(_ value: String?, at index: Int32) throws(SQLiteError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    public func bind(_ value: Double?, at index: Int32) throws(SQLiteError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    // MARK: Running

    /// Advances to the next row: `true` when a row is available, `false` when the statement is done.
    @discardableResult
    public func step() throws(SQLiteError) -> Bool {
        let result = sqlite3_step(handle)
        switch result {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw SQLiteError(code: result, handle: database.handle, operation: "step \(sql)")
        }
    }

    /// Makes the statement runnable again; bindings are kept.
    public func reset() {
        // The result repeats the last step's error, which step() already reported.
        sqlite3_reset(handle)
    }

    /// Forgets every bound value: borrowed bytes (`bind(borrowedText:at:)`) may then go.
    func clearBindings() { sqlite3_clear_bindings(handle) }

    // MARK: Columns

    public func isNull(at column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    public func int64(at column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    public func double(at column: Int32) -> Double { sqlite3_column_double(handle, column) }

    /// Text of the column; `nil` for NULL.
    public func text(at column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// The column's bytes, valid only inside `body` (until the next step, reset or column call).
    /// NULL reads as an empty buffer.
    public func withBlob<Result>(at column: Int32, _ body: (UnsafeRawBufferPointer) throws -> Result)
        rethrows
        -> Result
    {
        let base = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        return try body(UnsafeRawBufferPointer(start: base, count: base == nil ? 0 : count))
    }

    @inline(__always)
    private func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(SQLiteError) {
        if result != SQLITE_OK {
            throw SQLiteError(code: result, handle: database.handle, operation: "\(operation()) \(sql)")
        }
    }
}

/// A read-only handle on one BLOB cell (`Database.openBlob`).
public final class Blob {
    let handle: OpaquePointer
    let database: Database
    let name: String

    init(handle: OpaquePointer, database: Database, name: String) {
        self.handle = handle
        self.database = database
        self.name = name
    }

    deinit { sqlite3_blob_close(handle) }

    /// Size in bytes.
    public var count: Int { Int(sqlite3_blob_bytes(handle)) }

    /// Fills `buffer` with the bytes starting at `offset`.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int = 0)
        throws(SQLiteError)
    {
        guard buffer.count > 0 else { return }
        let result = sqlite3_blob_read(handle, buffer.baseAddress, Int32(buffer.count), Int32(offset))
        if result != SQLITE_OK {
            throw SQLiteError(code: result, handle: database.handle, operation: "read blob \(name)")
        }
    }
}

/// A bulk INSERT of many rows a statement: the statement's own cost (a cursor opened, the program run
/// and halted, the reset) shared by `rowsAStatement` rows, the rows those of inserting each alone;
/// the rows after the last whole statement go in one at a time. The caller binds each row's values.
struct MultiRowInsert {
    let parametersARow: Int32
    let rowsAStatement: Int
    private let single: Statement
    private let many: Statement

    /// INSERT INTO `table`(`columns`), `parametersARow` of them. 64 rows a statement wrote the places'
    /// rows 11 % faster than 16 did, 256 no faster than 64 (`placed-bench import`).
    init(
        into table: String, columns: String, parametersARow: Int32, rowsAStatement: Int = 64, on database: Database
    ) throws(SQLiteError) {
        self.parametersARow = parametersARow
        self.rowsAStatement = rowsAStatement
        let row = "(" + Array(repeating: "?", count: Int(parametersARow)).joined(separator: ", ") + ")"
        func sql(rows: Int) -> String {
            "INSERT INTO \(table)(\(columns)) VALUES " + Array(repeating: row, count: rows).joined(separator: ", ")
        }
        single = try database.prepare(sql(rows: 1))
        many = try database.prepare(sql(rows: rowsAStatement))
    }

    /// Inserts rows 0 ..< `count`: `bind(row, statement, after)` binds row's values to `statement`'s
    /// parameters after the first `after`.
    /// Unbinds them after, on every path: text bound borrowed must not be read once its memory goes.
    func insert(count: Int, bind: (Int, Statement, Int32) throws(SQLiteError) -> Void) throws(SQLiteError) {
        defer {
            single.clearBindings()
            many.clearBindings()
        }
        var start = 0
        while count - start >= rowsAStatement {
            for row in 0..<rowsAStatement { try bind(start + row, many, parametersARow * Int32(row)) }
            try many.step()
            many.reset()
            start += rowsAStatement
        }
        for row in start..<count {
            try bind(row, single, 0)
            try single.step()
            single.reset()
        }
    }
}
