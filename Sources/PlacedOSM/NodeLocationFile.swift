#if canImport(Glibc)
    import Glibc
#endif

/// Every node's location on disk, for imports whose nodes do not fit in memory (osmium's
/// `sparse_file_array`, in pages): nodes are appended in id order, as sorted files list them, into pages
/// of 4 kB holding 340 of them (the id's low 32 bits, then the locations; a page's ids share their
/// high 32 bits). Memory holds each page's first id, 8 bytes for 340 nodes (6.8 MB for 289 M nodes).
///
/// Written sequentially through a buffer, then read through a read-only mapping, one page a lookup.
/// The mapping's pages count in the process's RSS once touched, so they are released (`MADV_DONTNEED`;
/// they stay in the page cache) whenever the lookups have touched `releaseBytes` of distinct pages since
/// the last release. Counted by page, not by move from page to page: ways go back and forth between a
/// few pages, and releasing on moves made each of them fault in again many times (system time).
final class NodeLocationFile {
    static let pageBytes = 4096
    static let perPage = 340
    static let locationsOffset = 4 * perPage
    static let countOffset = pageBytes - 4

    private let file: ScratchFile
    /// The first id of every page, increasing.
    private var firstIDs: [Int64] = []
    private let page = UnsafeMutableRawBufferPointer.allocate(byteCount: NodeLocationFile.pageBytes, alignment: 4096)
    private var inPage = 0
    private var lastID: Int64?
    private var mapping: UnsafeRawPointer?
    private var mappedBytes = 0
    /// Distinct pages touched since the last release (one bit a page), and how many.
    private var touched: [UInt64] = []
    private var pagesTouched = 0
    private var lastPage = -1
    let releaseBytes: Int
    /// Releases so far (tests check that going back and forth between a few pages releases nothing).
    private(set) var releases = 0
    private(set) var count = 0
    /// The first failure of `append` (out of order, a write): the import checks it after each block.
    private(set) var failure: OSMError?

    init(in directory: String, releaseBytes: Int = 64 << 20) throws(OSMError) {
        file = try ScratchFile(in: directory, purpose: "node locations", bufferBytes: 1 << 20)
        self.releaseBytes = max(releaseBytes, 1 << 20)
        page.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        page.deallocate()
        if let mapping { munmap(UnsafeMutableRawPointer(mutating: mapping), mappedBytes) }
    }

    /// Appends node `id`, which must be greater than every id before it and come before `finishWriting`.
    @inline(__always)
    func append(id: Int64, location: NodeLocation) {
        guard failure == nil else { return }
        guard mapping == nil, mappedBytes == 0 else {
            failure = .unsorted(path: file.name, detail: "node \(id) comes after a way")
            return
        }
        if let lastID {
            guard id > lastID else {
                failure = .unsorted(path: file.name, detail: "node \(id) comes after node \(lastID)")
                return
            }
            if inPage == Self.perPage || id >> 32 != lastID >> 32 { writePage() }
        }
        if inPage == 0 { firstIDs.append(id) }
        page.storeBytes(of: UInt32(truncatingIfNeeded: id), toByteOffset: 4 * inPage, as: UInt32.self)
        page.storeBytes(of: location.latitude, toByteOffset: Self.locationsOffset + 8 * inPage, as: Int32.self)
        page.storeBytes(of: location.longitude, toByteOffset: Self.locationsOffset + 8 * inPage + 4, as: Int32.self)
        inPage += 1
        count += 1
        lastID = id
    }

    private func writePage() {
        page.storeBytes(of: UInt32(inPage), toByteOffset: Self.countOffset, as: UInt32.self)
        do {
            try file.append(UnsafeRawBufferPointer(page))
        } catch {
            failure = error
        }
        inPage = 0
    }

    /// After the last node: writes the last page and maps the file for lookups. Appending after this is
    /// an error (a node after a way: the file is not sorted). Throws the first failure of `append`.
    func finishWriting() throws(OSMError) {
        if let failure { throw failure }
        guard mapping == nil, mappedBytes == 0 else { return }
        if inPage > 0 { writePage() }
        if let failure { throw failure }
        try file.flush()
        mappedBytes = file.length
        guard mappedBytes > 0 else {
            mappedBytes = -1  // no nodes: every lookup misses
            return
        }
        let address = mmap(nil, mappedBytes, PROT_READ, MAP_SHARED, file.descriptor, 0)
        guard let address, address != MAP_FAILED else {
            throw .scratch(path: file.name, operation: "map", reason: ScratchFile.describe(errno))
        }
        mapping = UnsafeRawPointer(address)
        touched = Array(repeating: 0, count: (firstIDs.count + 63) / 64)
    }

    /// The location of node `id`; nil when the file has no such node.
    func location(of id: Int64) -> NodeLocation? {
        guard let mapping else { return nil }
        // The last page whose first id is at most `id`: a way's nodes are mostly on the page of the
        // node before, so that page is tried before the bisection.
        let number = firstIDs.withUnsafeBufferPointer { firsts in
            if lastPage >= 0, firsts[lastPage] <= id, lastPage + 1 == firsts.count || id < firsts[lastPage + 1] {
                return lastPage
            }
            var low = 0
            var high = firsts.count
            while low < high {
                let middle = (low + high) / 2
                if firsts[middle] <= id { low = middle + 1 } else { high = middle }
            }
            return low - 1
        }
        guard number >= 0, firstIDs[number] >> 32 == id >> 32 else { return nil }
        if number != lastPage {
            lastPage = number
            let bit: UInt64 = 1 << UInt64(number & 63)
            if touched[number >> 6] & bit == 0 {
                if (pagesTouched + 1) * Self.pageBytes > releaseBytes { releasePages() }
                touched[number >> 6] |= bit
                pagesTouched += 1
            }
        }
        let page = mapping + number * Self.pageBytes
        let count = Int(page.loadUnaligned(fromByteOffset: Self.countOffset, as: UInt32.self))
        let target = UInt32(truncatingIfNeeded: id)
        var first = 0
        var end = count
        while first < end {
            let middle = (first + end) / 2
            if page.loadUnaligned(fromByteOffset: 4 * middle, as: UInt32.self) < target {
                first = middle + 1
            } else {
                end = middle
            }
        }
        guard first < count, page.loadUnaligned(fromByteOffset: 4 * first, as: UInt32.self) == target else {
            return nil
        }
        return NodeLocation(
            latitude: page.loadUnaligned(fromByteOffset: Self.locationsOffset + 8 * first, as: Int32.self),
            longitude: page.loadUnaligned(fromByteOffset: Self.locationsOffset + 8 * first + 4, as: Int32.self))
    }

    /// Drops the mapping's pages from the process (they stay in the page cache).
    func releasePages() {
        pagesTouched = 0
        for index in touched.indices { touched[index] = 0 }
        guard let mapping else { return }
        releases += 1
        madvise(UnsafeMutableRawPointer(mutating: mapping), mappedBytes, MADV_DONTNEED)
    }

    /// Bytes on disk.
    var fileBytes: Int { file.length }
}
