import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A nameless file the import writes and reads back (`openNamelessFile` in `directory`): nothing is left
/// behind whatever happens to the process. Appends go through a buffer of their own and are written in
/// large sequential writes, so the file's pages stay in the page cache and never count in the process's
/// RSS.
final class ScratchFile {
    let name: String
    private(set) var descriptor: Int32
    /// Bytes appended, flushed or not.
    private(set) var length = 0
    private var buffer: UnsafeMutableRawBufferPointer
    private var buffered = 0
    private var flushedLength = 0

    init(in directory: String, purpose: String, bufferBytes: Int = 1 << 20) throws(OSMError) {
        name = "\(directory)/(\(purpose))"
        do {
            descriptor = try openNamelessFile(in: directory, fallbackPrefix: ".placectl-\(purpose.filter(\.isLetter))")
        } catch {
            throw .scratch(path: name, operation: "create", reason: error.reason)
        }
        buffer = .allocate(byteCount: max(bufferBytes, 4096), alignment: 4096)
    }

    deinit {
        buffer.deallocate()
        close()
    }

    func close() {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }

    @inline(__always)
    func append<T: FixedWidthInteger>(_ value: T) throws(OSMError) {
        if buffered + MemoryLayout<T>.size > buffer.count { try flush() }
        buffer.storeBytes(of: value.littleEndian, toByteOffset: buffered, as: T.self)
        buffered += MemoryLayout<T>.size
        length += MemoryLayout<T>.size
    }

    func append(_ bytes: UnsafeRawBufferPointer) throws(OSMError) {
        var done = 0
        while done < bytes.count {
            if buffered == buffer.count { try flush() }
            let n = min(bytes.count - done, buffer.count - buffered)
            (buffer.baseAddress! + buffered).copyMemory(from: bytes.baseAddress! + done, byteCount: n)
            buffered += n
            done += n
        }
        length += bytes.count
    }

    func append(_ text: String) throws(OSMError) {
        try append(UInt32(text.utf8.count))
        for byte in text.utf8 { try append(byte) }
    }

    /// Writes what is buffered.
    func flush() throws(OSMError) {
        var done = 0
        while done < buffered {
            do throws(SystemError) {
                let n = try retryingOnInterrupt("write") {
                    pwrite(descriptor, buffer.baseAddress! + done, buffered - done, off_t(flushedLength + done))
                }
                guard n > 0 else { throw SystemError("write", errno: EIO) }
                done += n
            } catch {
                throw .scratch(path: name, operation: "write", reason: error.reason)
            }
        }
        flushedLength += buffered
        buffered = 0
    }

    /// Fills `target` from `offset` (which must be flushed).
    func read(into target: UnsafeMutableRawBufferPointer, at offset: Int) throws(OSMError) {
        var done = 0
        while done < target.count {
            let n: Int
            do {
                n = try retryingOnInterrupt("read") {
                    pread(descriptor, target.baseAddress! + done, target.count - done, off_t(offset + done))
                }
            } catch {
                throw .scratch(path: name, operation: "read", reason: error.reason)
            }
            guard n > 0 else { throw .scratch(path: name, operation: "read", reason: "short file") }
            done += n
        }
    }

    /// The whole file, flushed first, in memory of its own.
    func readAll() throws(OSMError) -> ScratchBytes {
        try flush()
        let bytes = ScratchBytes(count: length)
        if length > 0 { try read(into: bytes.mutable, at: 0) }
        return bytes
    }
}

/// Reads values back from bytes a `ScratchFile` wrote, in order; a short or bad record is an error
/// naming the file.
struct ScratchCursor {
    let bytes: UnsafeRawBufferPointer
    let name: String
    private(set) var offset = 0

    init(_ bytes: UnsafeRawBufferPointer, name: String) {
        self.bytes = bytes
        self.name = name
    }

    var isAtEnd: Bool { offset >= bytes.count }

    @inline(__always)
    mutating func read<T: FixedWidthInteger>(_: T.Type = T.self) throws(OSMError) -> T {
        guard offset + MemoryLayout<T>.size <= bytes.count else {
            throw .scratch(path: name, operation: "read", reason: "a record ends early")
        }
        defer { offset += MemoryLayout<T>.size }
        return T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    mutating func double() throws(OSMError) -> Double { Double(bitPattern: try read(UInt64.self)) }

    mutating func string() throws(OSMError) -> String {
        let count = Int(try read(UInt32.self))
        guard offset + count <= bytes.count else {
            throw .scratch(path: name, operation: "read", reason: "a record ends early")
        }
        defer { offset += count }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count]), as: UTF8.self)
    }
}

/// Bytes read back from a `ScratchFile`, freed with the value.
final class ScratchBytes {
    let mutable: UnsafeMutableRawBufferPointer
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(mutable) }
    var isEmpty: Bool { mutable.isEmpty }

    init(count: Int) { mutable = .allocate(byteCount: max(count, 1), alignment: 16).prefixBuffer(count) }

    deinit { mutable.deallocate() }
}

extension UnsafeMutableRawBufferPointer {
    fileprivate func prefixBuffer(_ count: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: baseAddress, count: count)
    }
}
