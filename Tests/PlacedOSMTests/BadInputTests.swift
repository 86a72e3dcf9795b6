import Foundation
import PlacedCore
import PlacedTestSupport
import Testing

@testable import PlacedOSM

/// Every kind of bad input gives its named error (with the offending blob's offset), never a crash.
@Suite struct BadInputTests {
    // MARK: Files that are not PBF at all

    @Test func missingFile() {
        #expect(throws: OSMError.fileNotFound(path: "/nonexistent/x.osm.pbf")) {
            try OSM.readPlaces(path: "/nonexistent/x.osm.pbf")
        }
    }

    @Test func directory() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(throws: OSMError.unreadable(path: directory.path, reason: "not a regular file")) {
            try OSM.readPlaces(path: directory.path)
        }
    }

    @Test(arguments: [
        Array("<?xml version='1.0' encoding='UTF-8'?>\n<osm version=\"0.6\">\n</osm>\n".utf8),
        [],
        [0, 0],
        Array(repeating: 0xFF, count: 100),
        [0, 0, 0, 4, 0x0A, 0x02, 0x41, 0x42] + Array(repeating: 0, count: 20),  // a BlobHeader, but not OSMHeader
    ])
    func notPBF(bytes: [UInt8]) throws {
        let (file, cleanup) = try write(bytes)
        defer { cleanup() }
        #expect(throws: OSMError.notPBF(path: file)) { try OSM.readPlaces(path: file) }
    }

    // MARK: Crafted files

    @Test func craftedFileReads() throws {
        let (file, cleanup) = try write(
            PBF.header() + PBF.cafeBlock(compression: .zlib) + PBF.cafeBlock(compression: .raw))
        defer { cleanup() }
        let places = try OSM.readPlaces(path: file)
        #expect(places.map(\.kind) == ["amenity=cafe", "amenity=cafe"])
        #expect(places.first?.coordinate == Coordinate(latitude: 60.17, longitude: 24.94))
    }

    @Test func unsupportedFeature() throws {
        let (file, cleanup) = try write(
            PBF.header(features: ["OsmSchema-V0.6", "HistoricalInformation"]))
        defer { cleanup() }
        #expect(throws: OSMError.unsupportedFeature(path: file, feature: "HistoricalInformation")) {
            try OSM.readPlaces(path: file)
        }
    }

    @Test(arguments: [(4, "lzma"), (5, "bzip2"), (6, "lz4"), (7, "zstd")])
    func unsupportedCompression(field: Int, name: String) throws {
        let header = PBF.header()
        let (file, cleanup) = try write(header + PBF.cafeBlock(compression: .other(field: field)))
        defer { cleanup() }
        #expect(
            throws: OSMError.unsupportedCompression(path: file, offset: header.count, compression: name)
        ) {
            try OSM.readPlaces(path: file)
        }
    }

    @Test func oversizedBlobHeader() throws {
        let header = PBF.header()
        var block = PBF.cafeBlock(compression: .raw)
        block.replaceSubrange(0..<4, with: PBF.bigEndian(70_000))
        let (file, cleanup) = try write(header + block)
        defer { cleanup() }
        #expect(
            throws: OSMError.oversizedBlob(path: file, offset: header.count, size: 70_000, limit: 65_536)
        ) {
            try OSM.readPlaces(path: file)
        }
    }

    @Test func oversizedBlob() throws {
        // Only the BlobHeader: the size is refused before anything is read or allocated.
        let header = PBF.header()
        let blobHeader = PBF.field(1, Array("OSMData".utf8)) + PBF.field(3, varint: 40 << 20)
        let (file, cleanup) = try write(header + PBF.bigEndian(blobHeader.count) + blobHeader)
        defer { cleanup() }
        #expect(
            throws: OSMError.oversizedBlob(
                path: file, offset: header.count, size: 40 << 20, limit: 32 << 20)
        ) {
            try OSM.readPlaces(path: file)
        }
    }

    @Test func oversizedInflatedSize() throws {
        let header = PBF.header()
        let blob = PBF.field(2, varint: 33 << 20) + PBF.field(3, [0x78, 0x9C, 0x03, 0x00])
        let (file, cleanup) = try write(header + PBF.blob(type: "OSMData", blob))
        defer { cleanup() }
        #expect(
            throws: OSMError.oversizedBlob(
                path: file, offset: header.count, size: 33 << 20, limit: 32 << 20)
        ) {
            try OSM.readPlaces(path: file)
        }
    }

    @Test func badStringIndex() throws {
        let header = PBF.header()
        let (file, cleanup) = try write(header + PBF.cafeBlock(compression: .raw, nameIndex: 99))
        defer { cleanup() }
        #expect(
            throws: OSMError.corruptBlob(
                path: file, offset: header.count, reason: "DenseNodes: string index out of range")
        ) {
            try OSM.readPlaces(path: file)
        }
    }

    // MARK: The Helsinki extract, damaged

    @Test func truncatedInsideABlob() throws {
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: Fixtures.helsinki)))
        let blobs = PBF.blobOffsets(bytes)
        #expect(blobs.count == 5)
        let cut = bytes.count / 2
        let blob = try #require(blobs.last { $0 < cut })
        let (file, cleanup) = try write(Array(bytes[..<cut]))
        defer { cleanup() }
        #expect(throws: OSMError.truncated(path: file, offset: blob)) { try OSM.readPlaces(path: file) }

        // Cut inside the 4-byte length of the last blob.
        let (short, cleanupShort) = try write(Array(bytes[..<(blobs.last! + 2)]))
        defer { cleanupShort() }
        #expect(throws: OSMError.truncated(path: short, offset: blobs.last!)) {
            try OSM.readPlaces(path: short)
        }
    }

    @Test func corruptCompressedBytes() throws {
        var bytes = try Array(Data(contentsOf: URL(fileURLWithPath: Fixtures.helsinki)))
        let blobs = PBF.blobOffsets(bytes)
        let middle = (blobs[2] + blobs[3]) / 2
        for offset in middle..<(middle + 16) { bytes[offset] ^= 0x5A }
        let (file, cleanup) = try write(bytes)
        defer { cleanup() }
        #expect {
            try OSM.readPlaces(path: file)
        } throws: { error in
            guard case .corruptBlob(let path, let offset, let reason) = error as? OSMError else {
                return false
            }
            return path == file && offset == blobs[2] && reason.hasPrefix("zlib")
        }
    }

    /// Flipped bytes in uncompressed blobs reach the protobuf decoder itself: each gives places or a
    /// named error about the file's contents, never a crash or a hang.
    @Test(.enabled(if: Fixtures.osmium != nil, "skipped: needs osmium"))
    func flippedBytesInRawBlobs() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let raw = directory.appendingPathComponent("raw.osm.pbf").path
        try Fixtures.runOsmium([
            "cat", Fixtures.helsinki, "-o", raw, "-f", "pbf,pbf_compression=none", "--overwrite",
        ])
        let original = try Array(Data(contentsOf: URL(fileURLWithPath: raw)))
        var random = SplitMix64(seed: 7)
        var rejected = 0
        for trial in 0..<60 {
            var bytes = original
            for _ in 0...(trial % 4) {
                bytes[Int(random.next() % UInt64(bytes.count))] ^= UInt8(
                    truncatingIfNeeded: random.next() | 1)
            }
            let file = directory.appendingPathComponent("damaged.osm.pbf").path
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            do {
                _ = try OSM.readPlaces(path: file)
            } catch {
                switch error {
                case .fileNotFound, .unreadable: Issue.record("unexpected \(error)")
                default: rejected += 1
                }
            }
        }
        #expect(rejected > 5, "damage to the structure is caught")
    }

    // MARK: Helpers

    func write(_ bytes: [UInt8]) throws -> (path: String, cleanup: () -> Void) {
        let directory = try Fixtures.temporaryDirectory()
        let url = directory.appendingPathComponent("input.osm.pbf")
        try Data(bytes).write(to: url)
        return (url.path, { try? FileManager.default.removeItem(at: directory) })
    }
}

