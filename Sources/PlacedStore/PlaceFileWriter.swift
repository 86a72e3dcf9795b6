import CSQLite
import PlacedCore
import PlacedSystem
import PlacedThreads

#if canImport(Glibc)
    import Glibc
#endif

/// Writes a places file from places handed over one at a time (`PlaceSink`), with memory bounded by
/// `memoryLimit` and a few bytes a place rather than by the places themselves: each place is encoded
/// and spilled to a nameless temporary file beside the destination as it comes.
///
/// `finish` then reads the points back (16 bytes a place) and sorts them into the spatial index's tree
/// order (4 bytes a place more), and writes the places in that order: the spill is distributed into
/// buckets of consecutive tree positions no larger than the limit allows, each bucket is read into
/// memory, ordered, and written out as SQLite rows and as the pack's columns and records. The pack is
/// written to a temporary file of its own and copied after the SQLite part, then the whole file is
/// synced and renamed into place (`PlaceDatabase.replace` is this writer fed from an array).
///
/// Memory at its peak, the sort: 20 bytes a place (600 MB for 30 million places). The temporary files
/// take about three times the records on disk at most, and vanish whatever happens (O_TMPFILE); the
/// file being built (`temporaryPath(for:)`) has a name, removed on a failure, and by `placectl` on
/// Ctrl-C.
public final class PlaceFileWriter: PlaceSink, MapFeatureSink {
    public let path: String
    public let memoryLimit: Int
    public private(set) var count = 0
    /// How many places have their address from each source (after `assignAddresses`).
    public var addressSources: [AddressSource: Int] {
        var counts: [AddressSource: Int] = [:]
        for (code, count) in sourceCounts.enumerated() where count != 0 { counts[PlacePack.sourceCodes[code]] = count }
        return counts
    }
    /// By `PlacePack.sourceCodes` index (an array: counting into a dictionary hashed every place).
    private var sourceCounts = [Int](repeating: 0, count: PlacePack.sourceCodes.count)

    /// What one bucket of places, or of map features, may take in `finish`: half the limit (the rest
    /// is SQLite's cache).
    var bucketBytes: Int { max(1 << 16, memoryLimit / 2) }
    static let maximumBuckets = 256

    /// How many buckets hold `total` (bytes, entries) at most `limit` each: at least one, at most
    /// `maximumBuckets` (then more than `limit` each).
    static func bucketCount(_ total: Int, limit: Int) -> Int {
        min(max(1, (total + limit - 1) / limit), maximumBuckets)
    }

    /// The budget for one bucket of places in `finish` and the SQLite cache, unless told otherwise.
    public static let defaultMemoryLimit = 256 << 20

    private let temporaryPath: String
    private let descriptor: Int32
    private var spill: TemporaryFile
    private var spillWriter: FileWriter
    private var points: TemporaryFile
    private var pointWriter: FileWriter
    private var patches: TemporaryFile?
    /// Bit per place: added without an address, to be derived.
    private var needsAddress: [UInt64] = []
    private var kindCodes: [String: UInt32] = [:]
    private var kinds: [String] = []
    /// The first failure of `add` (a place that is not valid, a full disk): `finish` throws it.
    private var failure: PlaceDatabaseError?
    /// The map layer's features as they came (nil: a file without a map layer), and the first bad one:
    /// apart from the places' state, as an import adds places on its spill thread and features on its own.
    private var mapSpill: MapFeatureSpill?
    private var mapFailure: PlaceDatabaseError?
    private var finished = false
    private var encoder = RecordEncoder()

    /// Bytes before each spilled record: length u32, kind u32, reach f32, area f32, latitude and
    /// longitude f64.
    static let spillPrefix = 32

    /// `mapLayer`: the file has a map layer, whose features come through `add(_ feature:)` (none may).
    public init(path: String, memoryLimit: Int = PlaceFileWriter.defaultMemoryLimit, mapLayer: Bool = false)
        throws(PlaceDatabaseError)
    {
        self.path = path
        self.memoryLimit = max(memoryLimit, 1 << 20)
        temporaryPath = Self.temporaryPath(for: path)
        // A leftover of this same pid is ours by name (a crash before it could clean up).
        unlink(temporaryPath)
        PlaceDatabase.removeAbandonedTemporaries(of: path, marker: ".new-")
        do {
            descriptor = try checkPOSIX(
                Glibc.open(temporaryPath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644), "create")
        } catch {
            throw .cannotWrite(path: temporaryPath, error)
        }
        do {
            let directory = Self.directoryName(of: path)
            spill = try TemporaryFile(in: directory)
            points = try TemporaryFile(in: directory)
            mapSpill = mapLayer ? try MapFeatureSpill(in: directory) : nil
            mapFeatureCount = mapLayer ? 0 : nil
        } catch {
            close(descriptor)
            unlink(temporaryPath)
            throw error
        }
        spillWriter = FileWriter(descriptor: spill.descriptor, path: spill.name, offset: 0)
        pointWriter = FileWriter(descriptor: points.descriptor, path: points.name, offset: 0)
    }

