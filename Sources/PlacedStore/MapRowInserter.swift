import CSQLite
import PlacedThreads

/// `map_features`' rows inserted on a thread of their own while the caller reads the next records from
/// the spill (a `pread` each, about a third of the map step when both were on one thread): the records
/// are gathered into batches, each row bound from its record's own bytes, 64 rows an INSERT (as
/// `RowInserter` does the places'). Rows are numbered from 1 in the order they are added.
final class MapRowInserter {
    /// Rows a job: enough that the hand-over costs nothing beside the inserts, few enough to be small.
    static let batchSize = 1_024

    static func undecodable(_ feature: UInt32) -> String { "map feature \(feature)'s spilled row does not decode" }

    private let insert: MultiRowInsert
    private let worker: OrderedWorker
    /// The first failure on the worker (set there, read after `wait`).
    private let failure = FailureBox()
    /// The batch: its records end to end, where each ends, each one's feature number (for an error).
    private var bytes: [UInt8] = []
    private var ends: [Int] = []
    private var features: [UInt32] = []
    private var nextRowid: Int64 = 1

    init(into database: Database) throws(SQLiteError) {
        insert = try MultiRowInsert(
            into: "map_features", columns: "rowid, id, kind, class, name, names, geometry", parametersARow: 7,
            on: database)
        // Its thread once nothing can throw: nothing would stop it.
        worker = OrderedWorker(depth: 4)
        ends.reserveCapacity(Self.batchSize)
        features.reserveCapacity(Self.batchSize)
    }

    /// Feature `feature`'s spilled record (`MapFeatureRecord`'s bytes) as the next row.
    func add(record: UnsafeRawBufferPointer, feature: UInt32) {
        bytes.append(contentsOf: record)
        ends.append(bytes.count)
        features.append(feature)
        if ends.count == Self.batchSize { flush() }
    }

    /// Waits for every row; throws the first failure (a record that does not decode, SQLite's error).
    func finish() throws(SQLiteError) {
        flush()
        worker.wait()
        if let error = failure.error { throw error }
    }

    /// Runs what is queued and ends the thread.
    func stop() { worker.stop() }

    private func flush() {
        guard !ends.isEmpty else { return }
        let (bytes, ends, features, first) = (bytes, ends, features, nextRowid)
        nextRowid += Int64(ends.count)
        self.bytes.removeAll(keepingCapacity: true)
        self.ends.removeAll(keepingCapacity: true)
        self.features.removeAll(keepingCapacity: true)
        let (insert, failure) = (insert, failure)
        worker.submit {
            guard failure.error == nil else { return }
            bytes.withUnsafeBytes { raw in
                func bind(_ offset: Int, to statement: Statement, after parameter: Int32) throws(SQLiteError) {
                    let start = offset == 0 ? 0 : ends[offset - 1]
                    guard let row = MapFeatureRecord(UnsafeRawBufferPointer(rebasing: raw[start..<ends[offset]])) else {
                        throw SQLiteError(
                            code: SQLITE_CORRUPT, message: Self.undecodable(features[offset]), operation: "decode")
                    }
                    try statement.bind(first + Int64(offset), at: parameter + 1)
                    try statement.bind(borrowedText: row.id, at: parameter + 2)
                    try statement.bind(row.kind.rawValue, at: parameter + 3)
                    try statement.bind(borrowedText: row.featureClass, at: parameter + 4)
                    for (text, column) in [(row.name, Int32(5)), (row.names, 6)] {
                        if let text {
                            try statement.bind(borrowedText: text, at: parameter + column)
                        } else {
                            try statement.bindNull(at: parameter + column)
                        }
                    }
                    try statement.bind(borrowedBlob: row.geometry, at: parameter + 7)
                }
                do throws(SQLiteError) {
                    try insert.insert(count: ends.count, bind: bind)
                } catch {
                    failure.error = error
                }
            }
        }
    }

    private final class FailureBox: @unchecked Sendable {
        var error: SQLiteError?
    }
}