/// A minimal PBF writer for crafted files (independent of the reader under test).
enum PBF {
    enum Compression {
        case raw, zlib
        case other(field: Int)
    }

    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        return bytes + [UInt8(value)]
    }

    static func zigzag(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }

    static func field(_ number: Int, _ bytes: [UInt8]) -> [UInt8] {
        varint(UInt64(number << 3 | 2)) + varint(UInt64(bytes.count)) + bytes
    }

    static func field(_ number: Int, varint value: UInt64) -> [UInt8] {
        varint(UInt64(number << 3)) + varint(value)
    }

    static func bigEndian(_ value: Int) -> [UInt8] {
        withUnsafeBytes(of: UInt32(value).bigEndian, Array.init)
    }

    static func blob(type: String, _ blob: [UInt8]) -> [UInt8] {
        let header = field(1, Array(type.utf8)) + field(3, varint: UInt64(blob.count))
        return bigEndian(header.count) + header + blob
    }

    static func header(features: [String] = ["OsmSchema-V0.6", "DenseNodes"]) -> [UInt8] {
        blob(type: "OSMHeader", field(1, features.flatMap { field(4, Array($0.utf8)) }))
    }

    /// One DenseNodes block: node 1 at 60.17, 24.94 with name=X, amenity=cafe.
    static func cafeBlock(compression: Compression, nameIndex: UInt64 = 1) -> [UInt8] {
        let strings = field(
            1, ["", "name", "X", "amenity", "cafe"].flatMap { field(1, Array($0.utf8)) })
        let dense =
            field(1, varint(zigzag(1))) + field(8, varint(zigzag(601_700_000)))
            + field(9, varint(zigzag(249_400_000)))
            + field(10, [nameIndex, 2, 3, 4, 0].flatMap { varint($0) })
        let block = strings + field(2, field(2, dense))
        switch compression {
        case .raw: return blob(type: "OSMData", field(1, block))
        case .zlib:
            return blob(type: "OSMData", field(2, varint: UInt64(block.count)) + field(3, deflate(block)))
        case .other(let number):
            return blob(type: "OSMData", field(2, varint: UInt64(block.count)) + field(number, block))
        }
    }

    /// zlib with stored (uncompressed) deflate blocks: a valid stream without calling zlib.
    static func deflate(_ bytes: [UInt8]) -> [UInt8] {
        precondition(bytes.count < 65_536)
        let length = UInt16(bytes.count)
        var a: UInt32 = 1
        var b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        let adler = (b << 16) | a
        return [
            0x78, 0x01, 0x01, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF),
            UInt8(~length >> 8),
        ]
            + bytes + withUnsafeBytes(of: adler.bigEndian, Array.init)
    }

    /// The offset of each blob in a well-formed file.
    static func blobOffsets(_ bytes: [UInt8]) -> [Int] {
        var offsets: [Int] = []
        var offset = 0
        while offset + 4 <= bytes.count {
            offsets.append(offset)
            let headerLength = bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
            var position = offset + 4
            let end = position + headerLength
            var dataSize = 0
            func readVarint() -> Int {
                var value = 0
                var shift = 0
                while true {
                    let byte = bytes[position]
                    position += 1
                    value |= Int(byte & 0x7F) << shift
                    if byte < 0x80 { return value }
                    shift += 7
                }
            }
            while position < end {
                let key = readVarint()
                if key & 7 == 2 {
                    position += readVarint()
                } else {
                    let value = readVarint()
                    if key >> 3 == 3 { dataSize = value }
                }
            }
            offset = end + dataSize
        }
        return offsets
    }
}
