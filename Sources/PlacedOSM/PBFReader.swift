import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Reads the blobs of an .osm.pbf file in order and hands out each OSMData block decompressed.
///
/// File layout (https://wiki.openstreetmap.org/wiki/PBF_Format): repeated
/// `[4-byte big-endian length][BlobHeader][Blob]`; the first blob is an OSMHeader, the rest are
/// OSMData (unknown types are skipped, as the format asks). Blobs are raw or zlib; the others
/// (lzma, lz4, zstd, bzip2) are a named error. All reads are positional, so an error names the
/// blob's offset, and nothing is ever written.
final class PBFReader {
    /// The specification's limits: readers may reject anything larger.
    static let maxBlobHeaderSize = 64 * 1024
    static let maxBlobSize = 32 * 1024 * 1024
    /// Features of a plain (non-history) OSM file, all of which this reader decodes.
    static let supportedFeatures: Set<String> = ["OsmSchema-V0.6", "DenseNodes"]

    let path: String
    /// File size in bytes.
    let totalBytes: Int
    /// Offset of the next blob: how far reading has got.
    private(set) var bytesRead = 0

    private let fd: Int32
    private var blob: ByteBuffer
    /// Where the next block's bytes go (a `BlockPrefetcher` hands each read a buffer of its own).
    var output: ByteBuffer
    private let inflater: Inflater

    init(path: String) throws(OSMError) {
        self.path = path
        do {
            fd = try checkPOSIX(open(path, O_RDONLY | O_CLOEXEC), "open")
        } catch {
            throw error.errno == ENOENT ? .fileNotFound(path: path) : .unreadable(path: path, reason: error.reason)
        }
        var info = stat()
        do {
            try checkPOSIX(fstat(fd, &info), "fstat")
        } catch {
            close(fd)
            throw .unreadable(path: path, reason: error.reason)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw .unreadable(path: path, reason: "not a regular file")
        }
        totalBytes = Int(info.st_size)
        do {
            inflater = try Inflater()
        } catch {
            close(fd)
            throw .unreadable(path: path, reason: error.description)
        }
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        blob = ByteBuffer()
        output = ByteBuffer()
        try readFileHeader()
    }

    deinit { close(fd) }

    /// The next OSMData block's PrimitiveBlock bytes (in `output`, valid until the next call into it)
    /// and its blob's offset; nil at the end of the file.
    func nextDataBlock() throws(OSMError) -> (bytes: UnsafeRawBufferPointer, offset: Int)? {
        while let (type, offset) = try nextBlob() {
            if type == .data { return (try payload(offset: offset), offset) }
            if type == .header { try validateHeader(try payload(offset: offset), offset: offset) }
        }
        return nil
    }

    /// The OSMData block whose blob starts at `offset` (one `nextDataBlock` returned before): a later
    /// pass reads only the blocks it needs.
    func dataBlock(at offset: Int) throws(OSMError) -> UnsafeRawBufferPointer? {
        bytesRead = offset
        return try nextDataBlock()?.bytes
    }

    // MARK: - Blobs

    private enum BlobType { case header, data, unknown }

    /// The first blob must be an OSMHeader: anything else means this is not a PBF file at all.
    private func readFileHeader() throws(OSMError) {
        let type: BlobType?
        do {
            type = try nextBlob()?.type
        } catch {
            switch error {
            case .fileNotFound, .unreadable: throw error
            default: throw .notPBF(path: path)
            }
        }
        guard type == .header else { throw .notPBF(path: path) }
        try validateHeader(try payload(offset: 0), offset: 0)
    }

    /// Reads the next BlobHeader and Blob into `blob`; nil at a clean end of file.
    private func nextBlob() throws(OSMError) -> (type: BlobType, offset: Int)? {
        let offset = bytesRead
        if offset == totalBytes { return nil }
        var lengthBytes: UInt32 = 0
        try withUnsafeMutableBytes(of: &lengthBytes) { (bytes) throws(OSMError) in
            try read(into: bytes, at: offset, blob: offset)
        }
        let headerLength = Int(UInt32(bigEndian: lengthBytes))
        guard headerLength <= Self.maxBlobHeaderSize else {
            throw .oversizedBlob(
                path: path, offset: offset, size: headerLength, limit: Self.maxBlobHeaderSize)
        }
        blob.reserve(max(headerLength, 1))
        let headerBytes = UnsafeMutableRawBufferPointer(rebasing: blob.bytes[0..<headerLength])
        try read(into: headerBytes, at: offset + 4, blob: offset)
        let (type, dataSize) = try parseBlobHeader(UnsafeRawBufferPointer(headerBytes), offset: offset)
        guard dataSize <= Self.maxBlobSize else {
            throw .oversizedBlob(path: path, offset: offset, size: dataSize, limit: Self.maxBlobSize)
        }
        blob.reserve(max(dataSize, 1))
        blob.count = dataSize
        try read(
            into: UnsafeMutableRawBufferPointer(rebasing: blob.bytes[0..<dataSize]),
            at: offset + 4 + headerLength, blob: offset)
        bytesRead = offset + 4 + headerLength + dataSize
        return (type, offset)
    }