    deinit {
        close(descriptor)
        if !finished { unlink(temporaryPath) }
    }

    static func directoryName(of path: String) -> String { PlaceDatabase.directoryName(of: path) }

    /// The file a writer for `path` builds before renaming it into place: this process's own.
    public static func temporaryPath(for path: String) -> String { "\(path).new-\(getpid())" }

    /// Where its temporary files go (the destination's directory): an import's own belong there too.
    public var scratchDirectory: String { Self.directoryName(of: path) }

    // MARK: Adding

    public func add(_ place: Place) {
        guard failure == nil else { return }
        do {
            try PlaceDatabase.validate(place)
            guard count < Int(Int32.max) - 1 else {
                throw PlaceDatabaseError.invalidPlace(id: place.id, reason: "more places than a file holds")
            }
            let code: UInt32
            if let known = kindCodes[place.kind] {
                code = known
            } else {
                code = UInt32(kinds.count)
                kindCodes[place.kind] = code
                kinds.append(place.kind)
            }
            encoder.bytes.removeAll(keepingCapacity: true)
            encoder.encode(place)
            try spillWriter.append(UInt32(encoder.bytes.count))
            try spillWriter.append(code)
            let reach = place.reach > 0 ? Float(place.reach).nextUp : 0
            try spillWriter.append(reach.bitPattern)
            try spillWriter.append(Float(place.area).bitPattern)
            try spillWriter.append(place.coordinate.latitude.bitPattern)
            try spillWriter.append(place.coordinate.longitude.bitPattern)
            try spillWriter.append(encoder.bytes)
            try pointWriter.append(place.coordinate.longitude.bitPattern)
            try pointWriter.append(place.coordinate.latitude.bitPattern)
            if count % 64 == 0 { needsAddress.append(0) }
            if place.address == nil { needsAddress[count / 64] |= 1 << UInt64(count % 64) }
            sourceCounts[PlacePack.sourceCode(of: place.addressSource)] += 1
            count += 1
        } catch {
            failure = error as? PlaceDatabaseError ?? .invalidPlace(id: place.id, reason: "\(error)")
        }
    }

    /// A map layer feature, checked and spilled; the first bad one (or any, to a writer made without a
    /// map layer) is the failure `finish` throws. It touches nothing `add(_ place:)` does, so the two may
    /// run on two threads (each on one at a time), as an import's are.
    public func add(_ feature: MapFeature) {
        guard mapFailure == nil else { return }
        guard let mapSpill else {
            mapFailure = .invalidFeature(id: feature.id, reason: "the file is written without a map layer")
            return
        }
        do {
            try mapSpill.add(feature)
            mapFeatureCount = mapSpill.count
        } catch {
            mapFailure = error
        }
    }

    /// The map layer's features added so far; nil for a file without a map layer.
    public private(set) var mapFeatureCount: Int?

    private func lacksAddress(_ number: Int) -> Bool { needsAddress[number / 64] & (1 << UInt64(number % 64)) != 0 }

    public func forEachPlaceLackingAddress(_ body: (_ number: Int, _ point: Coordinate) -> Void) {
        guard failure == nil, count > 0 else { return }
        do {
            try pointWriter.flush()
            let reader = SpillReader(file: points, size: pointWriter.offset)
            for number in 0..<count {
                let point = try reader.readPoint()
                guard lacksAddress(number) else { continue }
                body(number, point)
            }
        } catch {
            failure = error
        }
    }

