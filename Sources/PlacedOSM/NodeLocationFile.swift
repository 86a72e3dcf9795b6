import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Every node's location on disk, for imports whose nodes do not fit in memory (osmium's
/// `sparse_file_array`, in pages): nodes are appended in the order `osmium sort` writes them (`orderKey`:
/// negative ids first, by absolute value, then the others ascending), into pages
/// of 4 kB of two kinds, chosen page by page for whichever holds more of the nodes that come next:
///
/// - a **dense** page holds the 512 ids from its first one on, 8 bytes each, location only: slot
///   `id - first` (a slot whose id the file does not have holds `absent`, a latitude no node has). Files
///   whose ids run mostly consecutively (planet-wide ones, the synthetic ones) need 8 bytes a node, not
///   12: less written, less read back, fewer pages to fault in;
/// - a **sparse** page holds 340 nodes of any spread (the id's low 32 bits, then the locations; its ids
///   share their high 32 bits; the count in the last 4 bytes), for extracts whose ids are scattered over
///   the planet's range, where a dense page would be mostly empty slots.
///
/// So gaps cost nothing in correctness: a small gap is empty slots of a dense page, a large one ends the
/// page (the next page starts at the next id). To choose, up to 512 nodes wait in memory until both
/// counts are known (what a dense page from the first waiting id would hold, and a sparse one). Memory
/// holds each page's first id and its kind (a bit, so that a dense page is all slots): 4.5 MB for 289 M
/// nodes in dense pages, 6.8 MB in sparse ones.
///
/// Written sequentially through a buffer, then read through a read-only mapping, one page a lookup.
/// The mapping's pages count in the process's RSS once touched, so they are released (`MADV_DONTNEED`;
/// they stay in the page cache) whenever the lookups have touched `releaseBytes` of distinct pages since
/// the last release. Counted by page, not by move from page to page: ways go back and forth between a
/// few pages, and releasing on moves made each of them fault in again many times (system time).
final class NodeLocationFile {
    static let pageBytes = 4096
    /// Ids a dense page covers.
    static let perPage = pageBytes / 8
    /// Nodes a sparse page holds.
    static let perSparsePage = 340
    static let locationsOffset = 4 * perSparsePage
    static let countOffset = pageBytes - 4
    /// The latitude of a dense page's slot without a node: no node has it (the decoder keeps latitudes
    /// within ±90°); a node that did would go in a sparse page.
    static let absent = Int32.min

    private let file: ScratchFile
    /// The first id of every page, increasing, and whether each page is dense (one bit a page).
    private var firstIDs: [Int64] = []
    private var densePageBits: [UInt64] = []
    private let page: UnsafeMutableRawBufferPointer
    /// The nodes not yet in a page, in id order: at most `perPage` between appends (more would have
    /// chosen a page), and the one just appended.
    private let waitingIDs: UnsafeMutablePointer<Int64>
    private let waitingLocations: UnsafeMutablePointer<NodeLocation>
    private var waiting = 0
    /// The order key (`orderKey`) of the last node appended.
    private var lastKey: Int64?
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
    /// Pages written, and how many of them dense.
    var pages: Int { firstIDs.count }
    private(set) var densePages = 0
    /// The first failure of `append` (out of order, a write): the import checks it after each block.
    private(set) var failure: OSMError?

