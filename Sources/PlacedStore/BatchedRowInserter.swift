import PlacedThreads

/// Rows inserted in order on a thread of their own (`OrderedWorker`), in batches, while the caller
/// reads what comes next: each row's spilled record is copied into the batch with what else binding it
/// takes (`Row`), and bound from the batch's bytes by `bind` through a `MultiRowInsert`. Row n (from 0)
/// is the nth added. The places' rows (`RowInserter`) and the map layer's (`MapRowInserter`) go in so.
final class BatchedRowInserter<Row> {
    /// Binds row `number`, its `record`'s bytes and its `row`, to the statement's parameters after `after`.
    typealias Bind = (
        _ row: Row, _ record: UnsafeRawBufferPointer, _ number: Int, _ statement: Statement, _ after: Int32
    ) throws(SQLiteError) -> Void

    private let batchSize: Int
    private let insert: MultiRowInsert
    private let bind: Bind
    private let worker: OrderedWorker
    /// The first failure on the worker: set there, read there and by `add` as each batch goes.
    private let failure = FailureBox()
    /// The batch: its records end to end, and each row with where its record ends.
    private var bytes: [UInt8] = []
    private var rows: [(row: Row, end: Int)] = []
    private var nextNumber = 0

    /// `batchSize` rows a job: enough that the hand-over costs nothing beside the inserts, few enough to
    /// be small.
    init(batchSize: Int, insert: MultiRowInsert, bind: @escaping Bind) {
        self.batchSize = batchSize
        self.insert = insert
        self.bind = bind
        worker = OrderedWorker(depth: 4)
        rows.reserveCapacity(batchSize)
    }

    /// `record`'s bytes and `row` as the next row. Throws the worker's first failure once it is
    /// known, as a batch is handed over: at the latest with the batch `depth` + 1 after the one that
    /// failed, as `submit` returns only once all but `depth` waiting and one running are done. The
    /// caller stops reading what no row will take.
    func add(_ row: Row, record: UnsafeRawBufferPointer) throws(SQLiteError) {
        bytes.append(contentsOf: record)
        rows.append((row, bytes.count))
        guard rows.count == batchSize else { return }
        flush()
        if let error = failure.error { throw error }
    }

    /// Waits for every row; throws the first failure.
    func finish() throws(SQLiteError) {
        flush()
        worker.wait()
        if let error = failure.error { throw error }
    }

    /// Runs what is queued and ends the thread.
    func stop() { worker.stop() }

    private func flush() {
        guard !rows.isEmpty else { return }
        let (bytes, rows, first) = (bytes, rows, nextNumber)
        nextNumber += rows.count
        self.bytes.removeAll(keepingCapacity: true)
        self.rows.removeAll(keepingCapacity: true)
        let (insert, bind, failure) = (insert, bind, failure)
        worker.submit {
            guard failure.error == nil else { return }
            bytes.withUnsafeBytes { raw in
                do throws(SQLiteError) {
                    try insert.insert(count: rows.count) { (offset, statement, after) throws(SQLiteError) in
                        let start = offset == 0 ? 0 : rows[offset - 1].end
                        let record = UnsafeRawBufferPointer(rebasing: raw[start..<rows[offset].end])
                        try bind(rows[offset].row, record, first + offset, statement, after)
                    }
                } catch {
                    failure.record(error)
                }
            }
        }
    }

    private final class FailureBox: @unchecked Sendable {
        private let lock = ThreadLock()
        private var first: SQLiteError?

        var error: SQLiteError? { lock.withLock { first } }

        /// Keeps `error` unless one came before.
        func record(_ error: SQLiteError) { lock.withLock { if first == nil { first = error } } }
    }
}
