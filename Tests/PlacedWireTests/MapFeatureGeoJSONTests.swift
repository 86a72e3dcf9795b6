import PlacedCore
import PlacedJSON
import Testing

@testable import PlacedWire

/// Map features on the wire: GeoJSON Features with the name in the reader's language.
@Suite struct MapFeatureGeoJSONTests {
    static let names = ["sv": "Järnvägstorget", "fi": "Rautatientori", "zh-hant": "火車站廣場", "pt-br": "Praça"]

    @Test func mapFeaturesRoundTripAsGeoJSON() throws {
        // Decimals of at most 6 places: what the wire's rounding keeps exactly.
        let ring = [(60.17, 24.94), (60.17, 24.941), (60.171, 24.941), (60.17, 24.94)].map {
            Coordinate(latitude: $0.0, longitude: $0.1)
        }
        let square = MapFeature(
            id: "osm:relation/1", kind: .square, featureClass: "pedestrian", name: "Rautatientori",
            localizedNames: Self.names, geometry: .polygons([[ring, ring.reversed()]]))
        let json = square.geoJSON(language: "sv")
        #expect(json["type"] == "Feature" && json["id"] == "osm:relation/1")
        #expect(json["properties"] == ["kind": "square", "class": "pedestrian", "name": "Järnvägstorget"])
        #expect(json["geometry"]?["type"] == "Polygon")
        let secondVertex = json["geometry"]?["coordinates"]?.array?[0].array?[1]
        #expect(secondVertex == [.number(24.941), .number(60.17)], "[lon, lat], rounded to 1e-6 degree")
        let back = try #require(MapFeature(geoJSON: try JSON(parsing: try json.serialized())))
        #expect(back.geometry == square.geometry && back.name == "Järnvägstorget" && back.kind == .square)

        let two = MapFeature(
            id: "osm:relation/2", kind: .green, featureClass: "park", geometry: .polygons([[ring], [ring]]))
        #expect(two.geoJSON()["geometry"]?["type"] == "MultiPolygon")
        #expect(two.geoJSON()["properties"]?["name"] == nil, "unnamed")
        #expect(MapFeature(geoJSON: two.geoJSON())?.geometry == two.geometry)
        let line = MapFeature(
            id: "osm:way/3", kind: .street, featureClass: "primary", geometry: .line(Array(ring.prefix(2))))
        #expect(line.geoJSON()["geometry"]?["type"] == "LineString")
        #expect(MapFeature(geoJSON: line.geoJSON()) == line)

        for broken: JSON in [
            ["type": "Feature", "id": "x", "properties": ["kind": "lava"], "geometry": line.geometry.geoJSON],
            [
                "type": "Feature", "id": "x", "properties": ["kind": "street"],
                "geometry": ["type": "Point", "coordinates": [24.9, 60.1]],
            ],
            [
                "type": "Feature", "id": "x", "properties": ["kind": "street"],
                "geometry": ["type": "LineString", "coordinates": [[24.9, 60.1]]],
            ],
            [
                "type": "Feature", "id": "x", "properties": ["kind": "street"],
                "geometry": ["type": "LineString", "coordinates": [[24.9, 99], [24.9, 60]]],
            ],
        ] {
            #expect(MapFeature(geoJSON: broken) == nil)
        }
    }
}
