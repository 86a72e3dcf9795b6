import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The mapped part of the places file: everything ranking reads, laid out to be used in place from a
/// read-only mapping. It follows the SQLite database image in the same file (see `PlaceDatabase`),
/// page-aligned, and ends the file with a trailer that finds it.
///
/// Layout, little-endian, every section 64-aligned from the pack's start:
/// - header (`headerSize` bytes): magic "PLACEPK1", version u32, zero u32, pack id (16 bytes, also in
///   the SQLite part's meta `pack_id`), place count u64, section count u32, zero u32, then per section
///   offset u64 and length u64, in `Section` order;
/// - `index`: `PlaceIndex.serialized()` (format 3: the node blocks are pages), numbered by position (place
///   number = tree position);
/// - `area`, `reach`: float32 per place; `kind`: uint32 code per place;
/// - `recordStarts`: uint32 per place and one more, each record's start in 4-byte units of `records`;
/// - `records`: per place, 4-aligned: flags u8 (`RecordFlag`), address source u8, then varint-length
///   UTF-8 id and name, [address], [localized names as `LocalizedNamesCoding`], [area f64], [bounds:
///   min lat, min lon, max lat, max lon f64], [outline: varint count, then (lat, lon) f64 pairs],
///   [details: varint-length `PlaceDetails.encoded` text, since schema 6]; the point is the index's and
///   the kind the `kind` column's;
/// - `kinds`: count u32, then count + 1 uint32 offsets into the UTF-8 bytes that follow;
/// - `areas`: `ReachIndex.serialized()` of the places with an area, members = place numbers; page-aligned,
///   as its deeper tiers' node blocks are pages.
///
/// Trailer (the file's last `trailerSize` bytes): magic "PLACEEND", the pack's offset in the file u64,
/// its length u64, the first 8 bytes of the pack id.
enum PlacePack {
    static let magic = Array("PLACEPK1".utf8)
    static let trailerMagic = Array("PLACEEND".utf8)
    static let version: UInt32 = 2
    static let headerSize = 4096
    static let trailerSize = 32
    /// The pack starts on a page boundary of the file, so its sections map page for page.
    static let alignment = 4096

    enum Section: Int, CaseIterable {
        case index, area, reach, kind, recordStarts, records, kinds, areas
    }

    enum RecordFlag {
        static let address: UInt8 = 1
        static let names: UInt8 = 2
        static let area: UInt8 = 4
        static let bounds: UInt8 = 8
        static let outline: UInt8 = 16
        static let details: UInt8 = 32
    }

    static let sourceCodes: [AddressSource] = [.own, .building, .nearby, .street, .none]

    /// `source`'s index in `sourceCodes`.
    static func sourceCode(of source: AddressSource) -> Int {
        switch source {
        case .own: 0
        case .building: 1
        case .nearby: 2
        case .street: 3
        case .none: 4
        }
    }

    /// A fresh id for a pack and the meta row that names it.
    static func newID() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64) { Array($0) } }
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }
}

/// Encodes records into one growing buffer.
struct RecordEncoder {
    var bytes: [UInt8] = []

    mutating func encode(_ place: Place) {
        let names = LocalizedNamesCoding.encode(place.localizedNames)
        let outline = place.outline.flatMap { $0.isEmpty ? nil : $0 }
        let details = place.details.encoded
        var flags: UInt8 = 0
        if place.address != nil { flags |= PlacePack.RecordFlag.address }
        if names != nil { flags |= PlacePack.RecordFlag.names }
        if place.area != 0 { flags |= PlacePack.RecordFlag.area }
        if place.bounds != nil { flags |= PlacePack.RecordFlag.bounds }
        if outline != nil { flags |= PlacePack.RecordFlag.outline }
        if details != nil { flags |= PlacePack.RecordFlag.details }
        bytes.append(flags)
        bytes.append(UInt8(PlacePack.sourceCode(of: place.addressSource)))
        text(place.id)
        text(place.name)
        if let address = place.address { text(address) }
        if let names { text(names) }
        if place.area != 0 { double(place.area) }
        if let b = place.bounds {
            double(b.minLatitude)
            double(b.minLongitude)
            double(b.maxLatitude)
            double(b.maxLongitude)
        }
        if let outline {
            varint(UInt64(outline.count))
            for c in outline {
                double(c.latitude)
                double(c.longitude)
            }
        }
        if let details { text(details) }
        while bytes.count % 4 != 0 { bytes.append(0) }
    }

