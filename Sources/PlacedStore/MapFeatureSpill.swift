import PlacedCore

/// The map layer on its way into a places file: each feature checked and encoded as the row it
/// becomes (`MapFeatureRecord`) and appended to a nameless temporary file as it comes, and its `Entry`
/// (its box and where its record is, 32 bytes) to another, memory keeping only the extent of the
/// boxes' centres: the layer costs the import nothing that grows with it until it is written, where
/// the features themselves took about 400 bytes each (5.3 GB for city-10M's 13 M) and their boxes
/// and record starts in memory 24 (943 MB for city-30M's 39 M).
///
/// `hilbertBuckets(bucketBytes:)` then `HilbertBuckets.forEach` read them back in the rows' order, bucket
/// by bucket (`HilbertOrder`).
final class MapFeatureSpill {
    /// A spilled feature: its box as `map_bounds` stores it, where its record is, and its number
    /// (its place in the order features came).
    struct Entry: BitwiseCopyable {
        var box: PackedRTree.Box
        var start: Int
        var length: UInt32
        var number: UInt32
    }

    /// What ordering a bucket takes a feature: its entry, its sort key and the sort's scratch.
    static let bytesPerOrderedEntry = MemoryLayout<Entry>.stride + 16

    let directory: String
    private let file: TemporaryFile
    private var writer: FileWriter
    private let entryFile: TemporaryFile
    private var entryWriter: FileWriter
    private var record: [UInt8] = []
    private var order = HilbertOrder()

    private(set) var count = 0
    /// `hilbertBuckets` has run: the entries' file is gone, no feature may come.
    private var isOrdered = false

    init(in directory: String) throws(PlaceDatabaseError) {
        self.directory = directory
        file = try TemporaryFile(in: directory)
        writer = FileWriter(descriptor: file.descriptor, path: file.name, offset: 0)
        entryFile = try TemporaryFile(in: directory)
        entryWriter = FileWriter(descriptor: entryFile.descriptor, path: entryFile.name, offset: 0, buffer: 1 << 16)
    }

    /// Checks `feature` and appends its record and entry. A bad feature leaves the spill as it was; one
    /// that cannot be written leaves it unusable (a record or entry may be half in): its writer stops
    /// at the first failure (`PlaceFileWriter.add`).
    func add(_ feature: MapFeature) throws(PlaceDatabaseError) {
        try PlaceDatabase.validate(feature)
        precondition(!isOrdered, "a map feature added to a spill already ordered")
        precondition(count < Int(UInt32.max), "more map features than 32-bit numbers reach")
        record.removeAll(keepingCapacity: true)
        MapFeatureRecord.encode(feature, into: &record)
        let entry = Entry(
            box: BoundsCoding.box(feature.bounds), start: writer.offset, length: UInt32(record.count),
            number: UInt32(count))
        try writer.append(record)
        try entryWriter.append(raw: entry)
        order.include(entry.box)
        count += 1
    }

