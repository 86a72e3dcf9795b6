import PlacedCore
import Testing

/// Names in the reader's language (`name:<language>`, falling back to `name`) and the GeoJSON form
/// of map features.
@Suite struct LocalizedNameTests {
    static let names = ["sv": "Järnvägstorget", "fi": "Rautatientori", "zh-hant": "火車站廣場", "pt-br": "Praça"]

    @Test(arguments: [
        ("sv", "Järnvägstorget"), ("sv-FI", "Järnvägstorget"), ("sv_FI.UTF-8", "Järnvägstorget"),
        ("SV_fi@euro", "Järnvägstorget"), ("fi_FI", "Rautatientori"), ("zh-Hant-TW", "火車站廣場"),
        ("zh", "Rautatientori (name)"), ("pt_BR", "Praça"), ("pt", "Rautatientori (name)"),
        ("en", "Rautatientori (name)"), ("C", "Rautatientori (name)"), ("POSIX", "Rautatientori (name)"),
        ("", "Rautatientori (name)"), ("C.UTF-8", "Rautatientori (name)"),
    ])
    func choosesTheMostSpecificFittingName(language: String, expected: String) {
        #expect(LocalizedName.choose("Rautatientori (name)", Self.names, language: language) == expected)
    }

    @Test func noLanguageOrNoNamesIsTheNameTag() {
        #expect(LocalizedName.choose("Kauppatori", Self.names, language: nil) == "Kauppatori")
        #expect(LocalizedName.choose("Kauppatori", [:], language: "sv") == "Kauppatori")
        #expect(LocalizedName.choose("Kauppatori", ["sv": ""], language: "sv") == "Kauppatori", "an empty tag")
    }

    @Test func candidatesAndKeys() {
        #expect(LocalizedName.candidates("sv_FI.UTF-8") == ["sv-fi", "sv"])
        #expect(LocalizedName.candidates("zh-Hant-TW") == ["zh-hant-tw", "zh-hant", "zh"])
        #expect(LocalizedName.candidates("C").isEmpty)
        #expect(LocalizedName.languageKey(ofSuffix: "sv") == "sv")
        #expect(LocalizedName.languageKey(ofSuffix: "zh-Hant") == "zh-hant")
        #expect(LocalizedName.languageKey(ofSuffix: "be-tarask") == "be-tarask")
        for notALanguage in ["left", "etymology:wikidata", "prefix", "sv:", "s", "sv-", "1a"] {
            #expect(LocalizedName.languageKey(ofSuffix: notALanguage) == nil, "\(notALanguage)")
        }
        let place = Place(
            id: "osm:node/1", name: "Rautatientori", kind: "amenity=marketplace",
            coordinate: .init(latitude: 60, longitude: 24),
            localizedNames: Self.names)
        #expect(place.name(forLanguage: "sv_SE.UTF-8") == "Järnvägstorget")
        #expect(place.addressSource == .none)
    }

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
