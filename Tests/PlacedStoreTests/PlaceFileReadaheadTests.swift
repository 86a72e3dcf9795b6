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

/// A trailer naming a pack at `start` of `length` bytes (PlacePack's layout).
private func trailer(start: Int, length: Int) -> [UInt8] {
    var bytes = PlacePack.trailerMagic
    withUnsafeBytes(of: UInt64(start).littleEndian) { bytes += $0 }
    withUnsafeBytes(of: UInt64(length).littleEndian) { bytes += $0 }
    return bytes + [UInt8](repeating: 7, count: 8)
}

private func bytesIn(_ ranges: [Range<Int>]) -> Int { ranges.reduce(0) { $0 + $1.count } }

/// Page-aligned, in pieces of at most `chunkBytes`, in file order without overlap.
private func wellFormed(_ ranges: [Range<Int>], pageSize: Int = 4096) -> Bool {
    ranges.allSatisfy { $0.lowerBound % pageSize == 0 && !$0.isEmpty && $0.count <= PlaceFileReadahead.chunkBytes }
        && zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound <= $1.lowerBound }
}

@Suite struct PlaceFileReadaheadTests {
    @Test func openingAsksForTheHeadAndTheTrailersPageWhateverTheSize() {
        for size in [989_528, 8_958_256_992] {  // Helsinki's places file, city-30M's
            let ranges = PlaceFileReadahead.opening(fileSize: size, pageSize: 4096)
            #expect(ranges.first == 0..<PlaceFileReadahead.headBytes)
            #expect(ranges.last == (size - PlacePack.trailerSize) / 4096 * 4096..<size)
            #expect(bytesIn(ranges) <= PlaceFileReadahead.headBytes + 4096)
            #expect(wellFormed(ranges))
        }
        #expect(PlaceFileReadahead.opening(fileSize: 10_000) == [0..<10_000])
        #expect(PlaceFileReadahead.opening(fileSize: 0).isEmpty)
        #expect(wellFormed(PlaceFileReadahead.opening(fileSize: 1 << 20, pageSize: 16384), pageSize: 16384))
    }

    @Test func aSmallPackIsAskedForWholeALargeOneOnlyItsHeader() {
        // Helsinki: the pack is the file's last 227,672 bytes, after a SQLite part with the map layer.
        let small = trailer(start: 761_856, length: 989_528 - 32 - 761_856)
        let whole = small.withUnsafeBytes { PlaceFileReadahead.pack(fileSize: 989_528, trailer: $0) }
        #expect(whole.first?.lowerBound == 761_856 && whole.last?.upperBound == 989_528)
        #expect(bytesIn(whole) == 989_528 - 761_856)
        #expect(wellFormed(whole))
        // city-30M: a 3.8 GB pack must not be read at every start.
        let large = trailer(start: 5_130_633_216, length: 8_958_256_992 - 32 - 5_130_633_216)
        let header = large.withUnsafeBytes { PlaceFileReadahead.pack(fileSize: 8_958_256_992, trailer: $0) }
        #expect(header == [5_130_633_216..<5_130_633_216 + PlacePack.headerSize])
        // Not a pack's trailer, or one pointing outside the file: nothing.
        for bad in [
            [UInt8](repeating: 0, count: 32), trailer(start: 8192, length: 1 << 30), trailer(start: 100, length: 5000),
        ] {
            #expect(bad.withUnsafeBytes { PlaceFileReadahead.pack(fileSize: 1 << 20, trailer: $0) }.isEmpty)
        }
    }

    /// An import leaves its file out of the page cache; opening it asks for the head and the whole pack
    /// at once, not for the map layer between them, which opening and ranking never touch.
    @Test func openingAnEvictedSmallFileReadsItsHeadAndPackNotItsMapLayer() throws {
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
        try #require(
            before.filter { $0 }.count < before.count / 2,
            "the import leaves its file evicted (not on tmpfs, whose pages never leave)")
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let database = try PlaceDatabase.open(path: path)
        let pack = try #require(database.pack.bytes.baseAddress) - (try #require(database.file.bytes.baseAddress))
        try #require(database.pack.bytes.count <= PlaceFileReadahead.wholePackLimit, "the test's pack must be small")
        let packPages = (pack / page)..<before.count
        let headPages = 0..<(PlaceFileReadahead.headBytes / page)
        let after = try waitForPages(path) { pages in packPages.allSatisfy { pages[$0] } }
        #expect(
            packPages.allSatisfy { after[$0] },
            "the pack: \(packPages.filter { after[$0] }.count) of \(packPages.count)")
        #expect(headPages.allSatisfy { after[$0] }, "the head")
        #expect(!(headPages.upperBound..<packPages.lowerBound).isEmpty)
        let between = (headPages.upperBound..<packPages.lowerBound).filter { after[$0] }.count
        #expect(between < (packPages.lowerBound - headPages.upperBound) / 2, "\(between) pages of the SQLite part read")
        #expect(database.placeCount == places.count)
    }

    /// A large file (sparse here: its holes read as zero pages) gets its head, its trailer's page and its
    /// pack's header page, and nothing else.
    @Test func startingOnALargeFileReadsOnlyItsHeadTrailerAndPackHeader() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("large.db")
        let size = 64 << 20
        let packStart = 16 << 20
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        try #require(descriptor >= 0)
        try #require(ftruncate(descriptor, off_t(size)) == 0)
        let tail = trailer(start: packStart, length: size - PlacePack.trailerSize - packStart)
        try #require(pwrite(descriptor, tail, tail.count, off_t(size - tail.count)) == tail.count)
        try #require(fdatasync(descriptor) == 0)
        _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED)
        close(descriptor)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let expected = Set(
            Array(0..<(PlaceFileReadahead.headBytes / page)) + [size / page - 1]
                + Array((packStart / page)..<((packStart + PlacePack.headerSize) / page)))
        try #require(try cachedPages(path).filter { $0 }.isEmpty, "the file starts out of the page cache")

        PlaceFileReadahead.start(path: path)
        let pages = try waitForPages(path) { pages in expected.allSatisfy { pages[$0] } }
        let cached = Set(pages.indices.filter { pages[$0] })
        #expect(
            cached == expected,
            "cached pages \(cached.sorted()) (on tmpfs readahead does nothing: the test needs a disk)")
    }
}
