import PlacedCore
import Testing

@testable import PlacedStore

#if canImport(Glibc)
    import Glibc
#endif

/// Which pages of the file at `path` are in the page cache (mincore over a mapping of it, which reads
/// nothing).
private func cachedPages(_ path: String) throws -> [Bool] {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    try #require(descriptor >= 0, "open \(path): errno \(errno)")
    defer { close(descriptor) }
    var status = stat()
    try #require(fstat(descriptor, &status) == 0)
    let size = Int(status.st_size)
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    let base = try #require(mmap(nil, size, PROT_READ, MAP_SHARED, descriptor, 0))
    try #require(base != MAP_FAILED)
    defer { munmap(base, size) }
    var vector = [UInt8](repeating: 0, count: (size + page - 1) / page)
    try #require(mincore(base, size, &vector) == 0, "mincore: errno \(errno)")
    return vector.map { $0 & 1 != 0 }
}

/// Waits (up to two seconds) until `done` holds of the file's cached pages: the readahead is asynchronous.
private func waitForPages(_ path: String, _ done: ([Bool]) -> Bool) throws -> [Bool] {
    var pages = try cachedPages(path)
    for _ in 0..<200 where !done(pages) {
        usleep(10_000)
        pages = try cachedPages(path)
    }
    return pages
}

@Suite struct PlaceFileReadaheadTests {
    @Test func aSmallFileIsAskedForWholeInBoundedPageAlignedPieces() {
        let size = 989_528  // the Helsinki extract's places file
        let ranges = PlaceFileReadahead.ranges(fileSize: size, pageSize: 4096)
        #expect(ranges.first?.lowerBound == 0)
        #expect(ranges.last?.upperBound == size)
        #expect(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
        #expect(ranges.allSatisfy { $0.lowerBound % 4096 == 0 && $0.count <= PlaceFileReadahead.chunkBytes })
        #expect(ranges.count == (size + PlaceFileReadahead.chunkBytes - 1) / PlaceFileReadahead.chunkBytes)
        #expect(
            PlaceFileReadahead.ranges(fileSize: PlaceFileReadahead.wholeFileLimit).reduce(0) { $0 + $1.count }
                == PlaceFileReadahead.wholeFileLimit)
    }

    @Test func aLargeFileIsAskedForOnlyItsHeadAndTrailer() {
        let size = 8_958_256_992  // city-30M: a continent's file must not be read whole at every start
        let ranges = PlaceFileReadahead.ranges(fileSize: size, pageSize: 4096)
        let total = ranges.reduce(0) { $0 + $1.count }
        #expect(total <= PlaceFileReadahead.headBytes + PlaceFileReadahead.tailBytes + 4096)
        #expect(ranges.first == 0..<PlaceFileReadahead.headBytes)
        #expect(ranges.last?.upperBound == size)
        #expect(ranges.contains { $0.contains(size - PlacePack.trailerSize) })
        #expect(ranges.allSatisfy { $0.lowerBound % 4096 == 0 && $0.count <= PlaceFileReadahead.chunkBytes })
        #expect(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound <= $1.lowerBound })
        // Just past the limit the plan switches to head and tail, and a 16 kB page size still aligns.
        let past = PlaceFileReadahead.ranges(fileSize: PlaceFileReadahead.wholeFileLimit + 1, pageSize: 16384)
        #expect(past.reduce(0) { $0 + $1.count } < PlaceFileReadahead.wholeFileLimit / 2)
        #expect(past.allSatisfy { $0.lowerBound % 16384 == 0 })
        #expect(PlaceFileReadahead.ranges(fileSize: 0).isEmpty)
    }

    /// An import leaves its file out of the page cache; opening it asks for all of a small file at once,
    /// map layer included, which opening itself never touches.
    @Test func openingAnEvictedSmallFileReadsItWhole() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        let places = (0..<2000).map { (i: Int) -> Place in
            let latitude = 60.1 + Double(i) * 1e-4
            let longitude = 24.9 + Double(i % 40) * 1e-4
            let kind = i % 2 == 0 ? "amenity=cafe" : "shop=bakery"
            return Place(
                id: "osm:node/\(i)", name: "place \(i)", kind: kind,
                coordinate: Coordinate(latitude: latitude, longitude: longitude))
        }
        try PlaceDatabase.replace(at: path, with: places)
        let before = try cachedPages(path)
        try #require(before.count * 4096 <= PlaceFileReadahead.wholeFileLimit, "the test file must be small")
        try #require(
            before.filter { $0 }.count < before.count / 2,
            "the import leaves its file evicted (not on tmpfs, whose pages never leave)")

        let database = try PlaceDatabase.open(path: path)
        let after = try waitForPages(path) { $0.allSatisfy { $0 } }
        #expect(after.allSatisfy { $0 }, "cached after opening: \(after.filter { $0 }.count) of \(after.count)")
        #expect(database.placeCount == places.count)
    }

    /// A large file (sparse here: its holes read as zero pages) gets its head and trailer, not the rest.
    @Test func startingOnALargeFileReadsOnlyItsHeadAndTail() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("large.db")
        let size = 64 << 20
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        try #require(descriptor >= 0)
        try #require(ftruncate(descriptor, off_t(size)) == 0)
        close(descriptor)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let head = PlaceFileReadahead.headBytes / page
        try #require(try cachedPages(path).filter { $0 }.isEmpty, "a new sparse file has no cached pages")

        PlaceFileReadahead.start(path: path)
        let pages = try waitForPages(path) { $0[0..<head].allSatisfy { $0 } && $0.last == true }
        #expect(pages[0..<head].allSatisfy { $0 }, "the head (on tmpfs readahead does nothing: the test needs a disk)")
        #expect(pages.last == true, "the trailer's page")
        let elsewhere = pages[head..<(pages.count - PlaceFileReadahead.tailBytes / page)].filter { $0 }.count
        #expect(elsewhere == 0, "\(elsewhere) pages read between the head and the tail")
    }
}