    /// Gives each place added without an address the one `resolve` finds at its point, in order; written
    /// to a patch file merged in when the places are written.
    public func assignAddresses(_ resolve: (Coordinate) -> (address: String?, source: AddressSource)) {
        guard failure == nil, count > 0 else { return }
        do {
            try pointWriter.flush()
            let file = try TemporaryFile(in: Self.directoryName(of: path))
            var writer = FileWriter(descriptor: file.descriptor, path: file.name, offset: 0)
            let reader = SpillReader(file: points, size: pointWriter.offset)
            for number in 0..<count {
                let point = try reader.readPoint()
                guard lacksAddress(number) else { continue }
                let (address, source) = resolve(point)
                sourceCounts[PlacePack.sourceCode(of: .none)] -= 1
                sourceCounts[PlacePack.sourceCode(of: source)] += 1
                let text = Array((address ?? "").utf8)
                try writer.append(UInt8(PlacePack.sourceCode(of: source)))
                try writer.append(UInt8(address == nil ? 0 : 1))
                try writer.append(UInt32(text.count))
                try writer.append(text)
            }
            try writer.flush()
            patches = file
        } catch {
            failure = error
        }
    }

    // MARK: Finishing

    /// Sorts, writes the SQLite part and the pack (and the map layer, if the writer was made with one),
    /// syncs and renames the file into place. `progress` hears each step's name.
    public func finish(progress: ((String) -> Void)? = nil) throws(PlaceDatabaseError) {
        if let failure { throw failure }
        if let mapFailure { throw mapFailure }
        try spillWriter.flush()
        try pointWriter.flush()
        let n = count

        // The tree order, from the points alone.
        progress?("sorting \(n) places")
        let sorted = UnsafeMutableBufferPointer<Double>.allocate(capacity: 2 * n)
        do {
            let reader = SpillReader(file: points, size: pointWriter.offset)
            for i in 0..<2 * n {
                sorted[i] = Double(bitPattern: UInt64(littleEndian: try reader.read(8).loadUnaligned(as: UInt64.self)))
            }
        } catch {
            sorted.deallocate()
            throw error
        }
        points.close()
        var index: PlaceIndex? = PlaceIndex(sortingInterleaved: sorted, concurrently: runConcurrently)
        let pack = try TemporaryFile(in: Self.directoryName(of: path))
        let layout = PackLayout(count: n)
        var indexWriter = FileWriter(descriptor: pack.descriptor, path: pack.name, offset: layout.index)
        do {
            try index!.serializeNumberedByPosition { (chunk) throws in try indexWriter.append(Array(chunk)) }
            try indexWriter.flush()
        } catch {
            throw error as? PlaceDatabaseError ?? .cannotWrite(path: pack.name, operation: "write", errno: EIO)
        }
        var positions = index!.positions
        index = nil

        let id = PlacePack.newID()
        let database: Database
        do {
            database = try Database(path: temporaryPath, mode: .readWrite)
            try PlaceDatabase.createSchema(in: database, cacheBytes: memoryLimit / 4)
            try database.execute("BEGIN IMMEDIATE")
        } catch {
            throw PlaceDatabase.lift(error, path: temporaryPath)
        }

        // Buckets of consecutive positions, each small enough to be ordered in memory.
        let spillBytes = spillWriter.offset
        let bucketCount = Self.bucketCount(spillBytes, limit: bucketBytes)
        let perBucket = max(1, (n + bucketCount - 1) / bucketCount)
        progress?("ordering \(n) places in \(counted(bucketCount, "bucket"))")
        var buckets: [TemporaryFile] = []
        var bucketWriters: [FileWriter] = []
        let patchReader = patches.map { SpillReader(file: $0, size: Int.max) }
        do {
            for _ in 0..<bucketCount {
                let file = try TemporaryFile(in: Self.directoryName(of: path))
                buckets.append(file)
                bucketWriters.append(
                    FileWriter(descriptor: file.descriptor, path: file.name, offset: 0, buffer: 1 << 18))
            }
            let reader = SpillReader(file: spill, size: spillBytes)
            // The prefix copied aside (the reader's next read may move its buffer); a record unchanged goes
            // from the reader's buffer, not through an array of its own.
            var head = [UInt8](repeating: 0, count: Self.spillPrefix)
            for number in 0..<n {
                let prefix = try reader.read(Self.spillPrefix)
                let length = Int(UInt32(littleEndian: prefix.loadUnaligned(as: UInt32.self)))
                head.withUnsafeMutableBytes { $0.copyMemory(from: prefix) }
                let record = try reader.read(length)
                let position = Int(positions[number])
                let bucket = position / perBucket
                try bucketWriters[bucket].append(UInt32(position))
                if lacksAddress(number), let patchReader {
                    let patched = try Self.patched(Array(record), with: patchReader, path: temporaryPath)
                    head.withUnsafeMutableBytes {
                        $0.storeBytes(of: UInt32(patched.count).littleEndian, as: UInt32.self)
                    }
                    try bucketWriters[bucket].append(head)
                    try bucketWriters[bucket].append(patched)
                } else {
                    try bucketWriters[bucket].append(head)
                    try bucketWriters[bucket].append(record)
                }
            }
            for i in bucketWriters.indices { try bucketWriters[i].flush() }
        } catch {
            throw PlaceDatabase.lift(error, path: temporaryPath)
        }
        spill.close()
        patches?.close()
        positions = []

        // Bucket by bucket, in tree order: SQLite rows, the pack's columns and records.
        progress?("writing \(n) places")
        var columns = PackColumnsWriter(pack: pack, layout: layout)
        var rows: RowInserter!
        defer { rows?.stop() }
        var areaNumbers: [Int32] = []
        var areaCoordinates: [Coordinate] = []
        var areaReaches: [Double] = []
        do {
            // The rows go in on a thread of their own while this one reads the buckets and writes the pack.
            rows = try RowInserter(into: database, kinds: kinds)
            for (number, bucket) in buckets.enumerated() {
                let first = number * perBucket
                let size = bucketWriters[number].offset
                let bytes = try bucket.readAll(size: size)
                bucket.close()
                let span = min(perBucket, max(0, n - first))
                var slots = [Int](repeating: -1, count: span)
                try bytes.withUnsafeBytes { (raw) throws in
                    var at = 0
                    while at < raw.count {
                        let position = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt32.self)))
                        let length = Int(
                            UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: at + 4, as: UInt32.self)))
                        guard position >= first, position - first < span else {
                            throw PlaceDatabaseError.corrupt(path: temporaryPath, detail: "bucket \(number) is wrong")
                        }
                        slots[position - first] = at + 4
                        at += 4 + Self.spillPrefix + length
                    }
                    for (offset, slot) in slots.enumerated() {
                        let position = first + offset
                        let head = UnsafeRawBufferPointer(rebasing: raw[slot..<slot + Self.spillPrefix])
                        let length = Int(UInt32(littleEndian: head.loadUnaligned(as: UInt32.self)))
                        let code = UInt32(littleEndian: head.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
                        let reach = Float(
                            bitPattern: UInt32(littleEndian: head.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
                        let area = Float(
                            bitPattern: UInt32(littleEndian: head.loadUnaligned(fromByteOffset: 12, as: UInt32.self)))
                        let coordinate = Coordinate(
                            latitude: Double(
                                bitPattern: UInt64(
                                    littleEndian: head.loadUnaligned(fromByteOffset: 16, as: UInt64.self))),
                            longitude: Double(
                                bitPattern: UInt64(
                                    littleEndian: head.loadUnaligned(fromByteOffset: 24, as: UInt64.self))))
                        let record = UnsafeRawBufferPointer(
                            rebasing: raw[(slot + Self.spillPrefix)..<(slot + Self.spillPrefix + length)])
                        try rows.add(record: record, kind: code, coordinate: coordinate)
                        try columns.append(area: area, reach: reach, kind: code, record: record)
                        if area > 0 {
                            areaNumbers.append(Int32(position))
                            areaCoordinates.append(coordinate)
                            areaReaches.append(Double(reach))
                        }
                    }
                }
            }
            try rows.finish()
            try columns.finish(kinds: kinds)
            progress?("indexing \(areaNumbers.count) areas by reach")
            let reachIndex = ReachIndex(coordinates: areaCoordinates, reaches: areaReaches, members: areaNumbers)
            areaCoordinates = []
            areaReaches = []
            try columns.appendAreas(reachIndex.serialized())
            try columns.writeHeader(id: id, count: n)

            progress?("indexing ids")
            let insertKind = try database.prepare("INSERT INTO kinds(code, kind) VALUES (?, ?)")
            for (code, kind) in kinds.enumerated() {
                try insertKind.bind(Int64(code), at: 1)
                try insertKind.bind(kind, at: 2)
                try insertKind.step()
                insertKind.reset()
            }
            try PlaceDatabase.indexIDs(in: database, path: temporaryPath)
            if let mapSpill {
                try PlaceDatabase.writeMapLayer(mapSpill, bucketBytes: bucketBytes, into: database, progress: progress)
                // Its files go now, not after the pack's copy and sync.
                self.mapSpill = nil
            }
            try PlaceDatabase.writeMeta(
                into: database, placeCount: n, mapFeatures: mapFeatureCount, packID: PlacePack.hex(id))
            try database.execute("COMMIT")
        } catch {
            throw PlaceDatabase.lift(error, path: temporaryPath)
        }
        withExtendedLifetime(database) {}
        try finishFile(pack: pack, packLength: columns.length, progress: progress)
    }

    /// Closes the SQLite part, appends the pack and its trailer, syncs and renames.
    private func finishFile(pack: TemporaryFile, packLength: Int, progress: ((String) -> Void)?)
        throws(PlaceDatabaseError)
    {
        var status = stat()
        do {
            try checkPOSIX(fstat(descriptor, &status), "fstat")
        } catch {
            throw .cannotWrite(path: temporaryPath, error)
        }
        let start = (Int(status.st_size) + PlacePack.alignment - 1) / PlacePack.alignment * PlacePack.alignment
        progress?("appending the pack (\(packLength / 1_000_000) MB)")
        try pack.copy(length: packLength, to: descriptor, at: start, path: temporaryPath)
        let id = try pack.read(at: 16, count: 16)
        var trailer = FileWriter(descriptor: descriptor, path: temporaryPath, offset: start + packLength)
        try trailer.append(PlacePack.trailerMagic)
        try trailer.append(UInt64(start))
        try trailer.append(UInt64(packLength))
        try trailer.append(Array(id.prefix(8)))
        try trailer.flush()
        pack.close()
        // SQLite wrote with synchronous=OFF; the install's one fsync of the file is all the durability needed.
        do {
            try PlaceDatabase.install(temporaryPath, descriptor: descriptor, over: path)
            finished = true
        } catch {
            if case .replacedWithoutSync = error { finished = true }  // renamed: the name is the new file's
            throw error
        }
    }

    /// A record with the derived address merged in: its bytes spliced (flags, source, the address after
    /// the name), not decoded and encoded again; the same bytes `RecordEncoder` makes of the patched place.
    private static func patched(_ record: [UInt8], with reader: SpillReader, path: String) throws(PlaceDatabaseError)
        -> [UInt8]
    {
        let head = try reader.read(6)
        let source = UInt8(min(Int(head[0]), PlacePack.sourceCodes.count - 1))
        let hasAddress = head[1] != 0
        let length = Int(UInt32(littleEndian: head.loadUnaligned(fromByteOffset: 2, as: UInt32.self)))
        let address = try reader.read(length)
        let layout = record.withUnsafeBytes { raw -> (nameEnd: Int, addressEnd: Int, end: Int)? in
            var reader = RecordReader(raw)
            guard let flags = reader.byte(), reader.byte() != nil, reader.span() != nil, reader.span() != nil else {
                return nil
            }
            let nameEnd = reader.position
            if flags & PlacePack.RecordFlag.address != 0 { guard reader.span() != nil else { return nil } }
            let addressEnd = reader.position
            if flags & PlacePack.RecordFlag.names != 0 { guard reader.span() != nil else { return nil } }
            if flags & PlacePack.RecordFlag.area != 0 { guard reader.double() != nil else { return nil } }
            if flags & PlacePack.RecordFlag.bounds != 0 {
                for _ in 0..<4 { guard reader.double() != nil else { return nil } }
            }
            if flags & PlacePack.RecordFlag.outline != 0 {
                guard let count = reader.varint(), count <= (raw.count - reader.position) / 16 else { return nil }
                for _ in 0..<2 * count { _ = reader.double() }
            }
            if flags & PlacePack.RecordFlag.details != 0 { guard reader.span() != nil else { return nil } }
            return (nameEnd, addressEnd, reader.position)
        }
        guard let layout else { throw .corrupt(path: path, detail: "a spilled place does not decode") }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(record.count + length + 8)
        let flags = record[0] & ~PlacePack.RecordFlag.address
        bytes.append(hasAddress ? flags | PlacePack.RecordFlag.address : flags)
        bytes.append(source)
        bytes.append(contentsOf: record[2..<layout.nameEnd])
        if hasAddress {
            var value = length
            while value >= 0x80 {
                bytes.append(UInt8(value & 0x7F) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
            bytes.append(contentsOf: address)
        }
        bytes.append(contentsOf: record[layout.addressEnd..<layout.end])
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }
}

/// Where the pack's sections go: the sizes of all but the records and what follows them are known
/// from the place count, so each is written at its own offset as the places come in tree order.
struct PackLayout {
    let count: Int
    let index: Int
    let area: Int
    let reach: Int
    let kind: Int
    let recordStarts: Int
    let records: Int

    init(count: Int) {
        func aligned(_ offset: Int) -> Int { (offset + 63) / 64 * 64 }
        self.count = count
        index = PlacePack.headerSize
        area = aligned(index + PlaceIndex.serializedSize(count: count))
        reach = aligned(area + 4 * count)
        kind = aligned(reach + 4 * count)
        recordStarts = aligned(kind + 4 * count)
        records = aligned(recordStarts + 4 * (count + 1))
    }
}

/// The pack's column and record writers, one per section.
struct PackColumnsWriter {
    let pack: TemporaryFile
    let layout: PackLayout
    private var areas: FileWriter
    private var reaches: FileWriter
    private var kinds: FileWriter
    private var starts: FileWriter
    private var records: FileWriter
    private var sections: [(offset: Int, length: Int)]
    private(set) var length = 0

    init(pack: TemporaryFile, layout: PackLayout) {
        self.pack = pack
        self.layout = layout
        func writer(_ offset: Int) -> FileWriter {
            FileWriter(descriptor: pack.descriptor, path: pack.name, offset: offset)
        }
        areas = writer(layout.area)
        reaches = writer(layout.reach)
        kinds = writer(layout.kind)
        starts = writer(layout.recordStarts)
        records = writer(layout.records)
        sections = [(offset: Int, length: Int)](repeating: (0, 0), count: PlacePack.Section.allCases.count)
        sections[PlacePack.Section.index.rawValue] = (layout.index, PlaceIndex.serializedSize(count: layout.count))
        sections[PlacePack.Section.area.rawValue] = (layout.area, 4 * layout.count)
        sections[PlacePack.Section.reach.rawValue] = (layout.reach, 4 * layout.count)
        sections[PlacePack.Section.kind.rawValue] = (layout.kind, 4 * layout.count)
        sections[PlacePack.Section.recordStarts.rawValue] = (layout.recordStarts, 4 * (layout.count + 1))
    }

    mutating func append(area: Float, reach: Float, kind: UInt32, record: UnsafeRawBufferPointer)
        throws(PlaceDatabaseError)
    {
        try areas.append(area.bitPattern)
        try reaches.append(reach.bitPattern)
        try kinds.append(kind)
        let start = records.offset - layout.records
        guard start / 4 < Int(UInt32.max) else {
            throw .invalidPlace(id: "", reason: "the places' records pass 16 GB")
        }
        try starts.append(UInt32(start / 4))
        try records.append(record)
    }

    /// After the last record: the end of the record table, the kinds.
    mutating func finish(kinds names: [String]) throws(PlaceDatabaseError) {
        try starts.append(UInt32((records.offset - layout.records) / 4))
        sections[PlacePack.Section.records.rawValue] = (layout.records, records.offset - layout.records)
        try areas.flush()
        try reaches.flush()
        try kinds.flush()
        try starts.flush()
        try records.pad(to: 64)
        let kindsStart = records.offset
        try records.append(UInt32(names.count))
        var offset: UInt32 = 0
        try records.append(offset)
        for kind in names {
            offset += UInt32(kind.utf8.count)
            try records.append(offset)
        }
        for kind in names { try records.append(Array(kind.utf8)) }
        sections[PlacePack.Section.kinds.rawValue] = (kindsStart, records.offset - kindsStart)
    }

    mutating func appendAreas(_ bytes: [UInt8]) throws(PlaceDatabaseError) {
        try records.pad(to: PlacePack.alignment)  // its trees' node blocks are pages
        let start = records.offset
        try records.append(bytes)
        sections[PlacePack.Section.areas.rawValue] = (start, bytes.count)
        try records.pad(to: 8)
        try records.flush()
        length = records.offset
    }

    func writeHeader(id: [UInt8], count: Int) throws(PlaceDatabaseError) {
        var header = [UInt8](repeating: 0, count: PlacePack.headerSize)
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { for (i, byte) in $0.enumerated() { header[offset + i] = byte } }
        }
        header.replaceSubrange(0..<8, with: PlacePack.magic)
        put(PlacePack.version, at: 8)
        header.replaceSubrange(16..<32, with: id)
        put(UInt64(count), at: 32)
        put(UInt32(sections.count), at: 40)
        for (i, entry) in sections.enumerated() {
            put(UInt64(entry.offset), at: 48 + 16 * i)
            put(UInt64(entry.length), at: 56 + 16 * i)
        }
        var writer = FileWriter(descriptor: pack.descriptor, path: pack.name, offset: 0)
        try writer.append(header)
        try writer.flush()
    }
}

