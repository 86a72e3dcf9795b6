import Foundation
import PlacedCore
import Testing

@testable import PlacedOSM

/// The place rules (docs/DESIGN.md, "Place data") on small files written by osmium (an independent PBF
/// encoder), in each encoding a reader meets: zlib blobs with DenseNodes, raw blobs, and plain Nodes.
@Suite(.enabled(if: Fixtures.osmium != nil, "skipped: osmium-tool is not installed"))
struct PlaceRulesTests {
    static let opl = """
        n1 v1 x24.9400000 y60.1700000 Tname=Café%20%Ekberg,amenity=cafe,addr:street=Bulevardi,addr:housenumber=9,addr:postcode=00120,addr:city=Helsinki
        n2 v1 x24.9401000 y60.1700000 Tname=Bench,amenity=bench
        n3 v1 x24.9402000 y60.1700000 Tname=View,amenity=bench,tourism=viewpoint
        n4 v1 x24.9403000 y60.1700000 Tname=Central,railway=station
        n5 v1 x24.9404000 y60.1700000 Tname=Platform%20%3,railway=platform
        n6 v1 x24.9405000 y60.1700000 Tname=Stop,highway=bus_stop,addr:street=Mannerheimintie
        n7 v1 x24.9406000 y60.1700000 Tname=Crossing,highway=crossing
        n8 v1 x24.9407000 y60.1700000 Tamenity=cafe
        n9 v1 x24.9408000 y60.1700000 Tname=,shop=kiosk
        n10 v1 x24.9409000 y60.1700000 Tname=Hydrant,emergency=fire_hydrant
        n11 v1 x24.9410000 y60.1700000 Tname=Ambulance,emergency=ambulance_station,addr:postcode=00100,addr:city=Helsinki
        n12 v1 x24.9411000 y60.1700000 Tname=House,building=yes
        n13 v1 x24.9412000 y60.1700000 Tname=Both,shop=bakery,amenity=cafe
        n14 v1 x24.9413000 y60.1700000 Tname=Terminal%20%2,aeroway=terminal
        n15 v1 x24.9414000 y60.1700000 Tname=Gate,aeroway=gate
        n20 v1 x24.9500000 y60.1600000 T
        n21 v1 x24.9510000 y60.1600000 T
        n22 v1 x24.9510000 y60.1610000 T
        n23 v1 x24.9500000 y60.1610000 T
        n24 v1 x24.9520000 y60.1620000 T
        w100 v1 Tname=Block,building=yes Nn20,n21,n22,n23,n20
        w101 v1 Tname=Not%20%a%20%building,building=no Nn20,n21,n22,n23,n20
        w102 v1 Tname=Mall,building=retail,shop=mall Nn20,n21,n22,n23,n20
        w103 v1 Tname=Track,leisure=track Nn20,n21,n24
        w104 v1 Tname=Cut,shop=mall Nn20,n21,n99,n20
        w105 v1 Tbuilding=yes Nn20,n21,n22,n20
        w106 v1 Tname=Street,highway=residential Nn20,n21
        """

    static let encodings: [[String]] = [[], ["pbf_compression=none"], ["pbf_dense_nodes=false"]]

    @Test(arguments: encodings)
    func selectsPlaces(options: [String]) throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Fixtures.pbf(fromOPL: Self.opl, in: directory, options: options)
        let extract = try OSM.extractPlaces(path: file)
        let places = Dictionary(uniqueKeysWithValues: extract.places.map { ($0.id, $0) })

        #expect(
            Set(places.keys) == [
                "osm:node/1", "osm:node/3", "osm:node/4", "osm:node/6", "osm:node/11", "osm:node/13",
                "osm:node/14",
                "osm:way/100", "osm:way/102", "osm:way/103",
            ])
        #expect(places["osm:node/1"]?.kind == "amenity=cafe")
        #expect(places["osm:node/1"]?.name == "Café Ekberg")
        #expect(places["osm:node/1"]?.address == "Bulevardi 9, 00120 Helsinki")
        #expect(places["osm:node/1"]?.coordinate == Coordinate(latitude: 60.17, longitude: 24.94))
        #expect(
            places["osm:node/3"]?.kind == "tourism=viewpoint",
            "an excluded value lets the next main key apply")
        #expect(places["osm:node/4"]?.kind == "railway=station")
        #expect(places["osm:node/6"]?.address == "Mannerheimintie")
        #expect(places["osm:node/11"]?.address == "00100 Helsinki")
        #expect(places["osm:node/13"]?.kind == "amenity=cafe", "main keys in docs/DESIGN.md order")
        #expect(places["osm:node/14"]?.kind == "aeroway=terminal")
        #expect(places["osm:node/1"]?.addressSource == .own)
        #expect(
            places["osm:node/3"]?.address == "Bulevardi 9, 00120 Helsinki"
                && places["osm:node/3"]?.addressSource == .nearby,
            "no address of its own: the café's, 11 m away")

        let block = try #require(places["osm:way/100"])
        #expect(block.kind == "building=yes")
        #expect(
            block.bounds
                == BoundingBox(
                    minLatitude: 60.16, minLongitude: 24.95, maxLatitude: 60.161, maxLongitude: 24.951))
        #expect(block.bounds?.contains(block.coordinate) == true)
        #expect(block.outline?.count == 5)
        // GeographicLib 2.1, Geodesic.WGS84 polygon area of this square: 6,186.82 m².
        #expect(abs(block.area - 6_186.82) < 3)
        #expect(places["osm:way/102"]?.kind == "shop=mall", "a main key wins over building")

        let track = try #require(places["osm:way/103"])
        #expect(
            track.coordinate == Coordinate(latitude: 60.16, longitude: 24.951),
            "an open way's middle vertex")
        #expect(track.area == 0 && track.outline == nil)
        #expect(
            track.bounds
                == BoundingBox(
                    minLatitude: 60.16, minLongitude: 24.95, maxLatitude: 60.162, maxLongitude: 24.952))

        #expect(extract.statistics.incompleteWays == 1, "w104 references a node the file lacks")
        #expect(
            extract.statistics.nodes == 20 && extract.statistics.ways == 7
                && extract.statistics.relations == 0)
    }

    /// A file need not be sorted: ways before their nodes, nodes in falling id order.
    @Test func unsortedFile() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Fixtures.pbf(
            fromOPL: """
                w7 v1 Tname=Kiosk,shop=kiosk Nn3,n2,n1,n3
                n3 v1 x24.0000000 y60.0010000 T
                n2 v1 x24.0010000 y60.0000000 T
                n1 v1 x24.0000000 y60.0000000 Tname=Shop,shop=books
                r1 v1 Ttype=multipolygon Mw7@outer
                """, in: directory)
        let extract = try OSM.extractPlaces(path: file)
        #expect(extract.places.map(\.id).sorted() == ["osm:node/1", "osm:way/7"])
        let kiosk = try #require(extract.places.first { $0.id == "osm:way/7" })
        #expect(kiosk.area > 0)
        #expect(
            kiosk.bounds
                == BoundingBox(minLatitude: 60, minLongitude: 24, maxLatitude: 60.001, maxLongitude: 24.001)
        )
        #expect(extract.statistics.relations == 1)
    }

    @Test func roleTableMatchesTagSlots() {
        #expect(PlaceRules.roleCount <= ElementTags().values.count)
        #expect(PlaceRules.roleCount <= 32, "roles are bits of a UInt32")
        #expect(PlaceRules.mainKeys.count == 14)
    }
}
