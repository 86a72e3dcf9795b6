#if canImport(Glibc)
    import Glibc
#endif

/// Which parts of a places file to ask the kernel for (`MADV_WILLNEED`, `POSIX_FADV_WILLNEED`) at start,
/// so the disk reads them in a few requests at once instead of one page fault at a time as opening the
/// file and the first ranking touch them. The mapping itself stays `MADV_RANDOM` (a query's fault reads
/// its page, nothing around it); the readahead fills the page cache only, not RSS: a page joins RSS when
/// it is touched, as it would have from a warm cache.
///
/// With the file evicted, a Helsinki start waited for 19 disk reads one after another (SQLite's header,
/// schema and meta pages, the pack's trailer, header, kinds and index header, then the first ranking's
/// tree nodes, columns and records), 0.2 ms each on this VM's virtio disk. The disk moves only ~300 MB/s
/// in a busy minute, so reading the whole 1 MB file costs as much as those faults: what is asked for is
/// what every start reads, in two steps —
/// 1. `opening`: the head (SQLite's header, schema and meta, which the import writes first) and the
///    trailer's page;
/// 2. `pack`, once the trailer says where the pack is: a small pack whole (its index, columns and
///    records: what any first ranking reads part of), a large one (a continent's is gigabytes) only its
///    header page; the rest is left to the faults of the places used.
public enum PlaceFileReadahead {
    /// SQLite's header, schema and meta table: pages 1–3 of a file the import wrote, and one to spare.
    public static let headBytes = 16 << 10
    /// Packs up to this size are read whole: ~3 ms at the disk's slowest, about what the faults of a
    /// first ranking over them cost one at a time.
    public static let wholePackLimit = 1 << 20
    /// The kernel reads at most max(read_ahead_kb, max_sectors_kb) per advice (`force_page_cache_ra`):
    /// 128 kB and 512–1280 kB on common devices. A range is asked for in pieces no larger than this so
    /// the whole of it is read.
    public static let chunkBytes = 128 << 10

    /// Step 1, for a file of `fileSize` bytes: the head and the page that holds the trailer.
    public static func opening(fileSize: Int, pageSize: Int = 4096) -> [Range<Int>] {
        precondition(pageSize > 0 && pageSize & (pageSize - 1) == 0, "PlaceFileReadahead: page size \(pageSize)")
        guard fileSize > 0 else { return [] }
        let tailStart = max(0, fileSize - PlacePack.trailerSize) & ~(pageSize - 1)
        let head = min(headBytes, fileSize)
        return chunks(of: tailStart <= head ? [0..<fileSize] : [0..<head, tailStart..<fileSize])
    }

    /// Step 2: the pack that `trailer` (the file's last `PlacePack.trailerSize` bytes) names, whole when it
    /// is at most `wholePackLimit`, else its header page; nothing when the trailer is not a pack's
    /// (opening the file names that error).
    public static func pack(fileSize: Int, trailer: UnsafeRawBufferPointer, pageSize: Int = 4096) -> [Range<Int>] {
        guard trailer.count == PlacePack.trailerSize, trailer.prefix(8).elementsEqual(PlacePack.trailerMagic) else {
            return []
        }
        let start = Int(
            truncatingIfNeeded: UInt64(littleEndian: trailer.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        let length = Int(
            truncatingIfNeeded: UInt64(littleEndian: trailer.loadUnaligned(fromByteOffset: 16, as: UInt64.self)))
        guard start >= 0, start % pageSize == 0, length >= PlacePack.headerSize, start <= fileSize - length else {
            return []
        }
        return chunks(of: [start..<(length <= wholePackLimit ? fileSize : start + PlacePack.headerSize)])
    }

    private static func chunks(of ranges: [Range<Int>]) -> [Range<Int>] {
        ranges.flatMap { range in
            stride(from: range.lowerBound, to: range.upperBound, by: chunkBytes).map {
                $0..<min($0 + chunkBytes, range.upperBound)
            }
        }
    }

    /// Both steps on the file at `path`, before anything maps it: the first thing start-up does, so the
    /// pack is read while the event loop and the core are built (the trailer itself is waited for, one
    /// read beside the head). Quietly nothing when the file cannot be read (opening it names the error).
    public static func start(path: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return }
        let size = Int(status.st_size)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        func advise(_ ranges: [Range<Int>]) {
            for range in ranges {
                _ = posix_fadvise(descriptor, off_t(range.lowerBound), off_t(range.count), POSIX_FADV_WILLNEED)
            }
        }
        advise(opening(fileSize: size, pageSize: page))
        guard size >= PlacePack.trailerSize else { return }
        var trailer = [UInt8](repeating: 0, count: PlacePack.trailerSize)
        let read = trailer.withUnsafeMutableBytes {
            pread(descriptor, $0.baseAddress, PlacePack.trailerSize, off_t(size - PlacePack.trailerSize))
        }
        guard read == PlacePack.trailerSize else { return }
        trailer.withUnsafeBytes { advise(pack(fileSize: size, trailer: $0, pageSize: page)) }
    }
}