/// A nameless file in a directory (`openNamelessFile`): nothing is left behind whatever happens to the
/// process.
final class TemporaryFile {
    let descriptor: Int32
    let name: String
    private var isOpen = true

    init(in directory: String) throws(PlaceDatabaseError) {
        name = "\(directory)/(temporary file)"
        do {
            descriptor = try openNamelessFile(in: directory, fallbackPrefix: ".placed-spill")
        } catch {
            throw .cannotWrite(path: name, operation: "create temporary file", errno: error.errno)
        }
    }

    deinit { close() }

    func close() {
        guard isOpen else { return }
        isOpen = false
        Glibc.close(descriptor)
    }

    func read(at offset: Int, count: Int) throws(PlaceDatabaseError) -> [UInt8] {
        // Not zeroed first (a bucket is up to half the memory limit): every byte is read into.
        var failure: PlaceDatabaseError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            do throws(PlaceDatabaseError) {
                try read(at: offset, into: UnsafeMutableRawBufferPointer(start: buffer.baseAddress, count: count))
                initialized = count
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Fills `buffer` from `offset` on (pread until it is full; a short file is EIO).
    func read(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(PlaceDatabaseError) {
        var done = 0
        while done < buffer.count {
            let n = try readSome(into: buffer.baseAddress! + done, count: buffer.count - done, at: offset + done)
            done += n
        }
    }

    /// One pread of up to `count` bytes: at least one (the file must be long enough, else EIO).
    fileprivate func readSome(into target: UnsafeMutableRawPointer, count: Int, at offset: Int)
        throws(PlaceDatabaseError) -> Int
    {
        let n: Int
        do {
            n = try retryingOnInterrupt("read") { pread(descriptor, target, count, off_t(offset)) }
        } catch {
            throw .cannotWrite(path: name, error)
        }
        guard n > 0 else { throw .cannotWrite(path: name, operation: "read", errno: EIO) }
        return n
    }

    func readAll(size: Int) throws(PlaceDatabaseError) -> [UInt8] { size == 0 ? [] : try read(at: 0, count: size) }

    /// Copies the first `length` bytes to `target` at `offset`: in the kernel (copy_file_range, no pass
    /// through this process's memory) where the file system allows, else 4 MB at a time through a buffer.
    func copy(length: Int, to target: Int32, at offset: Int, path: String) throws(PlaceDatabaseError) {
        var done = 0
        while done < length {
            var from = off_t(done)
            var to = off_t(offset + done)
            let n: Int
            do {
                n = try retryingOnInterrupt("copy_file_range") {
                    copyFileRange(descriptor, &from, target, &to, min(length - done, 1 << 30), 0)
                }
            } catch {
                // Nothing copied (EXDEV, EINVAL, ENOSYS on some file systems): the rest through a buffer.
                if done == 0 && [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP].contains(error.errno) { break }
                throw .cannotWrite(path: path, error)
            }
            guard n > 0 else { throw .cannotWrite(path: path, operation: "copy_file_range", errno: EIO) }
            done += n
        }
        let chunk = 4 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 4096)
        defer { buffer.deallocate() }
        while done < length {
            let want = min(chunk, length - done)
            let n = try readSome(into: buffer.baseAddress!, count: want, at: done)
            var written = 0
            while written < n {
                let w: Int
                do {
                    w = try retryingOnInterrupt("write") {
                        pwrite(target, buffer.baseAddress! + written, n - written, off_t(offset + done + written))
                    }
                } catch {
                    throw .cannotWrite(path: path, error)
                }
                guard w > 0 else { throw .cannotWrite(path: path, operation: "write", errno: EIO) }
                written += w
            }
            done += n
        }
    }
}

/// Sequential reads of a temporary file through a buffer of 1 MB (or the largest item read).
final class SpillReader {
    let file: TemporaryFile
    let size: Int
    private var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
    private var start = 0
    private var end = 0
    private var offset = 0

    init(file: TemporaryFile, size: Int) {
        self.file = file
        self.size = size
    }

    deinit { buffer.deallocate() }

    /// The next `count` bytes, valid until the next call.
    /// A spilled point: longitude, then latitude, each a little-endian Double.
    func readPoint() throws(PlaceDatabaseError) -> Coordinate {
        let bytes = try read(16)
        let longitude = Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self)))
        let latitude = Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        return Coordinate(latitude: latitude, longitude: longitude)
    }

    /// The next value written by `FileWriter.append(raw:)`.
    func read<T: BitwiseCopyable>(as type: T.Type) throws(PlaceDatabaseError) -> T {
        try read(MemoryLayout<T>.size).loadUnaligned(as: T.self)
    }

    func read(_ count: Int) throws(PlaceDatabaseError) -> UnsafeRawBufferPointer {
        if end - start < count {
            // Keep what is left, then fill the rest.
            let left = end - start
            if buffer.count < count {
                let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 16)
                larger.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: left)
                buffer.deallocate()
                buffer = larger
            } else {
                buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: left)
            }
            start = 0
            end = left
            while end < count {
                let n = try file.readSome(into: buffer.baseAddress! + end, count: buffer.count - end, at: offset)
                end += n
                offset += n
            }
        }
        defer { start += count }
        return UnsafeRawBufferPointer(rebasing: buffer[start..<start + count])
    }
}

