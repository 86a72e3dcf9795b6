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

    @Test func anEmptyFileFindsNothing() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Self.file(directory)
        try file.finishWriting()
        #expect(file.location(of: 1) == nil && file.count == 0)
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
