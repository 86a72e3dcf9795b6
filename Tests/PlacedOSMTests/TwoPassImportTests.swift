import Foundation
import PlacedCore
import PlacedTestSupport
import Testing

@testable import PlacedOSM

/// The disk-backed import (nodes to a file and ways made as they come, then the multipolygons' member
/// ways; addresses by tile on disk) makes the same places, map layer and figures as one read in memory.
@Suite(.enabled(if: Fixtures.osmium != nil, "skipped: osmium-tool is not installed"))
struct TwoPassImportTests {
    static func same(_ path: String, mapLayer: Bool) throws {
        let one = try OSM.extractPlaces(path: path, mapLayer: mapLayer, passes: .one)
        // A tiny limit: the addresses go through the most buckets and answer files there are.
        let two = try OSM.extractPlaces(path: path, mapLayer: mapLayer, passes: .automatic(memoryLimit: 1))
        #expect(one.statistics.passes == 1 && two.statistics.passes == 2)
        #expect(two.places == one.places, "same places, in the same order, with the same addresses")
        #expect(two.features == one.features)
        var figures = two.statistics
        figures.keptNodes = one.statistics.keptNodes
        figures.passes = 1
        #expect(figures == one.statistics)
        #expect(two.statistics.keptNodes == 0 && one.statistics.keptNodes > 0, "no node location is held in memory")
    }

    @Test(arguments: [true, false]) func helsinki(mapLayer: Bool) throws {
        try Self.same(Fixtures.helsinki, mapLayer: mapLayer)
    }

    /// A generated town: node places, named and unnamed streets, buildings with and without names and
    /// addresses, multipolygons whose outer rings are untagged ways (so the second pass must fetch them),
    /// some of them cut (a member way missing), and a way with a node the file lacks.
    @Test(arguments: [true, false]) func syntheticTown(mapLayer: Bool) throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var random = SplitMix64(seed: 5)
        var lines: [String] = []
        let columns = 60
        let nodes = 6000
        for id in 1...nodes {
            let lat = 60.1 + Double((id - 1) / columns) * 0.0002 + Double(random.next() % 40) * 1e-6
            let lon = 24.8 + Double((id - 1) % columns) * 0.0004 + Double(random.next() % 40) * 1e-6
            var tags = ""
            switch random.next() % 20 {
            case 0: tags = "name=Cafe%20%\(id),amenity=cafe"
            case 1: tags = "addr:street=Katu,addr:housenumber=\(id % 50)"
            case 2: tags = "name=Shop%20%\(id),shop=bakery,addr:street=Tie,addr:housenumber=3"
            default: break
            }
            lines.append(String(format: "n%d v1 T%@ x%.7f y%.7f", id, tags, lon, lat))
        }
        var wayID = 0
        func way(_ refs: [Int], _ tags: String) -> Int {
            wayID += 1
            lines.append("w\(wayID) v1 T\(tags) N\(refs.map { "n\($0)" }.joined(separator: ","))")
            return wayID
        }
        var rings: [Int] = []
        for _ in 0..<600 {
            let a = 1 + Int(random.next() % UInt64(nodes - columns - 2))
            let ring = [a, a + 1, a + 1 + columns, a + columns, a]
            switch random.next() % 6 {
            case 0: _ = way(ring, "building=yes,name=House")
            case 1: _ = way(ring, "building=yes,addr:street=Polku,addr:housenumber=\(a % 30)")
            case 2: _ = way(Array(a..<(a + 6)), "highway=residential,name=Street%20%\(a % 40)")
            case 3: _ = way(Array(a..<(a + 6)), "highway=service")
            default: rings.append(way(ring, ""))
            }
        }
        _ = way([1, 2, nodes + 5], "building=yes,name=Cut")  // a node the file lacks
        for (i, ring) in rings.enumerated() {
            let members = i % 7 == 0 ? "Mw\(ring)@outer,w999999@outer" : "Mw\(ring)@outer"
            let tags =
                i % 2 == 0 ? "type=multipolygon,leisure=park,name=Park%20%\(i)" : "type=multipolygon,landuse=grass"
            lines.append("r\(i + 1) v1 T\(tags) \(members)")
        }
        let path = try Fixtures.pbf(fromOPL: lines.joined(separator: "\n") + "\n", in: directory)
        try Self.same(path, mapLayer: mapLayer)
    }

    /// The disk-backed import needs nodes in id order before the ways: a file that is not is a named error.
    @Test func anUnsortedFileIsNamed() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let opl = """
            n2 v1 T x24.9 y60.1
            n1 v1 T x24.9001 y60.1
            w1 v1 Tbuilding=yes,name=House Nn1,n2,n1
            """
        let path = try Fixtures.pbf(fromOPL: opl + "\n", in: directory)
        #expect(throws: OSMError.unsorted(path: path, detail: "node 1 comes after node 2")) {
            try OSM.extractPlaces(path: path, passes: .two)
        }
        // One read in memory sorts what it holds.
        #expect(try OSM.extractPlaces(path: path, passes: .one).places.map(\.name) == ["House"])
    }

    /// A file with the negative ids an editor gives new objects, in the order `osmium sort` writes them
    /// (negative first, by absolute value): both ways read it, to the same places.
    @Test func negativeIDsAsOsmiumSortsThem() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let opl = """
            n-1 v0 Tamenity=cafe,name=New%20%Cafe x24.94 y60.17
            n-2 v0 T x24.941 y60.171
            n-3 v0 T x24.942 y60.171
            n-4 v0 T x24.942 y60.172
            n5 v1 Tshop=bakery,name=Bakery x24.9405 y60.1705
            n6 v1 T x24.9406 y60.1704
            w-10 v0 Tbuilding=yes,name=New%20%House Nn-2,n-3,n-4,n-2
            w3 v1 Thighway=residential,name=Katu Nn6,n5,n-1
            """
        let path = try Fixtures.pbf(fromOPL: opl + "\n", in: directory)
        try Self.same(path, mapLayer: true)
        let places = try OSM.extractPlaces(path: path, passes: .two).places
        #expect(Set(places.map(\.name)) == ["New Cafe", "Bakery", "New House"])
        #expect(places.first { $0.name == "New House" }?.id == "osm:way/-10")
    }

    @Test func theLimitChoosesThePasses() {
        #expect(!ImportPasses.automatic(memoryLimit: 1 << 30).readsTwice(fileBytes: 1 << 20))
        #expect(ImportPasses.automatic(memoryLimit: 1 << 20).readsTwice(fileBytes: 1 << 20))
        #expect(ImportPasses.two.readsTwice(fileBytes: 1) && !ImportPasses.one.readsTwice(fileBytes: .max))
    }
}
