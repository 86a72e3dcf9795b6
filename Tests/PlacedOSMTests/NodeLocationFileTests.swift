import Foundation
import PlacedCore
import PlacedTestSupport
import Testing

@testable import PlacedOSM

/// The disk-backed node locations: what is appended is found, what is not is nil, order is enforced.
struct NodeLocationFileTests {
    static func file(_ directory: URL, releaseBytes: Int = 64 << 20) throws -> NodeLocationFile {
        try NodeLocationFile(in: directory.path, releaseBytes: releaseBytes)
    }

    static func location(_ id: Int64) -> NodeLocation {
        NodeLocation(
            latitude: Int32(truncatingIfNeeded: id &* 7 % 900_000_000),
            longitude: Int32(truncatingIfNeeded: -id % 1_800_000_000))
    }

    /// Sparse ids over several pages and across 32-bit boundaries (a page's ids share their high bits),
    /// found exactly; ids between, before and after them are missing, not neighbours' locations.
    @Test func findsEveryNodeAndNoOther() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Self.file(directory, releaseBytes: 1)  // released every 256 pages (1 MB, the least)
        var random = SplitMix64(seed: 19)
        var ids: [Int64] = []
        var id: Int64 = 3
        for i in 0..<5_000 {
            id += 1 + Int64(random.next() % 5)
            if i == 2_000 { id = (1 << 32) - 2 }  // the high bits change inside what would be a page
            if i == 3_500 { id = 5 << 32 }
            ids.append(id)
            file.append(id: id, location: Self.location(id))
        }
        try file.finishWriting()
        #expect(file.count == ids.count)
        #expect(file.fileBytes == file.fileBytes / NodeLocationFile.pageBytes * NodeLocationFile.pageBytes)
        for id in ids { #expect(file.location(of: id) == Self.location(id)) }
        let known = Set(ids)
        let probes: [Int64] = [
            0, 1, 3, ids[0] - 1, (1 << 32) - 3, 1 << 32, (5 << 32) - 1, ids.last! + 1, Int64.max, -1,
        ]
        for probe in probes {
            #expect(known.contains(probe) || file.location(of: probe) == nil, "node \(probe) is not in the file")
        }
        for _ in 0..<2_000 {
            let probe = Int64(random.next() % UInt64(ids.last! + 10))
            #expect(
                known.contains(probe)
                    ? file.location(of: probe) == Self.location(probe) : file.location(of: probe) == nil)
        }
    }

    /// The mapping is released after `releaseBytes` of distinct pages: ways going back and forth between
    /// two pages release nothing (releasing on every 256 page changes made each page fault in again and
    /// again), a sweep over 1,000 pages at 256 a release releases three times, and lookups stay right.
    @Test func releasesByDistinctPages() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Self.file(directory, releaseBytes: 1)
        let perPage = Int64(NodeLocationFile.perPage)
        for id in 1...(1_000 * perPage) { file.append(id: id, location: Self.location(id)) }
        try file.finishWriting()
        for step in 0..<10_000 {
            let id = step % 2 == 0 ? 5 : perPage + 5
            #expect(file.location(of: id) == Self.location(id))
        }
        #expect(file.releases == 0)
        for page in 0..<Int64(1_000) {
            let id = page * perPage + 1 + page % perPage
            #expect(file.location(of: id) == Self.location(id))
        }
        #expect(file.releases == 3)
    }

    /// Appends `ids` in order (each at `location(_:)` unless `at` names another), maps the file and
    /// checks that every id is found with its location and that ids around each of them are not.
    static func written(
        _ ids: [Int64], in directory: URL, releaseBytes: Int = 64 << 20, at locations: [Int64: NodeLocation] = [:]
    ) throws -> NodeLocationFile {
        let file = try Self.file(directory, releaseBytes: releaseBytes)
        for id in ids { file.append(id: id, location: locations[id] ?? Self.location(id)) }
        try file.finishWriting()
        #expect(file.failure == nil && file.count == ids.count)
        #expect(file.fileBytes == file.pages * NodeLocationFile.pageBytes)
        let known = Set(ids)
        for id in ids {
            #expect(file.location(of: id) == locations[id] ?? Self.location(id), "node \(id)")
            for probe in [id &- 1, id &+ 1] where !known.contains(probe) {
                #expect(file.location(of: probe) == nil, "node \(probe) is not in the file")
            }
        }
        return file
    }

    /// Consecutive ids fill dense pages of 512, 8 bytes a node: 5,000 nodes in 10 pages (40 kB, where
    /// pages of 340 took 15); ids in the last page's slots after the last node, and past it, are missing.
    @Test func aRunOfConsecutiveIDsTakesEightBytesANode() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Self.written(Array(1...5_000), in: directory)
        #expect(file.pages == 10 && file.densePages == 10)
        #expect(file.fileBytes == 10 * 4096)
        for probe: Int64 in [0, -1, 5_001, 5_120, 5_121, 6_000, Int64.min, Int64.max] {
            #expect(file.location(of: probe) == nil, "node \(probe) is not in the file")
        }
    }

    /// A run that ends just before, at and just after a page's last slot: the page count is the run's
    /// length over 512 rounded up, the ids either side of each boundary are found.
    @Test func aRunEndsAtEveryPlaceAroundAPageBoundary() throws {
        for length in [1, 511, 512, 513, 1_023, 1_024, 1_025] {
            let directory = try Fixtures.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let start: Int64 = 1_000
            let file = try Self.written(Array(start..<start + Int64(length)), in: directory)
            let pages = (length + 511) / 512
            #expect(file.pages == pages && file.densePages == pages, "a run of \(length)")
            for boundary in stride(from: start + 512, to: start + Int64(length), by: 512) {
                #expect(file.location(of: boundary - 1) == Self.location(boundary - 1))
                #expect(file.location(of: boundary) == Self.location(boundary))
            }
            #expect(file.location(of: start - 1) == nil && file.location(of: start + Int64(length)) == nil)
        }
    }

    /// A gap wider than a page between two runs starts a new page at the next id: two dense pages, and
    /// the ids of the gap (past the first page's 512 slots, before the second's first id) are missing.
    @Test func aGapWiderThanAPageStartsANewPage() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Self.written(Array(1...512) + Array(2_000...2_511), in: directory)
        #expect(file.pages == 2 && file.densePages == 2)
        for probe: Int64 in [513, 700, 1_000, 1_999, 2_512] {
            #expect(file.location(of: probe) == nil, "node \(probe) is not in the file")
        }
    }

    /// A run of consecutive ids across a change of the high 32 bits stays in dense pages (a dense page's
    /// slot is the id's distance from its first id, whatever the high bits).
    @Test func aRunAcrossA32BitBoundaryStaysDense() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let start: Int64 = (1 << 32) - 300
        let file = try Self.written(Array(start..<start + 1_024), in: directory)
        #expect(file.pages == 2 && file.densePages == 2)
        #expect(file.location(of: 1 << 32) == Self.location(1 << 32))
    }

    /// Gaps inside a dense page are empty slots: every seventh id and a hole of 100 missing still fill
    /// dense pages (84 % of their slots), and the missing ids are not found.
    @Test func gapsInsideDensePagesAreMissing() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let ids = (1...20_000).filter { $0 % 7 != 0 && !(5_000..<5_100).contains($0) }.map(Int64.init)
        let file = try Self.written(ids, in: directory)
        #expect(file.densePages == file.pages)
        #expect(file.pages <= (20_000 + 511) / 512 + 1)
        for missing: Int64 in [7, 14, 5_000, 5_050, 5_099, 19_999, 20_001] {
            #expect(file.location(of: missing) == nil, "node \(missing) is not in the file")
        }
    }

    /// Ids three apart would fill a third of a dense page's slots: they go in sparse pages of 340.
    @Test func sparseIDsGoInSparsePages() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let ids = (0..<3_400).map { Int64(10 + 3 * $0) }
        let file = try Self.written(ids, in: directory)
        #expect(file.densePages == 0 && file.pages == 10)
        #expect(file.location(of: 11) == nil && file.location(of: 9) == nil)
    }

    /// Runs and scattered ids one after another, jumps of every size between them (within a page's span,
    /// a few pages, the high 32 bits, far up the range), negative ids first in `osmium sort`'s order: both
    /// kinds of page are written, every node is found, and random ids near and between them are found
    /// exactly when appended.
    @Test func runsGapsAndScatteredIDsMixed() throws {
        var random = SplitMix64(seed: 7)
        for round in 0..<6 {
            let directory = try Fixtures.temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            var ids: [Int64] = []
            var id: Int64 = -5_000 - Int64(random.next() % 1_000)
            while ids.count < 30_000 {
                switch random.next() % 6 {
                case 0, 1:  // a run
                    for _ in 0..<(1 + random.next() % 1_500) {
                        id += 1
                        ids.append(id)
                    }
                case 2:  // scattered
                    for _ in 0..<(1 + random.next() % 800) {
                        id += 1 + Int64(random.next() % 9)
                        ids.append(id)
                    }
                case 3: id += 1 + Int64(random.next() % 600)  // a gap inside or just past a page's span
                case 4: id += Int64(random.next() % 5_000)
                default: id += round % 2 == 0 ? Int64(random.next() % (1 << 33)) : 1 << 32
                }
            }
            // osmium writes negative ids by absolute value, before the others: the generated ones mirrored.
            ids = ids.filter { $0 < 0 }.reversed() + ids.filter { $0 >= 0 }
            let file = try Self.written(ids, in: directory, releaseBytes: 1)
            #expect(file.densePages > 0 && file.densePages < file.pages, "round \(round)")
            let known = Set(ids)
            for _ in 0..<20_000 {
                let near = ids[Int(random.next() % UInt64(ids.count))] + Int64(random.next() % 1_200) - 600
                #expect(known.contains(near) == (file.location(of: near) != nil), "node \(near)")
            }
        }
    }

    /// A node whose latitude is the dense pages' mark of a missing slot (no decoded node has one) is not
    /// lost: the page that would hold it is written sparse, and it is found with its location.
    @Test func aNodeAtTheMissingMarkIsKept() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let odd = NodeLocation(latitude: NodeLocationFile.absent, longitude: 5)
        let file = try Self.written(Array(1...2_000), in: directory, at: [300: odd])
        #expect(file.location(of: 300) == odd)
        #expect(file.densePages < file.pages)
    }

    /// The mapping's resident size (/proc/self/smaps), kB.
    static func residentKB(of address: UnsafeRawPointer) throws -> Int? {
        let start = String(UInt(bitPattern: address), radix: 16)
        // Read to the end: `String(contentsOfFile:)` stops after the first read of a /proc file.
        let bytes = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/smaps")).readToEnd() ?? Data()
        let smaps = String(decoding: bytes, as: UTF8.self)
        var inMapping = false
        for line in smaps.split(separator: "\n") {
            if let dash = line.firstIndex(of: "-"), line[..<dash].allSatisfy(\.isHexDigit) {
                inMapping = line[..<dash].drop { $0 == "0" } == start
            } else if inMapping, line.hasPrefix("Rss:") {
                return Int(line.split(separator: " ")[1])
            }
        }
        return nil
    }

    /// Released pages leave the process: after lookups on 200 dense pages the mapping is resident, after
    /// `releasePages` none of it is, and the lookup that makes 257 distinct pages since (past
    /// `releaseBytes`, 1 MB) releases by itself: less is resident after it than before. (The kernel maps
    /// more than the page a lookup reads: 16 pages around it, or the page cache's whole folio, 1 MB on
    /// this VM's 6.18 kernel; so only the drop is checked, not a size.)
    @Test func releasedPagesLeaveTheProcess() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Self.file(directory, releaseBytes: 1)
        let perPage = Int64(NodeLocationFile.perPage)
        for id in 0..<(1_000 * perPage) { file.append(id: id, location: Self.location(id)) }
        try file.finishWriting()
        let address = try #require(file.mappedAddress)
        #expect(try Self.residentKB(of: address) == 0)
        for page in 0..<Int64(200) {
            #expect(file.location(of: page * perPage + 7) == Self.location(page * perPage + 7))
        }
        #expect(try Self.residentKB(of: address) ?? 0 >= 200 * 4)
        #expect(file.releases == 0)
        file.releasePages()
        #expect(try Self.residentKB(of: address) == 0)
        for page in 200..<Int64(456) {
            #expect(file.location(of: page * perPage + 9) == Self.location(page * perPage + 9))
        }
        let before = try #require(try Self.residentKB(of: address))
        #expect(file.releases == 1 && before >= 256 * 4)
        #expect(file.location(of: 456 * perPage) == Self.location(456 * perPage))
        #expect(file.releases == 2)
        #expect(try Self.residentKB(of: address) ?? before < before)
        for page in 457..<Int64(500) {
            #expect(file.location(of: page * perPage + 9) == Self.location(page * perPage + 9))
        }
        #expect(file.releases == 2)
    }

    @Test func anEmptyFileFindsNothing() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Self.file(directory)
        try file.finishWriting()
        #expect(file.location(of: 1) == nil && file.count == 0)
    }

    /// `osmium sort` writes the negative ids editors give new nodes first, by absolute value (-1, -2, ...),
    /// then the others ascending: that order is accepted, a run of negative ids fills dense pages, and
    /// negative ids in ascending order are named as out of order.
    @Test func negativeIDsInOsmiumSortsOrder() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let ids: [Int64] = Array((1...700).map { -$0 }) + [-703, 0, 5, 6, 1 << 33]
        let file = try Self.written(ids, in: directory)
        #expect(file.densePages == file.pages && file.pages == 4, "-1 ... -512, -513 ... -703, 0 ... 6, 2^33")
        for absent: Int64 in [-701, -702, -704, 1, 4, 7, -5, -(1 << 33), .min, .max] where !ids.contains(absent) {
            #expect(file.location(of: absent) == nil, "node \(absent)")
        }
        let ascending = try Self.file(directory)
        ascending.append(id: -2, location: Self.location(-2))
        ascending.append(id: -1, location: Self.location(-1))
        #expect(
            ascending.failure
                == .unsorted(path: "\(directory.path)/(node locations)", detail: "node -1 comes after node -2"))
        let positiveFirst = try Self.file(directory)
        positiveFirst.append(id: 1, location: Self.location(1))
        positiveFirst.append(id: -1, location: Self.location(-1))
        #expect(
            positiveFirst.failure
                == .unsorted(path: "\(directory.path)/(node locations)", detail: "node -1 comes after node 1"))
        let smallest = try Self.file(directory)
        smallest.append(id: .min, location: Self.location(0))
        #expect(smallest.failure != nil, "Int64.min has no place in osmium's order")
    }

    @Test func idsOutOfOrderAreNamed() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Self.file(directory)
        file.append(id: 10, location: Self.location(10))
        file.append(id: 10, location: Self.location(10))
        #expect(
            file.failure == .unsorted(path: "\(directory.path)/(node locations)", detail: "node 10 comes after node 10")
        )
        #expect(throws: OSMError.self) { try file.finishWriting() }
    }

    @Test func aNodeAfterTheWaysIsNamed() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Self.file(directory)
        file.append(id: 1, location: Self.location(1))
        try file.finishWriting()
        file.append(id: 2, location: Self.location(2))
        #expect("\(file.failure!)".contains("node 2 comes after a way"))
    }

    @Test func aDirectoryThatIsNotThereIsNamed() {
        #expect(
            throws: OSMError.scratch(
                path: "/nonexistent-placed/(node locations)", operation: "create", reason: "No such file or directory")
        ) {
            try NodeLocationFile(in: "/nonexistent-placed")
        }
    }
}
