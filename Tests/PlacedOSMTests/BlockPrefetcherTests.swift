import Foundation
import Testing

@testable import PlacedOSM

/// The blocks read ahead on a second thread are the blocks the reader hands out one by one: the same
/// bytes at the same offsets, in file order, whatever the depth; or only the blocks asked for.
struct BlockPrefetcherTests {
    /// Every data block of the file by the plain reader: offset, end, bytes.
    static func plainBlocks(_ path: String) throws -> [(offset: Int, end: Int, bytes: [UInt8])] {
        let reader = try PBFReader(path: path)
        var blocks: [(offset: Int, end: Int, bytes: [UInt8])] = []
        while let (bytes, offset) = try reader.nextDataBlock() {
            blocks.append((offset, reader.bytesRead, Array(bytes)))
        }
        return blocks
    }

    @Test(arguments: [1, 2, 5]) func everyBlockInOrder(depth: Int) throws {
        let expected = try Self.plainBlocks(Fixtures.helsinki)
        #expect(expected.count > 3)
        let prefetcher = BlockPrefetcher(reader: try PBFReader(path: Fixtures.helsinki), depth: depth)
        var got: [(offset: Int, end: Int, bytes: [UInt8])] = []
        while let block = try prefetcher.next() { got.append((block.offset, block.end, Array(block.bytes))) }
        #expect(try prefetcher.next()?.offset == nil)  // and after the end, still none
        #expect(got.map(\.offset) == expected.map(\.offset))
        #expect(got.map(\.end) == expected.map(\.end))
        #expect(got.map(\.bytes) == expected.map(\.bytes))
    }

    @Test func onlyTheBlocksAskedFor() throws {
        let expected = try Self.plainBlocks(Fixtures.helsinki)
        let wanted = expected.enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
        let prefetcher = BlockPrefetcher(
            reader: try PBFReader(path: Fixtures.helsinki), offsets: wanted.map(\.offset), depth: 3)
        var got: [(offset: Int, bytes: [UInt8])] = []
        while let block = try prefetcher.next() { got.append((block.offset, Array(block.bytes))) }
        #expect(got.map(\.offset) == wanted.map(\.offset))
        #expect(got.map(\.bytes) == wanted.map(\.bytes))
    }

    /// A blob that does not inflate is the error of the block it is in, after the blocks before it.
    @Test func aCorruptBlockFailsInItsTurn() throws {
        let blocks = try Self.plainBlocks(Fixtures.helsinki)
        var file = try Array(Data(contentsOf: URL(fileURLWithPath: Fixtures.helsinki)))
        let broken = blocks[2]
        // Into the zlib stream, well past the blob's headers.
        for i in (broken.end - 64)..<(broken.end - 32) { file[i] ^= 0x5A }
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("broken.osm.pbf").path
        try Data(file).write(to: URL(fileURLWithPath: path))
        let prefetcher = BlockPrefetcher(reader: try PBFReader(path: path), depth: 4)
        #expect(try prefetcher.next()?.offset == blocks[0].offset)
        #expect(try prefetcher.next()?.offset == blocks[1].offset)
        #expect {
            _ = try prefetcher.next()
        } throws: { error in
            guard case .corruptBlob(_, let offset, _) = error as? OSMError else { return false }
            return offset == broken.offset
        }
    }
}