    private mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private mutating func text(_ string: String) {
        varint(UInt64(string.utf8.count))
        bytes.append(contentsOf: string.utf8)
    }

    private mutating func double(_ value: Double) {
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
    }
}

/// Buffered positional writes to one file descriptor.
struct FileWriter {
    let descriptor: Int32
    let path: String
    private(set) var offset: Int
    private var buffer: [UInt8] = []
    private var flushedTo: Int

    private let capacity: Int

    init(descriptor: Int32, path: String, offset: Int, buffer capacity: Int = 1 << 20) {
        self.descriptor = descriptor
        self.path = path
        self.offset = offset
        self.capacity = capacity
        flushedTo = offset
        buffer.reserveCapacity(capacity)
    }

    mutating func append(_ bytes: [UInt8]) throws(PlaceDatabaseError) {
        buffer.append(contentsOf: bytes)
        offset += bytes.count
        if buffer.count >= capacity { try flush() }
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) throws(PlaceDatabaseError) {
        buffer.append(contentsOf: bytes)
        offset += bytes.count
        if buffer.count >= capacity { try flush() }
    }

    mutating func append<T: FixedWidthInteger>(_ value: T) throws(PlaceDatabaseError) {
        withUnsafeBytes(of: value.littleEndian) { buffer.append(contentsOf: $0) }
        offset += MemoryLayout<T>.size
        if buffer.count >= capacity { try flush() }
    }

    /// `value`'s bytes as they are in memory: for a temporary file this process reads back itself.
    mutating func append<T: BitwiseCopyable>(raw value: T) throws(PlaceDatabaseError) {
        withUnsafeBytes(of: value) { buffer.append(contentsOf: $0) }
        offset += MemoryLayout<T>.size
        if buffer.count >= capacity { try flush() }
    }

    mutating func append(zeros count: Int) throws(PlaceDatabaseError) {
        try append([UInt8](repeating: 0, count: count))
    }

    mutating func pad(to alignment: Int) throws(PlaceDatabaseError) {
        let extra = (alignment - offset % alignment) % alignment
        if extra > 0 { try append(zeros: extra) }
    }

    mutating func flush() throws(PlaceDatabaseError) {
        var done = 0
        while done < buffer.count {
            do {
                let n = try retryingOnInterrupt("write") {
                    buffer.withUnsafeBytes { raw in
                        pwrite(descriptor, raw.baseAddress! + done, raw.count - done, off_t(flushedTo + done))
                    }
                }
                done += n
            } catch {
                throw .cannotWrite(path: path, error)
            }
        }
        flushedTo += buffer.count
        buffer.removeAll(keepingCapacity: true)
    }
}

// MARK: - Reading

/// The pack of a mapped places file, its sections found and checked against the mapping's size.
/// Reading a section never goes past the mapping whatever its bytes say: a record that does not
/// decode is `.corrupt`.
struct PackView {
    let bytes: UnsafeRawBufferPointer
    let id: [UInt8]
    let placeCount: Int
    private let sections: [UnsafeRawBufferPointer]

