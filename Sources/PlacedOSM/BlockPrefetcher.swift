import PlacedThreads

/// The OSMData blocks of a `PBFReader` read and decompressed on a thread of its own, up to `depth`
/// blocks ahead of the thread that decodes them, and handed out in file order: zlib and the reads no
/// longer wait in line with the decoding. Each block in flight has a buffer of its own (`depth` + 1 of
/// them: the one handed out stays valid until the next `next()`), so memory is bounded by them.
final class BlockPrefetcher {
    struct Block {
        /// The PrimitiveBlock's bytes: valid until the next call to `next()`.
        let bytes: UnsafeRawBufferPointer
        /// Where its blob starts in the file and where the next one does.
        let offset: Int
        let end: Int
    }

    private final class Slot {
        let buffer = ByteBuffer()
        var result: Result<Block?, OSMError> = .success(nil)
    }

    /// What the reading thread alone touches: whether a read has ended the file (or failed).
    private final class ReadState {
        var ended = false
    }

    let depth: Int
    private let reader: PBFReader
    private let offsets: [Int]?
    private let worker: OrderedWorker
    private let slots: [Slot]
    private let state = ReadState()
    /// The number of the block `next()` hands out next; of the reads submitted.
    private var handedOut = 0
    private var submitted = 0

    /// Every data block from where `reader` is, or (`offsets`) only the blocks starting at those offsets.
    init(reader: PBFReader, offsets: [Int]? = nil, depth: Int = 3) {
        self.reader = reader
        self.offsets = offsets
        self.depth = max(1, depth)
        worker = OrderedWorker(depth: self.depth)
        slots = (0...self.depth).map { _ in Slot() }
    }

    deinit { worker.stop() }

    /// The next block in file order; nil after the last.
    func next() throws(OSMError) -> Block? {
        // The block handed out before is done with: its buffer may take a read now.
        while submitted < handedOut + depth { submitRead() }
        worker.wait(forJob: handedOut)
        let slot = slots[handedOut % slots.count]
        handedOut += 1
        return try slot.result.get()
    }

    private func submitRead() {
        let number = submitted
        submitted += 1
        let slot = slots[number % slots.count]
        let reader = reader
        let state = state
        let offset = offsets.map { number < $0.count ? $0[number] : nil }
        worker.submit {
            guard !state.ended, offset != .some(nil) else {
                slot.result = .success(nil)
                return
            }
            reader.output = slot.buffer
            do throws(OSMError) {
                let found: (bytes: UnsafeRawBufferPointer, offset: Int)?
                if let offset = offset ?? nil {
                    found = try reader.dataBlock(at: offset).map { ($0, offset) }
                } else {
                    found = try reader.nextDataBlock()
                }
                if let found {
                    slot.result = .success(Block(bytes: found.bytes, offset: found.offset, end: reader.bytesRead))
                } else {
                    state.ended = true
                    slot.result = .success(nil)
                }
            } catch {
                state.ended = true
                slot.result = .failure(error)
            }
        }
    }
}