/// The places' SQLite rows inserted in order on a thread of their own (`BatchedRowInserter`): the
/// thread that reads the buckets goes on with the pack meanwhile. A row is bound from the place's spilled
/// record itself (`RecordColumns`: no `Place` made, no text copied into SQLite), copied with its point and
/// kind into the batch; the rows are the ones inserting each decoded place would make.
final class RowInserter {
    static let batchSize = 2_048

    private let rows: BatchedRowInserter<(kind: Int, coordinate: Coordinate)>

    /// On the writer's connection, the kinds by number.
    init(into database: Database, kinds: [String]) throws(SQLiteError) {
        let insert = try MultiRowInsert(
            into: "places", columns: PlaceDatabase.placeColumns, parametersARow: PlaceDatabase.parametersARow,
            on: database)
        let texts = FixedTexts(kinds: kinds)
        rows = BatchedRowInserter(batchSize: Self.batchSize, insert: insert) {
            (row, record, number, statement, parameter) throws(SQLiteError) in
            guard let columns = RecordColumns(record), row.kind < texts.kinds.count else {
                throw SQLiteError(
                    code: SQLITE_CORRUPT, message: "spilled place \(number) does not decode", operation: "decode")
            }
            try PlaceDatabase.bind(
                columns, kind: texts.kinds[row.kind], source: texts.sources[columns.sourceCode],
                coordinate: row.coordinate, to: statement, after: parameter)
        }
    }

