import CSQLite

/// `map_features`' rows inserted on a thread of their own (`BatchedRowInserter`) while the caller reads
/// the next records from the spill (a `pread` each, about a third of the map step when both were on one
/// thread), each row bound from its record's own bytes. Rows are numbered from 1 in the order they are
/// added.
final class MapRowInserter {
    static let batchSize = 1_024

    /// Each row's feature number (for an error).
    private let rows: BatchedRowInserter<UInt32>

    init(into database: Database) throws(SQLiteError) {
        let insert = try MultiRowInsert(
            into: "map_features", columns: "rowid, id, kind, class, name, names, geometry", parametersARow: 7,
            on: database)
        rows = BatchedRowInserter(batchSize: Self.batchSize, insert: insert) {
            (feature, record, number, statement, parameter) throws(SQLiteError) in
            guard let row = MapFeatureRecord(record) else {
                throw SQLiteError(
                    code: SQLITE_CORRUPT, message: "map feature \(feature)'s spilled row does not decode",
                    operation: "decode")
            }
            try statement.bind(Int64(number + 1), at: parameter + 1)
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
    }

    /// Feature `feature`'s spilled record (`MapFeatureRecord`'s bytes) as the next row; throws a
    /// failure of the rows before, once known.
    func add(record: UnsafeRawBufferPointer, feature: UInt32) throws(SQLiteError) {
        try rows.add(feature, record: record)
    }

    /// Waits for every row; throws the first failure (a record that does not decode, SQLite's error).
    func finish() throws(SQLiteError) { try rows.finish() }

    /// Runs what is queued and ends the thread.
    func stop() { rows.stop() }
}
