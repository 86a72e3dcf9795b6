/// Why an .osm.pbf file could not be read. Every case names the file; those about its contents
/// also name the byte offset of the blob (the 4-byte length that starts it) where reading stopped.
public enum OSMError: Error, Equatable, Sendable, CustomStringConvertible {
    case fileNotFound(path: String)
    /// The file exists but cannot be opened or read (permissions, a directory, an I/O error).
    case unreadable(path: String, reason: String)
    /// The file does not start with an OSMHeader blob: not an .osm.pbf file.
    case notPBF(path: String)
    /// The file ends inside a blob.
    case truncated(path: String, offset: Int)
    /// A blob or its contents do not decode: bad protobuf, bad zlib stream, wrong sizes.
    case corruptBlob(path: String, offset: Int, reason: String)
    /// A blob compressed with something other than none or zlib (lzma, lz4, zstd, bzip2).
    case unsupportedCompression(path: String, offset: Int, compression: String)
    /// The OSMHeader requires a feature this reader does not implement (e.g. HistoricalInformation).
    case unsupportedFeature(path: String, feature: String)
    /// A BlobHeader over 64 KiB or a Blob over 32 MiB: the PBF specification's limits.
    case oversizedBlob(path: String, offset: Int, size: Int, limit: Int)
    /// The disk-backed import needs nodes sorted by id before every way (as `osmium sort` writes them);
    /// `detail` says where the order broke.
    case unsorted(path: String, detail: String)
    /// A temporary file of the import could not be created, written or read.
    case scratch(path: String, operation: String, reason: String)

    public var description: String {
        switch self {
        case .fileNotFound(let path):
            "\(path): no such file"
        case .unreadable(let path, let reason):
            "\(path): cannot read: \(reason)"
        case .notPBF(let path):
            "\(path): not an OSM PBF file (no OSMHeader blob at its start)"
        case .truncated(let path, let offset):
            "\(path): truncated: the file ends inside the blob at byte \(offset)"
        case .corruptBlob(let path, let offset, let reason):
            "\(path): corrupt blob at byte \(offset): \(reason)"
        case .unsupportedCompression(let path, let offset, let compression):
            "\(path): blob at byte \(offset) uses \(compression) compression; only raw and zlib are supported"
        case .unsupportedFeature(let path, let feature):
            "\(path): the file requires the feature \"\(feature)\", which this reader does not support"
        case .oversizedBlob(let path, let offset, let size, let limit):
            "\(path): blob at byte \(offset) is \(size) bytes, over the PBF limit of \(limit)"
        case .unsorted(let path, let detail):
            "\(path): not sorted by type, then id (\(detail)): sort it with 'osmium sort', or give a"
                + " --memory-limit it fits in to read it in one pass"
        case .scratch(let path, let operation, let reason):
            "\(path): cannot \(operation) the import's temporary file: \(reason)"
        }
    }
}