    /// The features ordered along the Hilbert curve of the boxes' centres, to be visited in that order
    /// (`HilbertBuckets.forEach`): the entries are counted along the curve, then distributed into
    /// buckets of consecutive stretches of it (`BucketPlan`) of about `bucketBytes` each, with a 64 kB
    /// buffer a bucket while they are filled. Once only: the entries' file goes once they are in their
    /// buckets, so disk holds at most 64 bytes a feature beside the records (the entries and the
    /// buckets, as the last is filled), then the buckets, each freed as it is read.
    func hilbertBuckets(bucketBytes: Int) throws -> HilbertBuckets {
        precondition(!isOrdered, "a spill is ordered once")
        isOrdered = true
        try writer.flush()
        try entryWriter.flush()
        guard count > 0 else {
            return HilbertBuckets(buckets: [], sizes: [], order: order, records: Reader(file: file))
        }
        func stretch(_ entry: Entry) -> Int { Int(order.code(of: entry.box) >> 16) }

        var counts = [Int](repeating: 0, count: BucketPlan.stretches)
        try forEachEntry { counts[stretch($0)] += 1 }
        let plan = BucketPlan(counts: counts, perBucketLimit: max(1, bucketBytes / Self.bytesPerOrderedEntry))
        counts = []
        let (bucketOfStretch, sizes) = (plan.bucketOfStretch, plan.sizes)

        var buckets: [TemporaryFile] = []
        var writers: [FileWriter] = []
        for _ in sizes.indices {
            let bucket = try TemporaryFile(in: directory)
            buckets.append(bucket)
            writers.append(FileWriter(descriptor: bucket.descriptor, path: bucket.name, offset: 0, buffer: 1 << 16))
        }
        try forEachEntry { entry in
            let bucket = Int(bucketOfStretch[stretch(entry)])
            try writers[bucket].append(raw: entry)
        }
        for index in writers.indices { try writers[index].flush() }
        entryFile.close()
        return HilbertBuckets(buckets: buckets, sizes: sizes, order: order, records: Reader(file: file))
    }

    /// The spill's features in buckets along the curve (`hilbertBuckets`).
    final class HilbertBuckets {
        private var buckets: [TemporaryFile]
        /// Each bucket's entries.
        let sizes: [Int]
        private let order: HilbertOrder
        private let records: Reader

        fileprivate init(buckets: [TemporaryFile], sizes: [Int], order: HilbertOrder, records: Reader) {
            self.buckets = buckets
            self.sizes = sizes
            self.order = order
            self.records = records
        }

        /// Calls `body` with every feature's entry and record (its bytes valid until the next call) in
        /// the curve's order, ties in the order they came: each bucket in turn read, sorted in memory
        /// and given back. Once only.
        func forEach(_ body: (Entry, UnsafeRawBufferPointer) throws -> Void) throws {
            precondition(buckets.count == sizes.count, "the buckets are visited once")
            defer { buckets = [] }
            for (bucket, size) in zip(buckets, sizes) {
                let entries = try [Entry](unsafeUninitializedCapacity: size) {
                    (buffer, initialized) throws(PlaceDatabaseError) in
                    try bucket.read(at: 0, into: UnsafeMutableRawBufferPointer(buffer))
                    initialized = size
                }
                bucket.close()
                var keys = entries.indices.map { UInt64(order.code(of: entries[$0].box)) << 32 | UInt64($0) }
                keys.sort()
                for key in keys {
                    let entry = entries[Int(UInt32(truncatingIfNeeded: key))]
                    try body(entry, try records.bytes(of: entry))
                }
            }
        }
    }

    /// Buckets of consecutive stretches of the curve (each a 65,536th of it, the top 16 bits of a
    /// code) for entries counted by stretch: as few as hold at most `perBucketLimit` each, and at
    /// most 256 (`PlaceFileWriter.bucketCount`), each about an equal share. A stretch is never split, so a bucket outgrows the limit
    /// where the boxes crowd into one stretch, or where 256 buckets are too few (beyond 715 M
    /// features at the import's default limit).
    struct BucketPlan: Equatable {
        static let stretches = 1 << 16

        /// Each stretch's bucket.
        var bucketOfStretch: [UInt8]
        /// Each bucket's entries.
        var sizes: [Int]

        init(counts: [Int], perBucketLimit: Int) {
            precondition(counts.count == Self.stretches && perBucketLimit > 0)
            let count = counts.reduce(0, +)
            let wanted = PlaceFileWriter.bucketCount(count, limit: perBucketLimit)
            let perBucket = (count + wanted - 1) / wanted
            bucketOfStretch = [UInt8](repeating: 0, count: Self.stretches)
            sizes = [0]
            for index in 0..<Self.stretches {
                if sizes[sizes.count - 1] >= perBucket, counts[index] > 0, sizes.count < wanted { sizes.append(0) }
                bucketOfStretch[index] = UInt8(sizes.count - 1)
                sizes[sizes.count - 1] += counts[index]
            }
        }
    }

