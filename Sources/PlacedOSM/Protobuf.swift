#if canImport(Glibc)
    import Glibc
#endif

/// Why a protobuf message did not decode; the caller names the file and blob (OSMError.corruptBlob).
struct ProtobufError: Error, Equatable {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// Protobuf wire types used by the OSM PBF schema (groups are deprecated and never appear).
enum WireType: UInt8 {
    case varint = 0
    case fixed64 = 1
    case lengthDelimited = 2
    case fixed32 = 5
}

/// A cursor over protobuf bytes that decodes in place: no allocation, every read bounds-checked.
///
/// The buffer must outlive the reader; sub-messages are readers over a slice of the same bytes.
struct ProtobufReader {
    private(set) var position: UnsafePointer<UInt8>
    let end: UnsafePointer<UInt8>

    init(_ bytes: UnsafeRawBufferPointer) {
        // An empty buffer may have no base address; any valid pointer with end == position works.
        let base = bytes.baseAddress.map { $0.assumingMemoryBound(to: UInt8.self) } ?? Self.emptyBase
        position = base
        end = base + bytes.count
    }

    private static var emptyBase: UnsafePointer<UInt8> { UnsafePointer(bitPattern: 1)! }

    var isAtEnd: Bool { position >= end }
    var remaining: Int { end - position }

    @inline(__always)
    mutating func varint() throws(ProtobufError) -> UInt64 {
        guard position < end else { throw ProtobufError("varint runs past the end of its message") }
        let first = position.pointee
        position += 1
        if first < 0x80 { return UInt64(first) }
        return try varintContinued(UInt64(first & 0x7F))
    }

    private mutating func varintContinued(_ low: UInt64) throws(ProtobufError) -> UInt64 {
        var value = low
        var shift: UInt64 = 7
        while position < end {
            let byte = position.pointee
            position += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
            if shift >= 70 { throw ProtobufError("varint longer than 10 bytes") }
        }
        throw ProtobufError("varint runs past the end of its message")
    }

    /// A zigzag-encoded signed varint (`sint32`, `sint64`).
    @inline(__always)
    mutating func signedVarint() throws(ProtobufError) -> Int64 {
        let raw = try varint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    /// A two's-complement varint (`int32`, `int64`).
    @inline(__always)
    mutating func int64() throws(ProtobufError) -> Int64 {
        Int64(bitPattern: try varint())
    }

    /// The next field's number and wire type; nil at the end of the message.
    @inline(__always)
    mutating func nextField() throws(ProtobufError) -> (number: UInt64, wireType: WireType)? {
        guard position < end else { return nil }
        let key = try varint()
        guard let wireType = WireType(rawValue: UInt8(key & 7)), key >> 3 != 0 else {
            throw ProtobufError("invalid field key \(key)")
        }
        return (key >> 3, wireType)
    }

    /// The payload of a length-delimited field, as a reader over those bytes.
    @inline(__always)
    mutating func lengthDelimited() throws(ProtobufError) -> ProtobufReader {
        let length = try varint()
        guard length <= UInt64(remaining) else {
            throw ProtobufError("field of \(length) bytes runs past the end of its message")
        }
        let sub = ProtobufReader(start: position, count: Int(length))
        position += Int(length)
        return sub
    }

    private init(start: UnsafePointer<UInt8>, count: Int) {
        position = start
        end = start + count
    }

    /// The remaining bytes, without consuming them.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: position, count: remaining) }

    mutating func skipField(_ wireType: WireType) throws(ProtobufError) {
        switch wireType {
        case .varint: _ = try varint()
        case .lengthDelimited: _ = try lengthDelimited()
        case .fixed64: try advance(8)
        case .fixed32: try advance(4)
        }
    }

    private mutating func advance(_ count: Int) throws(ProtobufError) {
        guard count <= remaining else { throw ProtobufError("fixed-width field runs past the end") }
        position += count
    }

    /// Throws unless the field has the wire type the schema declares.
    @inline(__always)
    static func expect(_ wireType: WireType, _ expected: WireType, field: UInt64)
        throws(ProtobufError)
    {
        if wireType != expected {
            throw ProtobufError("field \(field) has wire type \(wireType.rawValue)")
        }
    }
}

extension ProtobufReader {
    /// Bytes equal to an ASCII literal, without making a String.
    func equals(_ literal: StaticString) -> Bool { bytes.equals(literal) }

    /// UTF-8 text (invalid sequences become U+FFFD, as OSM data should never contain them).
    var string: String { String(decoding: bytes, as: UTF8.self) }
}

extension UnsafeRawBufferPointer {
    /// Bytes equal to a literal's UTF-8, without making a String.
    func equals(_ literal: StaticString) -> Bool {
        count == literal.utf8CodeUnitCount
            && (count == 0 || memcmp(baseAddress!, literal.utf8Start, count) == 0)
    }

    /// Whether the bytes begin with a literal's UTF-8.
    func starts(with literal: StaticString) -> Bool {
        count >= literal.utf8CodeUnitCount
            && (literal.utf8CodeUnitCount == 0
                || memcmp(baseAddress!, literal.utf8Start, literal.utf8CodeUnitCount) == 0)
    }
}
