import Foundation
import PlacedCore
import Testing

@testable import PlacedOSM

/// Every place gets an address: its own, else its building's, else the nearest within 30 m, else
/// "near <street>" — on a small file osmium writes. North 1e-4° is 11.1 m here, east 1e-4° 5.5 m.
@Suite(.enabled(if: Fixtures.osmium != nil, "osmium-tool is needed to write the test files"))
struct AddressTests {
    /// An OPL node `id` at 60.17 + north·1e-4, 24.94 + east·1e-4.
    static func node(_ id: Int, _ north: Double, _ east: Double, _ tags: String = "") -> String {
        let latitude = String(format: "%.7f", 60.17 + north * 1e-4)
        let longitude = String(format: "%.7f", 24.94 + east * 1e-4)
        return "n\(id) v1 x\(longitude) y\(latitude) T\(tags)"
    }

    static var opl: String {
        [
            // Building A, 22 m square, with an address; a café inside it.
            node(1, 0, 0), node(2, 0, 4), node(3, 2, 4), node(4, 2, 0),
            "w1 v1 Tbuilding=yes,addr:street=Katu,addr:housenumber=1 Nn1,n2,n3,n4,n1",
            node(100, 1, 2, "name=Inside,amenity=cafe"),
            // Building B with a smaller building C inside it, both with addresses.
            node(5, -20, 0), node(6, -20, 20), node(7, -10, 20), node(8, -10, 0),
            "w2 v1 Tbuilding=yes,addr:street=Iso,addr:housenumber=2 Nn5,n6,n7,n8,n5",
            node(9, -18, 2), node(10, -18, 6), node(11, -16, 6), node(12, -16, 2),
            "w3 v1 Tbuilding=yes,addr:street=Pieni,addr:housenumber=3 Nn9,n10,n11,n12,n9",
            node(101, -17, 4, "name=Nested,shop=books"),
            // A multipolygon building with a courtyard: one place in the building, one in the yard.
            node(13, 10, 0), node(14, 10, 8), node(15, 14, 8), node(16, 14, 0),
            node(17, 11, 2), node(18, 11, 6), node(19, 13, 6), node(20, 13, 2),
            "w4 v1 T Nn13,n14,n15,n16,n13", "w5 v1 T Nn17,n18,n19,n20,n17",
            "r1 v1 Ttype=multipolygon,building=yes,addr:street=Piha,addr:housenumber=4 Mw4@outer,w5@inner",
            node(102, 10.5, 4, "name=Wing,office=company"),
            node(103, 12, 4, "name=Yard,leisure=playground"),
            // An address node; a shop 20 m from it; another 40 m from it, 71 m from a named street.
            node(200, 30, 0, "addr:street=Osoite,addr:housenumber=5"),
            node(201, 31.8, 0, "name=Near,shop=bakery"),
            node(202, 33.6, 0, "name=Farther,shop=florist"),
            node(21, 40, -10), node(22, 40, 10), "w10 v1 Thighway=residential,name=Tie Nn21,n22",
            // An unnamed street nearer than the named one lends nothing.
            node(23, 34, -10), node(24, 34, 10), "w11 v1 Thighway=service Nn23,n24",
            // A postcode alone is no address to lend; a place's own postcode is still its own.
            node(203, 36, 30, "addr:postcode=00100"),
            node(204, 36.5, 30, "name=Postcode,amenity=post_box,addr:postcode=00100,addr:city=Helsinki"),
            // Far from everything.
            node(205, 600, 0, "name=Alone,tourism=viewpoint"),
        ].joined(separator: "\n")
    }

    @Test(arguments: [true, false])
    func everyPlaceGetsTheAddressThatFits(mapLayer: Bool) throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try Fixtures.pbf(fromOPL: Self.opl, in: directory)
        let extract = try OSM.extractPlaces(path: file, mapLayer: mapLayer)
        let places = Dictionary(uniqueKeysWithValues: extract.places.map { ($0.id, $0) })
        func address(_ id: Int) -> (String?, AddressSource?) {
            (places["osm:node/\(id)"]?.address, places["osm:node/\(id)"]?.addressSource)
        }

        #expect(address(100) == ("Katu 1", .building))
        #expect(address(101) == ("Pieni 3", .building), "the smallest building around it")
        #expect(address(102) == ("Piha 4", .building), "inside the multipolygon's ring")
        #expect(address(103) == ("Piha 4", .nearby), "the courtyard is no part of the building, 11 m from it")
        #expect(address(201) == ("Osoite 5", .nearby))
        #expect(address(202) == ("near Tie", .street), "40 m from the address: past 30 m")
        #expect(address(204) == ("00100 Helsinki", .own))
        #expect(address(205) == (nil, AddressSource.none), "no street within 250 m")
        #expect(extract.features == (mapLayer ? extract.features : nil))
        #expect((extract.features != nil) == mapLayer, "--no-map derives the same addresses without the layer")
    }
}