    /// Each entry in the order the features came.
    private func forEachEntry(_ body: (Entry) throws -> Void) throws {
        let reader = SpillReader(file: entryFile, size: entryWriter.offset)
        for _ in 0..<count {
            try body(try reader.read(as: Entry.self))
        }
    }

    /// Reads a record at a time with one `pread` into a buffer it reuses: memory holds one record
    /// whatever the order they are read in. (Rows are read in the curve's order, which jumps about the
    /// file; a mapping of it grew to the whole spill however often its pages were given back, as the
    /// kernel maps a large folio around each read.)
    final class Reader {
        private let file: TemporaryFile
        private var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)

        fileprivate init(file: TemporaryFile) { self.file = file }

        deinit { buffer.deallocate() }

        /// `entry`'s record as spilled, valid until the next call.
        func bytes(of entry: Entry) throws(PlaceDatabaseError) -> UnsafeRawBufferPointer {
            let count = Int(entry.length)
            if count > buffer.count {
                buffer.deallocate()
                buffer = .allocate(byteCount: max(count, 2 * buffer.count), alignment: 8)
            }
            let bytes = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
            try file.read(at: entry.start, into: bytes)
            return UnsafeRawBufferPointer(bytes)
        }
    }
}

/// A map feature's `map_features` row as spilled: the kind's code (`MapFeature.Kind.allCases` index),
/// then id, class, name, names (`LocalizedNamesCoding`) and geometry (`MapGeometryCoding`), each a
/// little-endian u32 length and its bytes (the name and names: `absent` for none).
struct MapFeatureRecord {
    static let absent = UInt32.max
    /// By code (`allCases` made once, not an array a record).
    private static let kinds = MapFeature.Kind.allCases

    let kind: MapFeature.Kind
    let id: UnsafeRawBufferPointer
    let featureClass: UnsafeRawBufferPointer
    let name: UnsafeRawBufferPointer?
    let names: UnsafeRawBufferPointer?
    let geometry: UnsafeRawBufferPointer

    static func encode(_ feature: MapFeature, into bytes: inout [UInt8]) {
        bytes.append(UInt8(kinds.firstIndex(of: feature.kind)!))
        func length(_ count: Int) { withUnsafeBytes(of: UInt32(count).littleEndian) { bytes.append(contentsOf: $0) } }
        func text(_ value: String?) {
            guard let value else { return length(Int(absent)) }
            length(value.utf8.count)
            bytes.append(contentsOf: value.utf8)
        }
        text(feature.id)
        text(feature.featureClass)
        text(feature.name)
        text(LocalizedNamesCoding.encode(feature.localizedNames))
        // The geometry's length goes before it once it is known.
        let lengthAt = bytes.count
        length(0)
        MapGeometryCoding.encode(feature.geometry, into: &bytes)
        let geometryLength = UInt32(bytes.count - lengthAt - 4).littleEndian
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: geometryLength, toByteOffset: lengthAt, as: UInt32.self) }
    }

    /// Nil for bytes `encode` does not write.
    init?(_ bytes: UnsafeRawBufferPointer) {
        var position = 1
        func field() -> UnsafeRawBufferPointer?? {
            guard position + 4 <= bytes.count else { return nil }
            let length = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self))
            position += 4
            if length == Self.absent { return .some(nil) }
            guard Int(length) <= bytes.count - position else { return nil }
            defer { position += Int(length) }
            return UnsafeRawBufferPointer(rebasing: bytes[position..<position + Int(length)])
        }
        guard let code = bytes.first, Int(code) < Self.kinds.count,
            let id = field() ?? nil, let featureClass = field() ?? nil, let name = field(), let names = field(),
            let geometry = field() ?? nil, position == bytes.count
        else { return nil }
        kind = Self.kinds[Int(code)]
        self.id = id
        self.featureClass = featureClass
        self.name = name
        self.names = names
        self.geometry = geometry
    }
}