    init(in directory: String, releaseBytes: Int = 64 << 20) throws(OSMError) {
        file = try ScratchFile(in: directory, purpose: "node locations", bufferBytes: 1 << 20)
        // Allocated once nothing can throw: a class whose init fails never runs its deinit.
        page = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.pageBytes, alignment: 4096)
        waitingIDs = UnsafeMutablePointer<Int64>.allocate(capacity: Self.perPage + 1)
        waitingLocations = UnsafeMutablePointer<NodeLocation>.allocate(capacity: Self.perPage + 1)
        self.releaseBytes = max(releaseBytes, 1 << 20)
        page.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        page.deallocate()
        waitingIDs.deallocate()
        waitingLocations.deallocate()
        if let mapping { munmap(UnsafeMutableRawPointer(mutating: mapping), mappedBytes) }
    }

    /// Where node `id` falls in the order `osmium sort` writes: the negative ids editors give new objects
    /// first, by absolute value (−1, −2, …), then the others ascending. Pages, their first ids and a
    /// sparse page's low 32 bits all hold this key, so either kind of run of ids is a run of keys.
    /// Its own inverse. (Int64.min, which has no absolute value, is the one id `append` refuses.)
    @inline(__always)
    static func orderKey(_ id: Int64) -> Int64 { id < 0 ? Int64.min &- id : id }

    /// Appends node `id`, which must come after every id before it in `osmium sort`'s order (`orderKey`)
    /// and before `finishWriting`.
    @inline(__always)
    func append(id: Int64, location: NodeLocation) {
        guard failure == nil else { return }
        guard mapping == nil, mappedBytes == 0 else {
            failure = .unsorted(path: file.name, detail: "node \(id) comes after a way")
            return
        }
        guard id != .min else {
            failure = .unsorted(path: file.name, detail: "node \(id) has no place in osmium's order")
            return
        }
        let key = Self.orderKey(id)
        if let lastKey, key <= lastKey {
            failure = .unsorted(path: file.name, detail: "node \(id) comes after node \(Self.orderKey(lastKey))")
            return
        }
        waitingIDs[waiting] = key  // the pages hold keys
        waitingLocations[waiting] = location
        waiting += 1
        count += 1
        lastKey = key
        // A page is chosen once both counts are known: what a dense page from the first waiting id
        // would hold (known when this id is at or past its last slot) and what a sparse one would hold
        // (known at more than `perSparsePage` waiting, or when the high 32 bits change).
        while waiting > 0, failure == nil,
            UInt64(bitPattern: key &- waitingIDs[0]) >= UInt64(Self.perPage - 1),
            waiting > Self.perSparsePage || key >> 32 != waitingIDs[0] >> 32
        {
            writePage()
        }
    }

    /// Writes the page that holds the most of the waiting nodes from the first: dense when it holds at
    /// least as many as a sparse one would (its lookups need no search). The rest keep waiting.
    private func writePage() {
        let first = waitingIDs[0]
        var dense = 0
        while dense < waiting, UInt64(bitPattern: waitingIDs[dense] &- first) < UInt64(Self.perPage) {
            if waitingLocations[dense].latitude == Self.absent { break }
            dense += 1
        }
        var sparse = 0
        while sparse < min(waiting, Self.perSparsePage), waitingIDs[sparse] >> 32 == first >> 32 { sparse += 1 }
        let isDense = dense >= sparse
        let taken = isDense ? dense : sparse
        if isDense {
            if dense < Self.perPage {
                for slot in 0..<Self.perPage {
                    page.storeBytes(of: Self.absent, toByteOffset: 8 * slot, as: Int32.self)
                }
            }
            for index in 0..<dense {
                store(waitingLocations[index], at: 8 * Int(waitingIDs[index] &- first))
            }
        } else {
            for index in 0..<sparse {
                page.storeBytes(
                    of: UInt32(truncatingIfNeeded: waitingIDs[index]), toByteOffset: 4 * index, as: UInt32.self)
                store(waitingLocations[index], at: Self.locationsOffset + 8 * index)
            }
            page.storeBytes(of: UInt32(sparse), toByteOffset: Self.countOffset, as: UInt32.self)
        }
        let number = pages
        if number & 63 == 0 { densePageBits.append(0) }
        if isDense {
            densePageBits[number >> 6] |= 1 << UInt64(number & 63)
            densePages += 1
        }
        firstIDs.append(first)
        do {
            try file.append(UnsafeRawBufferPointer(page))
        } catch {
            failure = error
        }
        waiting -= taken
        if waiting > 0 {
            waitingIDs.update(from: waitingIDs + taken, count: waiting)
            waitingLocations.update(from: waitingLocations + taken, count: waiting)
        }
    }

    /// A location as the pages hold it: latitude, then longitude, at `offset` of the page being written.
    private func store(_ location: NodeLocation, at offset: Int) {
        page.storeBytes(of: location.latitude, toByteOffset: offset, as: Int32.self)
        page.storeBytes(of: location.longitude, toByteOffset: offset + 4, as: Int32.self)
    }

    /// The location at `offset` of a mapped page.
    private static func location(in page: UnsafeRawPointer, at offset: Int) -> NodeLocation {
        NodeLocation(
            latitude: page.loadUnaligned(fromByteOffset: offset, as: Int32.self),
            longitude: page.loadUnaligned(fromByteOffset: offset + 4, as: Int32.self))
    }

    /// After the last node: writes the last pages and maps the file for lookups. Appending after this is
    /// an error (a node after a way: the file is not sorted). Throws the first failure of `append`.
    func finishWriting() throws(OSMError) {
        if let failure { throw failure }
        guard mapping == nil, mappedBytes == 0 else { return }
        while waiting > 0, failure == nil { writePage() }
        if let failure { throw failure }
        try file.flush()
        mappedBytes = file.length
        guard mappedBytes > 0 else {
            mappedBytes = -1  // no nodes: every lookup misses
            return
        }
        do {
            mapping = UnsafeRawPointer(
                try checkPOSIX(mmap(nil, mappedBytes, PROT_READ, MAP_SHARED, file.descriptor, 0), "mmap"))
        } catch {
            throw .scratch(path: file.name, operation: "map", reason: error.reason)
        }
        touched = Array(repeating: 0, count: (firstIDs.count + 63) / 64)
    }

    /// The location of node `id`; nil when the file has no such node.
    func location(of id: Int64) -> NodeLocation? {
        guard let mapping, id != .min else { return nil }
        let id = Self.orderKey(id)  // what the pages hold
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
        guard number >= 0 else { return nil }
        let first = firstIDs[number]
        let isDense = densePageBits[number >> 6] & (1 << UInt64(number & 63)) != 0
        if isDense {
            guard UInt64(bitPattern: id &- first) < UInt64(Self.perPage) else { return nil }
        } else {
            guard first >> 32 == id >> 32 else { return nil }
        }
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
        if isDense {
            let location = Self.location(in: page, at: 8 * Int(id &- first))
            return location.latitude == Self.absent ? nil : location
        }
        let count = Int(page.loadUnaligned(fromByteOffset: Self.countOffset, as: UInt32.self))
        let target = UInt32(truncatingIfNeeded: id)
        var low = 0
        var end = count
        while low < end {
            let middle = (low + end) / 2
            if page.loadUnaligned(fromByteOffset: 4 * middle, as: UInt32.self) < target {
                low = middle + 1
            } else {
                end = middle
            }
        }
        guard low < count, page.loadUnaligned(fromByteOffset: 4 * low, as: UInt32.self) == target else {
            return nil
        }
        return Self.location(in: page, at: Self.locationsOffset + 8 * low)
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

    /// Where the pages are mapped, for tests that read the mapping's resident size.
    var mappedAddress: UnsafeRawPointer? { mapping }
}
