/// Which parts of a places file to ask the kernel for (`MADV_WILLNEED`) as soon as it is mapped, so the
/// disk reads them while start-up goes on instead of one page fault at a time when opening and the first
/// ranking touch them. The mapping itself stays `MADV_RANDOM` (a query's fault reads its page, nothing
/// around it); the readahead fills the page cache only, not RSS: a page joins RSS when it is touched.
///
/// With the file evicted, a Helsinki start took ~19 disk reads one after another (the SQLite header,
/// schema and meta pages, the trailer, the pack's header, kinds and index header, then the first
/// ranking's tree nodes, columns and records), 0.1–0.2 ms each on this VM's virtio disk; one readahead
/// of the whole ~1 MB file costs about one such read plus ~1 ms of transfer.
///
/// A small file is read whole. A large one (a continent's are gigabytes) only where every start reads,
/// whatever the position: the head, where the import writes SQLite's header, schema and meta table
/// first, and the tail, the pack's trailer; the rest is left to the faults of the places used.
public enum PlaceFileReadahead {
    /// Files up to this size are read whole: ~1 ms of transfer per MB here, against the ~20 faults of
    /// 0.1–0.2 ms it saves.
    public static let wholeFileLimit = 2 << 20
    /// SQLite's header, schema and meta pages in a file the import wrote (pages 1–3 at 4 kB a page).
    public static let headBytes = 64 << 10
    /// The pack's trailer, in the file's last bytes.
    public static let tailBytes = 4 << 10
    /// The kernel reads at most max(read_ahead_kb, max_sectors_kb) per advice (`force_page_cache_ra`):
    /// 128 kB and 512–1280 kB on common devices. A range is asked for in pieces no larger than this so
    /// the whole of it is read.
    public static let chunkBytes = 128 << 10

    /// The byte ranges to advise for a file of `fileSize` bytes, each starting on a `pageSize` boundary
    /// (madvise's requirement), none longer than `chunkBytes`, in file order, not overlapping, within
    /// the file.
    public static func ranges(fileSize: Int, pageSize: Int = 4096) -> [Range<Int>] {
        precondition(pageSize > 0 && pageSize & (pageSize - 1) == 0, "PlaceFileReadahead: page size \(pageSize)")
        guard fileSize > 0 else { return [] }
        let wanted: [Range<Int>]
        if fileSize <= wholeFileLimit || fileSize <= headBytes + tailBytes {
            wanted = [0..<fileSize]
        } else {
            let tailStart = (fileSize - tailBytes) & ~(pageSize - 1)
            wanted = [0..<headBytes, max(headBytes, tailStart)..<fileSize]
        }
        return wanted.flatMap { chunks(of: $0) }
    }

    private static func chunks(of range: Range<Int>) -> [Range<Int>] {
        stride(from: range.lowerBound, to: range.upperBound, by: chunkBytes).map {
            $0..<min($0 + chunkBytes, range.upperBound)
        }
    }
}

#if canImport(Glibc)
    import Glibc
#endif

extension PlaceFileReadahead {
    /// Asks for `ranges(fileSize:)` of the file at `path` now, before anything maps it: the first thing
    /// start-up does, so the disk reads while the event loop and the core are built. Quietly nothing when
    /// the file cannot be opened (opening it for real names the error).
    public static func start(path: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return }
        for range in ranges(fileSize: Int(status.st_size), pageSize: Int(sysconf(Int32(_SC_PAGESIZE)))) {
            _ = posix_fadvise(descriptor, off_t(range.lowerBound), off_t(range.count), POSIX_FADV_WILLNEED)
        }
    }
}
