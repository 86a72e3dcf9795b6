/// JSON text written through a pointer into memory sized beforehand from the bounds below, for the
/// hottest writer (a `Rank` reply's places), which through an array would check its capacity and
/// uniqueness for every key, number and string. The text is what `JSON.encode` writes of the same
/// values; every write checks that it fits.
public struct JSONWriter {
    // Inlinable, with what it reads, so that a writer's small writes compile into its caller's loop.
    @usableFromInline let start: UnsafeMutablePointer<UInt8>
    @usableFromInline var end: UnsafeMutablePointer<UInt8>
    @usableFromInline let limit: UnsafeMutablePointer<UInt8>

    private init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        start = buffer.baseAddress!
        end = start
        limit = start + buffer.count
    }

    /// Appends to `output` what `body` writes, at most `capacity` bytes (a write beyond it traps).
    public static func append(capacity: Int, to output: inout [UInt8], _ body: (inout JSONWriter) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(capacity, 1)) { buffer in
            var writer = JSONWriter(buffer)
            body(&writer)
            output.append(contentsOf: UnsafeBufferPointer(start: writer.start, count: writer.end - writer.start))
        }
    }

    /// At most what `string(validUTF8:)` writes for `byteCount` bytes: quotes, and `\u00XX` for each.
    @inlinable
    public static func stringBound(_ byteCount: Int) -> Int { 6 * byteCount + 2 }
    /// At most what `number(orNull:)` writes: "-2.2250738585072014e-308" is 24 bytes.
    public static let numberBound = 32

    @inlinable
    mutating func room(_ count: Int) {
        precondition(limit - end >= count, "JSONWriter: the text outgrew its bound")
    }

    @inlinable
    public mutating func byte(_ byte: UInt8) {
        room(1)
        end.pointee = byte
        end += 1
    }

    @inlinable
    public mutating func bytes(_ bytes: UnsafeRawBufferPointer) {
        room(bytes.count)
        if let base = bytes.baseAddress {
            end.update(from: base.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        }
        end += bytes.count
    }

    /// The string whose UTF-8 `bytes` are (valid UTF-8), quoted and escaped as `JSON.encode(string:into:)`
    /// writes it.
    @inlinable
    public mutating func string(validUTF8 bytes: UnsafeRawBufferPointer) {
        room(Self.stringBound(bytes.count))
        end.pointee = UInt8(ascii: "\"")
        end += 1
        end += JSON.escape(bytes.assumingMemoryBound(to: UInt8.self), into: end)
        end.pointee = UInt8(ascii: "\"")
        end += 1
    }

    /// `value` as `JSON.encode(number:into:)` writes it, and null when it is not finite.
    @inlinable
    public mutating func number(orNull value: Double) {
        room(Self.numberBound)
        guard value.isFinite else {
            for byte in "null".utf8 { self.byte(byte) }
            return
        }
        end += JSON.format(number: value, into: end)
    }
}
