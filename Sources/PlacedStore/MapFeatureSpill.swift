import PlacedCore

/// The map layer on its way into a places file: each feature checked and encoded as the row it
/// becomes (`MapFeatureRecord`) and appended to a nameless temporary file as it comes, memory keeping
/// only where its record starts and its stored box (24 bytes a feature, where the features themselves
/// took about 400: 5.3 GB for city-10M's 13 M). `writeMapLayer` reads the records back one at a time
/// (`Reader`) in the rows' order.
final class MapFeatureSpill {
    private let file: TemporaryFile
    private var writer: FileWriter
    private var record: [UInt8] = []
    /// Where feature n's record starts in the file.
    private(set) var starts: [Int] = []
    /// Feature n's box as `map_bounds` stores it.
    private(set) var boxes: [PackedRTree.Box] = []

    var count: Int { starts.count }

    init(in directory: String) throws(PlaceDatabaseError) {
        file = try TemporaryFile(in: directory)
        writer = FileWriter(descriptor: file.descriptor, path: file.name, offset: 0)
    }

    /// Checks `feature` and appends its record; a bad feature, or one that cannot be written, leaves the
    /// spill as it was (but for the file's unwritten tail).
    func add(_ feature: MapFeature) throws(PlaceDatabaseError) {
        try PlaceDatabase.validate(feature)
        record.removeAll(keepingCapacity: true)
        MapFeatureRecord.encode(feature, into: &record)
        let start = writer.offset
        try writer.append(record)
        starts.append(start)
        boxes.append(BoundsCoding.box(feature.bounds))
    }

    /// The boxes, taken out: the spill then holds none, nor its records' starts (the rows are written
    /// by then; reading them again is a programming error).
    func takeBoxes() -> [PackedRTree.Box] {
        starts = []
        defer { boxes = [] }
        return boxes
    }

    /// A reader of the records written so far, by feature number.
    func reader() throws(PlaceDatabaseError) -> Reader {
        try writer.flush()
        return Reader(file: file, starts: starts, end: writer.offset)
    }

    /// Reads a record at a time with one `pread` into a buffer it reuses: memory holds one record
    /// whatever the order they are read in. (Rows are read in Z-order, which jumps about the file; a
    /// mapping of it grew to the whole spill however often its pages were given back, as the kernel
    /// maps a large folio around each read.)
    final class Reader {
        private let file: TemporaryFile
        private let starts: [Int]
        private let end: Int
        private var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)

        fileprivate init(file: TemporaryFile, starts: [Int], end: Int) {
            self.file = file
            self.starts = starts
            self.end = end
        }

        deinit { buffer.deallocate() }

        /// Feature `number`'s record, its bytes valid until the next call; nil if it does not decode.
        func record(_ number: Int) throws(PlaceDatabaseError) -> MapFeatureRecord? {
            try bytes(number).flatMap(MapFeatureRecord.init)
        }

        /// Feature `number`'s record as spilled, valid until the next call; nil if its extent is not one.
        func bytes(_ number: Int) throws(PlaceDatabaseError) -> UnsafeRawBufferPointer? {
            let start = starts[number]
            let count = (number + 1 < starts.count ? starts[number + 1] : end) - start
            guard count >= 0 else { return nil }
            if count > buffer.count {
                buffer.deallocate()
                buffer = .allocate(byteCount: max(count, 2 * buffer.count), alignment: 8)
            }
            try file.read(at: start, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
            return UnsafeRawBufferPointer(rebasing: buffer[0..<count])
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