    /// Finds the pack from the file's trailer; `imageSize` is where the SQLite part ends. `versions`: the
    /// pack versions accepted (an upgrade reads the one before).
    init(
        file: UnsafeRawBufferPointer, imageSize: Int, path: String,
        versions: ClosedRange<UInt32> = PlacePack.version...PlacePack.version
    ) throws(PlaceDatabaseError) {
        func damaged(_ detail: String) -> PlaceDatabaseError {
            .corrupt(path: path, detail: "the mapped part (pack) \(detail); import the file again")
        }
        guard file.count >= imageSize + PlacePack.headerSize + PlacePack.trailerSize else {
            throw damaged("is missing")
        }
        let trailer = UnsafeRawBufferPointer(rebasing: file[(file.count - PlacePack.trailerSize)...])
        guard trailer.prefix(8).elementsEqual(PlacePack.trailerMagic) else { throw damaged("has no trailer") }
        let start = Int(
            truncatingIfNeeded: UInt64(littleEndian: trailer.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        let length = Int(
            truncatingIfNeeded: UInt64(littleEndian: trailer.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
        guard start >= imageSize, start % PlacePack.alignment == 0, length >= PlacePack.headerSize,
            start <= file.count - PlacePack.trailerSize, length == file.count - PlacePack.trailerSize - start
        else { throw damaged("is not where the trailer says") }
        bytes = UnsafeRawBufferPointer(rebasing: file[start..<start + length])
        guard bytes.prefix(8).elementsEqual(PlacePack.magic),
            versions.contains(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        else { throw damaged("has no header of version \(PlacePack.version)") }
        id = Array(bytes[16..<32])
        guard trailer[24..<32].elementsEqual(id.prefix(8)) else { throw damaged("and its trailer disagree") }
        placeCount = Int(
            truncatingIfNeeded: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 32, as: UInt64.self)))
        let count = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 40, as: UInt32.self)))
        guard count == PlacePack.Section.allCases.count, placeCount >= 0, placeCount < Int(Int32.max) else {
            throw damaged("header is wrong")
        }
        var sections: [UnsafeRawBufferPointer] = []
        for i in 0..<count {
            let offset = Int(
                truncatingIfNeeded: UInt64(
                    littleEndian: bytes.loadUnaligned(fromByteOffset: 48 + 16 * i, as: UInt64.self)))
            let size = Int(
                truncatingIfNeeded: UInt64(
                    littleEndian: bytes.loadUnaligned(fromByteOffset: 56 + 16 * i, as: UInt64.self)))
            guard offset >= PlacePack.headerSize, offset % 64 == 0, size >= 0, offset <= length, size <= length - offset
            else { throw damaged("section \(i) runs past its end") }
            sections.append(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + size]))
        }
        self.sections = sections
        for (section, width) in [(PlacePack.Section.area, 4), (.reach, 4), (.kind, 4)]
        where self[section].count != width * placeCount {
            throw damaged("column \(section) is \(self[section].count) bytes for \(placeCount) places")
        }
        guard self[.recordStarts].count == 4 * (placeCount + 1) else { throw damaged("record table is wrong") }
    }

    subscript(section: PlacePack.Section) -> UnsafeRawBufferPointer { sections[section.rawValue] }

    /// Place `number`'s record (its bounds from the record table); nil when they fall outside the records.
    func record(_ number: Int) -> UnsafeRawBufferPointer? {
        let starts = self[.recordStarts]
        let records = self[.records]
        let from = 4 * Int(UInt32(littleEndian: starts.loadUnaligned(fromByteOffset: 4 * number, as: UInt32.self)))
        let to = 4 * Int(UInt32(littleEndian: starts.loadUnaligned(fromByteOffset: 4 * number + 4, as: UInt32.self)))
        guard from <= to, to <= records.count else { return nil }
        return UnsafeRawBufferPointer(rebasing: records[from..<to])
    }

    /// The kind strings.
    func kinds(path: String) throws(PlaceDatabaseError) -> [String] {
        let table = self[.kinds]
        guard table.count >= 8 else { throw .corrupt(path: path, detail: "kinds table is missing") }
        let count = Int(UInt32(littleEndian: table.loadUnaligned(as: UInt32.self)))
        guard count < table.count / 4, 4 + 4 * (count + 1) <= table.count else {
            throw .corrupt(path: path, detail: "kinds table is wrong")
        }
        let text = 4 + 4 * (count + 1)
        var kinds: [String] = []
        for i in 0..<count {
            let from = Int(UInt32(littleEndian: table.loadUnaligned(fromByteOffset: 4 + 4 * i, as: UInt32.self)))
            let to = Int(UInt32(littleEndian: table.loadUnaligned(fromByteOffset: 8 + 4 * i, as: UInt32.self)))
            guard from <= to, text + to <= table.count else { throw .corrupt(path: path, detail: "kind \(i) is wrong") }
            kinds.append(String(decoding: table[(text + from)..<(text + to)], as: UTF8.self))
        }
        return kinds
    }
}