    private func parseBlobHeader(_ bytes: UnsafeRawBufferPointer, offset: Int) throws(OSMError) -> (
        BlobType, Int
    ) {
        var type: BlobType?
        var dataSize: Int?
        do throws(ProtobufError) {
            var message = ProtobufReader(bytes)
            while let (field, wireType) = try message.nextField() {
                switch field {
                case 1:
                    try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                    let name = try message.lengthDelimited()
                    type = name.equals("OSMData") ? .data : name.equals("OSMHeader") ? .header : .unknown
                case 3:
                    try ProtobufReader.expect(wireType, .varint, field: field)
                    let size = try message.int64()
                    guard size >= 0 else { throw ProtobufError("negative datasize \(size)") }
                    dataSize = Int(clamping: size)
                default:
                    try message.skipField(wireType)
                }
            }
        } catch {
            throw .corruptBlob(path: path, offset: offset, reason: "BlobHeader: \(error.reason)")
        }
        guard let type, let dataSize else {
            throw .corruptBlob(
                path: path, offset: offset, reason: "BlobHeader lacks its type or datasize")
        }
        return (type, dataSize)
    }

    /// The current blob's content, decompressed.
    private func payload(offset: Int) throws(OSMError) -> UnsafeRawBufferPointer {
        var data: ProtobufReader?
        var compression = "raw"
        var rawSize: Int?
        do throws(ProtobufError) {
            var message = ProtobufReader(UnsafeRawBufferPointer(rebasing: blob.bytes[0..<blob.count]))
            while let (field, wireType) = try message.nextField() {
                switch field {
                case 1, 3, 4, 5, 6, 7:
                    try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                    data = try message.lengthDelimited()
                    compression = Self.compressionNames[Int(field)]
                case 2:
                    try ProtobufReader.expect(wireType, .varint, field: field)
                    let size = try message.int64()
                    guard size >= 0 else { throw ProtobufError("negative raw_size \(size)") }
                    rawSize = Int(clamping: size)
                default:
                    try message.skipField(wireType)
                }
            }
        } catch {
            throw .corruptBlob(path: path, offset: offset, reason: "Blob: \(error.reason)")
        }
        guard let data else {
            throw .corruptBlob(path: path, offset: offset, reason: "Blob has no data")
        }
        switch compression {
        case "raw":
            if let rawSize, rawSize != data.remaining {
                throw .corruptBlob(
                    path: path, offset: offset, reason: "raw_size \(rawSize) but \(data.remaining) bytes")
            }
            // Copied out of the blob buffer, which the next read overwrites while this block may be in use.
            output.reserve(max(data.remaining, 1))
            output.count = data.remaining
            let copy = UnsafeMutableRawBufferPointer(rebasing: output.bytes[0..<data.remaining])
            if data.remaining > 0 { copy.copyMemory(from: data.bytes) }
            return UnsafeRawBufferPointer(copy)
        case "zlib":
            guard let rawSize else {
                throw .corruptBlob(path: path, offset: offset, reason: "zlib blob without raw_size")
            }
            guard rawSize <= Self.maxBlobSize else {
                throw .oversizedBlob(path: path, offset: offset, size: rawSize, limit: Self.maxBlobSize)
            }
            output.reserve(max(rawSize, 1))
            output.count = rawSize
            let inflated = UnsafeMutableRawBufferPointer(rebasing: output.bytes[0..<rawSize])
            do {
                try inflater.inflate(data.bytes, into: inflated)
            } catch {
                throw .corruptBlob(path: path, offset: offset, reason: error.description)
            }
            return UnsafeRawBufferPointer(inflated)
        default:
            throw .unsupportedCompression(path: path, offset: offset, compression: compression)
        }
    }

    /// Blob field number → compression name (fileformat.proto).
    private static let compressionNames = ["", "raw", "", "zlib", "lzma", "bzip2", "lz4", "zstd"]

    /// HeaderBlock: every required feature must be one this reader implements.
    private func validateHeader(_ bytes: UnsafeRawBufferPointer, offset: Int) throws(OSMError) {
        var features: [String] = []
        do throws(ProtobufError) {
            var message = ProtobufReader(bytes)
            while let (field, wireType) = try message.nextField() {
                if field == 4 {
                    try ProtobufReader.expect(wireType, .lengthDelimited, field: field)
                    features.append(try message.lengthDelimited().string)
                } else {
                    try message.skipField(wireType)
                }
            }
        } catch {
            throw .corruptBlob(path: path, offset: offset, reason: "HeaderBlock: \(error.reason)")
        }
        if let unsupported = features.first(where: { !Self.supportedFeatures.contains($0) }) {
            throw .unsupportedFeature(path: path, feature: unsupported)
        }
    }

    // MARK: - I/O

    /// Fills `buffer` from `position`; a short read is a truncated file.
    private func read(into buffer: UnsafeMutableRawBufferPointer, at position: Int, blob offset: Int)
        throws(OSMError)
    {
        var done = 0
        while done < buffer.count {
            let n: Int
            do {
                n = try retryingOnInterrupt("read") {
                    pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(position + done))
                }
            } catch {
                throw .unreadable(path: path, reason: error.reason)
            }
            guard n > 0 else { throw .truncated(path: path, offset: offset) }
            done += n
        }
    }
}

/// A growable byte buffer reused across blobs: one allocation for the largest blob seen.
final class ByteBuffer {
    private(set) var bytes = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    /// Bytes in use.
    var count = 0

    func reserve(_ capacity: Int) {
        guard capacity > bytes.count else { return }
        bytes.deallocate()
        bytes = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { bytes.deallocate() }
}
