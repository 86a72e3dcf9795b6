import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A whole file mapped read-only and shared, so its pages are the page cache's (nothing is copied at
/// start, and RSS grows only with the pages a query touches), read in place by the places file's
/// readers.
///
/// A file mapped here is one an import renamed into place whole, never written again: a newer import
/// renames another file over the path, and this mapping keeps the old inode until it is released. If
/// something else truncates the file in place anyway, touching a page past its new end would raise
/// SIGBUS; `MappingGuard` then maps zero pages over the rest of the mapping, so the access reads zeros
/// instead of killing the process, and marks this mapping damaged, which its readers check after each
/// query (a load from memory, no system call) and report as a damaged file.
final class MappedFile {
    let path: String
    let bytes: UnsafeRawBufferPointer
    /// The file as mapped (from fstat of the descriptor mapped, not a later stat of the path).
    let identity: FileIdentity
    private let slot: Int

    /// Maps `path`; a file that is not a regular one fails `open` with EINVAL.
    init(path: String) throws(SystemError) {
        self.path = path
        let descriptor = try checkPOSIX(open(path, O_RDONLY | O_CLOEXEC), "open")
        defer { close(descriptor) }
        var status = stat()
        try checkPOSIX(fstat(descriptor, &status), "fstat")
        guard status.st_mode & S_IFMT == S_IFREG else { throw SystemError("open", errno: EINVAL) }
        identity = FileIdentity(status)
        let size = Int(status.st_size)
        guard size > 0 else {
            bytes = UnsafeRawBufferPointer(start: nil, count: 0)
            slot = -1
            return
        }
        let base = try checkPOSIX(mmap(nil, size, PROT_READ, MAP_SHARED, descriptor, 0), "mmap")
        // Queries touch a few pages here and there: no readahead, so the page cache (and RSS) holds what
        // was touched rather than the 128 kB around each touch.
        _ = madvise(base, size, MADV_RANDOM)
        guard let slot = MappingGuard.register(UnsafeRawPointer(base), size) else {
            munmap(base, size)
            throw SystemError("register mapping", errno: EMFILE)
        }
        self.slot = slot
        bytes = UnsafeRawBufferPointer(start: base, count: size)
    }

    deinit {
        guard let base = bytes.baseAddress else { return }
        MappingGuard.unregister(slot)
        munmap(UnsafeMutableRawPointer(mutating: base), bytes.count)
    }

    /// True once a read found the file shorter than it was when mapped (truncated in place).
    var isDamaged: Bool { slot >= 0 && MappingGuard.isDamaged(slot) }

    /// Drops the mapping's pages from this process (MADV_DONTNEED): they stay in the page cache, so
    /// the next touch is a minor fault, not a read, but RSS no longer keeps every page a long drive
    /// touched. One system call for the whole mapping.
    func releaseResidentPages() {
        guard let base = bytes.baseAddress else { return }
        _ = madvise(UnsafeMutableRawPointer(mutating: base), bytes.count, MADV_DONTNEED)
    }

    /// Asks the kernel to read `ranges` (page-aligned offsets into the file) into the page cache now, in
    /// the background: parts the caller is about to touch (`PlaceFileReadahead`). RSS does not grow.
    func advise(_ ranges: [Range<Int>]) {
        guard let base = bytes.baseAddress else { return }
        for range in ranges where range.lowerBound >= 0 && range.upperBound <= bytes.count {
            _ = madvise(UnsafeMutableRawPointer(mutating: base + range.lowerBound), range.count, MADV_WILLNEED)
        }
    }

    /// Readahead back for a reader that goes through the whole file (`PlaceFileUpgrade`), not a query's.
    func expectSequentialReads() {
        guard let base = bytes.baseAddress else { return }
        _ = madvise(UnsafeMutableRawPointer(mutating: base), bytes.count, MADV_SEQUENTIAL)
    }
}

/// The process's SIGBUS handler for the mappings above. A fault inside a registered mapping replaces
/// the mapping from the faulting page on with anonymous zero pages (mmap MAP_FIXED, which Linux runs
/// from a signal handler like any system call) and sets the mapping's damaged flag; the faulting load
/// is then retried and reads zeros. A fault anywhere else goes to the handler that was there before
/// (the default: the process dies, as it should).
///
/// The table is fixed and lives in static memory: the handler allocates nothing and takes no lock.
/// Registration happens on the thread that maps, before any reader can touch the mapping.
enum MappingGuard {
    static let capacity = 32
    nonisolated(unsafe) private static var table: UnsafeMutablePointer<UInt> = {
        // start, end, damaged per slot, in one allocation the handler reads without Swift arrays.
        let table = UnsafeMutablePointer<UInt>.allocate(capacity: 3 * capacity)
        table.initialize(repeating: 0, count: 3 * capacity)
        return table
    }()
    nonisolated(unsafe) private static var previous = sigaction()
    nonisolated(unsafe) private static var installed = false
    nonisolated(unsafe) private static var pageSize: UInt = 4096

    static func register(_ base: UnsafeRawPointer, _ size: Int) -> Int? {
        installIfNeeded()
        for slot in 0..<capacity where table[3 * slot + 1] == 0 {
            table[3 * slot] = UInt(bitPattern: base)
            table[3 * slot + 2] = 0
            table[3 * slot + 1] = UInt(bitPattern: base) + UInt(size)
            return slot
        }
        return nil
    }

    static func unregister(_ slot: Int) {
        guard slot >= 0 else { return }
        table[3 * slot + 1] = 0
        table[3 * slot] = 0
        table[3 * slot + 2] = 0
    }

    static func isDamaged(_ slot: Int) -> Bool { table[3 * slot + 2] != 0 }

    private static func installIfNeeded() {
        guard !installed else { return }
        installed = true
        pageSize = UInt(sysconf(Int32(_SC_PAGESIZE)))
        var action = sigaction()
        action.__sigaction_handler.sa_sigaction = { signal, info, context in
            MappingGuard.handle(signal, info, context)
        }
        action.sa_flags = SA_SIGINFO | SA_NODEFER
        sigemptyset(&action.sa_mask)
        sigaction(SIGBUS, &action, &previous)
    }

    private static func handle(
        _ signal: Int32, _ info: UnsafeMutablePointer<siginfo_t>?, _ context: UnsafeMutableRawPointer?
    ) {
        if let info {
            let address = UInt(bitPattern: info.pointee._sifields._sigfault.si_addr)
            let page = pageSize
            for slot in 0..<capacity {
                let start = table[3 * slot]
                let end = table[3 * slot + 1]
                guard end != 0, address >= start, address < end else { continue }
                let from = address & ~(page - 1)
                let replaced = mmap(
                    UnsafeMutableRawPointer(bitPattern: from), Int(end - from), PROT_READ,
                    MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1, 0)
                if replaced != MAP_FAILED {
                    table[3 * slot + 2] = 1
                    return
                }
            }
        }
        // Not ours (or the zero pages could not be mapped): the previous handler, else the default.
        if previous.sa_flags & SA_SIGINFO != 0, let handler = previous.__sigaction_handler.sa_sigaction {
            handler(signal, info, context)
        } else {
            sigaction(SIGBUS, &previous, nil)
        }
    }
}

extension FileIdentity {
    init(_ status: stat) {
        self.init(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size),
            modified: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec))
    }
}