/// A column of one little-endian number per place, read in place from the mapping.
public struct PackColumn<Element: FixedWidthLittleEndian>: RandomAccessCollection {
    let base: UnsafePointer<Element>?
    public let count: Int
    /// Keeps the mapping alive.
    let owner: AnyObject

    init(_ bytes: UnsafeRawBufferPointer, owner: AnyObject) {
        base = bytes.baseAddress?.assumingMemoryBound(to: Element.self)
        count = bytes.count / MemoryLayout<Element>.size
        self.owner = owner
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    @inline(__always)
    public subscript(position: Int) -> Element {
        precondition(position >= 0 && position < count, "PackColumn: index out of range")
        return Element(littleEndianStorage: base![position])
    }
}

/// Reads one record, never past its end.
struct RecordReader {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    mutating func byte() -> UInt8? {
        guard position < bytes.count else { return nil }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func varint() -> Int? {
        var value = 0
        var shift = 0
        while shift < 63, let byte = byte() {
            value |= Int(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    /// A length-prefixed run of bytes, in place.
    mutating func span() -> UnsafeRawBufferPointer? {
        guard let length = varint(), length <= bytes.count - position else { return nil }
        defer { position += length }
        return UnsafeRawBufferPointer(rebasing: bytes[position..<position + length])
    }

    mutating func text() -> String? {
        guard let length = varint(), length <= bytes.count - position else { return nil }
        defer { position += length }
        return String(decoding: bytes[position..<position + length], as: UTF8.self)
    }

    mutating func double() -> Double? {
        guard bytes.count - position >= 8 else { return nil }
        defer { position += 8 }
        return Double(bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self)))
    }

    /// A bounding box: four doubles, south, west, north, east.
    mutating func bounds() -> BoundingBox? {
        guard let minLatitude = double(), let minLongitude = double(), let maxLatitude = double(),
            let maxLongitude = double()
        else { return nil }
        return BoundingBox(
            minLatitude: minLatitude, minLongitude: minLongitude, maxLatitude: maxLatitude, maxLongitude: maxLongitude)
    }
}

/// A record's SQLite columns read in place: the record holds them as the row does (UTF-8 texts, the
/// localized names as `LocalizedNamesCoding`'s text, the outline as `OutlineCoding`'s little-endian
/// pairs), so the places file's writer binds a row from the record's own bytes without making a `Place`.
/// The point and the kind are not in a record (its caller has them).
struct RecordColumns {
    var id: UnsafeRawBufferPointer
    var name: UnsafeRawBufferPointer
    var address: UnsafeRawBufferPointer?
    var names: UnsafeRawBufferPointer?
    var area = 0.0
    var bounds: BoundingBox?
    /// `OutlineCoding`'s bytes; nil for none (as an empty outline binds NULL).
    var outline: UnsafeRawBufferPointer?
    /// Its index in `PlacePack.sourceCodes`.
    var sourceCode: Int

    /// Nil where `PlaceDatabase.decode` finds no place.
    init?(_ bytes: UnsafeRawBufferPointer) {
        var reader = RecordReader(bytes)
        guard let flags = reader.byte(), let sourceCode = reader.byte(), Int(sourceCode) < PlacePack.sourceCodes.count,
            let id = reader.span(), let name = reader.span()
        else { return nil }
        self.id = id
        self.name = name
        self.sourceCode = Int(sourceCode)
        if flags & PlacePack.RecordFlag.address != 0 {
            guard let address = reader.span() else { return nil }
            self.address = address
        }
        if flags & PlacePack.RecordFlag.names != 0 {
            guard let names = reader.span() else { return nil }
            self.names = names
        }
        if flags & PlacePack.RecordFlag.area != 0 {
            guard let area = reader.double() else { return nil }
            self.area = area
        }
        if flags & PlacePack.RecordFlag.bounds != 0 {
            guard let stored = reader.bounds() else { return nil }
            bounds = stored
        }
        if flags & PlacePack.RecordFlag.outline != 0 {
            guard let count = reader.varint(), count <= (bytes.count - reader.position) / 16 else { return nil }
            if count > 0 {
                outline = UnsafeRawBufferPointer(rebasing: bytes[reader.position..<reader.position + 16 * count])
            }
        }
    }
}
