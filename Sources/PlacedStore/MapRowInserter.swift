import CSQLite
import PlacedThreads

/// `map_features`' rows inserted on a thread of their own while the caller reads the next records from
/// the spill (a `pread` each, about a third of the map step when both were on one thread): the records
/// are gathered into batches, each row bound from its record's own bytes, 64 rows an INSERT (as
/// `RowInserter` does the places'). Rows are numbered from 1 in the order they are added.
final class MapRowInserter {
    /// Rows a job: enough that the hand-over costs nothing beside the inserts, few enough to be small.
    static let batchSize = 1_024
    /// Rows an INSERT statement takes at once: the statement's own cost shared by them.
    static let rowsAStatement = 64
    private static let parametersARow: Int32 = 7

    static func insertSQL(rows: Int) -> String {
        let row = "(" + Array(repeating: "?", count: Int(parametersARow)).joined(separator: ", ") + ")"
        let values = Array(repeating: row, count: rows).joined(separator: ", ")
        return "INSERT INTO map_features(rowid, id, kind, class, name, names, geometry) VALUES \(values)"
    }

    static func undecodable(_ feature: UInt32) -> String { "map feature \(feature)'s spilled row does not decode" }

    private let insert: Statement
    private let insertMany: Statement
    private let path: String
    private let worker = OrderedWorker(depth: 4)
    private let failure = FailureBox()
    /// The batch: its records end to end, where each ends, each one's feature number (for an error).
    private var bytes: [UInt8] = []
    private var ends: [Int] = []
    private var features: [UInt32] = []
    private var nextRowid: Int64 = 1

    init(into database: Database) throws(SQLiteError) {
        insert = try database.prepare(Self.insertSQL(rows: 1))
        insertMany = try database.prepare(Self.insertSQL(rows: Self.rowsAStatement))
        path = database.path
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
    func finish() throws {
        flush()
        worker.wait()
        // Their text was borrowed from batches that are gone.
        insert.clearBindings()
        insertMany.clearBindings()
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
        let (insert, insertMany, failure, path) = (insert, insertMany, failure, path)
        worker.submit {
            guard failure.error == nil else { return }
            bytes.withUnsafeBytes { raw in
                func bind(_ offset: Int, to statement: Statement, after parameter: Int32) throws {
                    let start = offset == 0 ? 0 : ends[offset - 1]
                    guard let row = MapFeatureRecord(UnsafeRawBufferPointer(rebasing: raw[start..<ends[offset]])) else {
                        throw PlaceDatabaseError.corrupt(path: path, detail: Self.undecodable(features[offset]))
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
                do {
                    var start = 0
                    while ends.count - start >= Self.rowsAStatement {
                        for row in 0..<Self.rowsAStatement {
                            try bind(start + row, to: insertMany, after: Self.parametersARow * Int32(row))
                        }
                        try insertMany.step()
                        insertMany.reset()
                        start += Self.rowsAStatement
                    }
                    for offset in start..<ends.count {
                        try bind(offset, to: insert, after: 0)
                        try insert.step()
                        insert.reset()
                    }
                } catch {
                    failure.error = error
                }
            }
        }
    }

    private final class FailureBox: @unchecked Sendable {
        var error: (any Error)?
    }
}