    /// The place of `record` (its spilled bytes), at `coordinate`, of kind number `kind`.
    func add(record: UnsafeRawBufferPointer, kind: UInt32, coordinate: Coordinate) throws(SQLiteError) {
        try rows.add((Int(kind), coordinate), record: record)
    }

    /// Waits for every row; throws the first insert's failure.
    func finish() throws(SQLiteError) { try rows.finish() }

    func stop() { rows.stop() }

    /// The kinds' and the address sources' UTF-8 in one buffer that lives as long as a job may bind from
    /// it (SQLite keeps a pointer to bound text until the row is stepped).
    private final class FixedTexts: @unchecked Sendable {
        private let storage: UnsafeMutableRawBufferPointer
        let kinds: [UnsafeRawBufferPointer]
        let sources: [UnsafeRawBufferPointer]

        init(kinds names: [String]) {
            let all = (names + PlacePack.sourceCodes.map(\.rawValue)).map { Array($0.utf8) }
            storage = UnsafeMutableRawBufferPointer.allocate(
                byteCount: max(1, all.reduce(0) { $0 + $1.count }), alignment: 8)
            var spans: [UnsafeRawBufferPointer] = []
            var at = 0
            for text in all {
                let span = UnsafeMutableRawBufferPointer(rebasing: storage[at..<at + text.count])
                span.copyBytes(from: text)
                spans.append(UnsafeRawBufferPointer(span))
                at += text.count
            }
            kinds = Array(spans[..<names.count])
            sources = Array(spans[names.count...])
        }

        deinit { storage.deallocate() }
    }
}

/// Linux's copy_file_range (unistd.h under _GNU_SOURCE, which Glibc's module does not define).
@_silgen_name("copy_file_range")
private func copyFileRange(
    _ input: Int32, _ inputOffset: UnsafeMutablePointer<off_t>?, _ output: Int32,
    _ outputOffset: UnsafeMutablePointer<off_t>?, _ length: Int, _ flags: UInt32
) -> Int

/// "1 bucket", "15 buckets": a count and its noun for the progress bar.
func counted(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }
