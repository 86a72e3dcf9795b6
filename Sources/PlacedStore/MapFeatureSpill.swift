import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

/// The map layer on its way into a places file: each feature checked and encoded as the row it
/// becomes (`MapFeatureRecord`) and appended to a nameless temporary file as it comes, memory keeping
/// only where its record starts and its stored box (24 bytes a feature, where the features themselves
/// took about 400: 5.3 GB for city-10M's 13 M). `writeMapLayer` reads the records back through a
/// mapping of the file, in the rows' order.
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

    /// Checks `feature` (a bad one changes nothing here) and appends its record.
    func add(_ feature: MapFeature) throws(PlaceDatabaseError) {
        try PlaceDatabase.validate(feature)
        record.removeAll(keepingCapacity: true)
        MapFeatureRecord.encode(feature, into: &record)
        starts.append(writer.offset)
        boxes.append(BoundsCoding.box(feature.bounds))
        try writer.append(record)
    }

    /// Calls `body` with the records, by feature number, read in place from a mapping of the file;
    /// pages already read are given back every `releaseBytes` of records so that the mapping's resident
    /// size stays bounded.
    func withRecords(releaseEvery releaseBytes: Int = 64 << 20, _ body: (Records) throws -> Void) throws {
        try writer.flush()
        let size = writer.offset
        guard size > 0 else {
            return try body(
                Records(bytes: UnsafeRawBufferPointer(start: nil, count: 0), starts: starts, release: { _ in }))
        }
        guard let base = mmap(nil, size, PROT_READ, MAP_SHARED, file.descriptor, 0), base != MAP_FAILED else {
            throw PlaceDatabaseError.cannotWrite(path: file.name, operation: "mmap", errno: errno)
        }
        defer { munmap(base, size) }
        let bytes = UnsafeRawBufferPointer(start: base, count: size)
        var readSinceRelease = 0
        try body(
            Records(bytes: bytes, starts: starts) { length in
                readSinceRelease += length
                if readSinceRelease >= releaseBytes {
                    // The page cache keeps the pages; only this process's hold on them goes.
                    madvise(base, size, MADV_DONTNEED)
                    readSinceRelease = 0
                }
            })
    }

    /// The spilled records, each read in place.
    struct Records {
        let bytes: UnsafeRawBufferPointer
        let starts: [Int]
        let release: (Int) -> Void

        init(bytes: UnsafeRawBufferPointer, starts: [Int], release: @escaping (Int) -> Void) {
            self.bytes = bytes
            self.starts = starts
            self.release = release
        }

        /// Feature `number`'s record; nil if it does not decode (the file changed under the import).
        func record(_ number: Int) -> MapFeatureRecord? {
            let end = number + 1 < starts.count ? starts[number + 1] : bytes.count
            guard starts[number] <= end, end <= bytes.count else { return nil }
            release(end - starts[number])
            return MapFeatureRecord(UnsafeRawBufferPointer(rebasing: bytes[starts[number]..<end]))
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
