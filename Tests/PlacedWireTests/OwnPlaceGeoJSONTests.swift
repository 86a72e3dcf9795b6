import PlacedCore
import PlacedJSON
import Testing

@testable import PlacedWire

/// Own places as GeoJSON: what `placectl own import` reads and `own export` writes.
@Suite struct OwnPlaceGeoJSONTests {
    static let collection = """
        {"type": "FeatureCollection", "features": [
          {"type": "Feature",
           "properties": {"id": "own:depot", "name": "North depot", "name:FI": "Pohjoinen varikko",
                          "kind": "depot", "address": "Satamatie 1", "weight": 2, "radius": 40},
           "geometry": {"type": "Point", "coordinates": [24.95, 60.17]}},
          {"type": "Feature", "properties": {"id": "own:yard", "name": "Yard"},
           "geometry": {"type": "Polygon", "coordinates": [
             [[24.94, 60.17], [24.941, 60.17], [24.941, 60.171], [24.94, 60.171], [24.94, 60.17]],
             [[24.9404, 60.1704], [24.9404, 60.1706], [24.9406, 60.1706], [24.9404, 60.1704]]]}},
          {"type": "Feature", "properties": {"id": "own:two", "name": "Two"},
           "geometry": {"type": "MultiPolygon", "coordinates": [
             [[[24.94, 60.17], [24.941, 60.17], [24.941, 60.171], [24.94, 60.17]]],
             [[[24.95, 60.17], [24.951, 60.17], [24.951, 60.171], [24.95, 60.17]]]]}}
        ]}
        """

    @Test func readsEveryShapeAndWritesItBack() throws {
        let places = try OwnPlace.readCollection(Array(Self.collection.utf8))
        #expect(places.map(\.id) == ["own:depot", "own:yard", "own:two"])
        let depot = places[0]
        #expect(depot.geometry == .circle(centre: Coordinate(latitude: 60.17, longitude: 24.95), radius: 40))
        #expect(depot.localizedNames == ["fi": "Pohjoinen varikko"])
        #expect(depot.kind == "depot" && depot.address == "Satamatie 1" && depot.weight == 2)
        #expect(places[1].kind == OwnPlace.defaultKind && places[1].weight == nil)
        guard case .polygons(let yard) = places[1].geometry, case .polygons(let two) = places[2].geometry else {
            Issue.record("not polygons")
            return
        }
        #expect(yard.count == 1 && yard[0].count == 2)
        #expect(two.count == 2)
        let written = try OwnPlace.collection(places).encoded()
        #expect(try OwnPlace.readCollection(written).sorted { $0.id < $1.id } == places.sorted { $0.id < $1.id })
    }

    @Test func detailKeysAreReadAsOSMsAndWrittenBackTheSame() throws {
        let text = """
            {"type": "Feature",
             "properties": {"id": "own:shop", "name": "Shop", "radius": 20, "opening_hours": "Mo-Fr 08:00-17:00",
                            "phone": ["+358 9 1", " +358 9 2"], "contact:phone": "+358 9 3", "website": "https://x.fi",
                            "wheelchair": "yes", "diet:vegan": "only", "description:fi": "Kauppa", "colour": "red",
                            "brand:wikidata": null},
             "geometry": {"type": "Point", "coordinates": [24.95, 60.17]}}
            """
        let place = try OwnPlace.readCollection(Array(text.utf8))[0]
        #expect(
            place.details.tags == [
                "opening_hours": "Mo-Fr 08:00-17:00", "phone": "+358 9 1;+358 9 2;+358 9 3",
                "website": "https://x.fi", "wheelchair": "yes", "diet:vegan": "only", "description:fi": "Kauppa",
            ])
        #expect(place.place().details == place.details, "a ranking's place carries them")
        let written = place.geoJSON
        #expect(written["properties"]?["phone"] == "+358 9 1;+358 9 2;+358 9 3")
        #expect(written["properties"]?["colour"] == nil, "what is no detail is kept by nothing")
        #expect(try OwnPlace(geoJSON: JSON(parsing: try written.encoded())) == place)
    }

    @Test func badDetailsAreNamedByTheirFeature() {
        let point = #"{"type": "Point", "coordinates": [24.95, 60.17]}"#
        #expect(
            error(Self.feature(#""id": "own:b", "name": "B", "radius": 3, "phone": 5"#, point))?.description
                == "feature 1 (own:b): invalid GeoJSON: phone is not a string")
        #expect(
            error(Self.feature(#""id": "own:b", "name": "B", "radius": 3, "wheelchair": ["yes"]"#, point))?.description
                == "feature 1 (own:b): invalid GeoJSON: wheelchair is not a string")
        let long = String(repeating: "x", count: 5000)
        #expect(
            error(Self.feature(#""id": "own:b", "name": "B", "radius": 3, "website": "\#(long)""#, point))
                == OwnPlaceError(feature: 1, id: "own:b", .detailTooLong(key: "website", bytes: 5000)))
        #expect(
            error(
                Self.feature(#""id": "own:b", "name": "B", "radius": 3, "opening_hours": "Mo-Xx 08:00-17:00""#, point))?
                .description.hasPrefix("feature 1 (own:b): opening_hours does not parse: ") == true)
    }

    func error(_ text: String) -> OwnPlaceError? {
        do {
            _ = try OwnPlace.readCollection(Array(text.utf8))
            return nil
        } catch {
            return error
        }
    }

    static func feature(_ properties: String, _ geometry: String) -> String {
        """
        {"type": "FeatureCollection", "features": [
          {"type": "Feature", "properties": {"id": "own:ok", "name": "OK", "radius": 5},
           "geometry": {"type": "Point", "coordinates": [24.95, 60.17]}},
          {"type": "Feature", "properties": {\(properties)}, "geometry": \(geometry)}]}
        """
    }

    @Test func badInputIsNamedByItsFeature() {
        let point = #"{"type": "Point", "coordinates": [24.95, 60.17]}"#
        #expect(
            error(Self.feature(#""id": "own:b", "name": "B""#, point))?.description
                == "feature 1 (own:b): invalid GeoJSON: a Point needs properties.radius (metres)")
        #expect(
            error(Self.feature(#""id": "own:b", "name": "B", "radius": 0.2"#, point))
                == OwnPlaceError(feature: 1, id: "own:b", .radiusOutOfRange(0.2)))
        #expect(
            error(Self.feature(#""id": "own:ok", "name": "B", "radius": 3"#, point))
                == OwnPlaceError(feature: 1, id: "own:ok", .duplicateID(firstFeature: 0)))
        #expect(
            error(Self.feature(#""id": "b", "name": "B", "radius": 3"#, point))
                == OwnPlaceError(feature: 1, id: "b", .badID("b")))
        #expect(
            error(Self.feature(#""id": "own:b", "name": "", "radius": 3"#, point))
                == OwnPlaceError(feature: 1, id: "own:b", .emptyName(language: nil)))
        let open =
            #"{"type": "Polygon", "coordinates": [[[24.94, 60.17], [24.941, 60.17], [24.941, 60.171], [24.94, 60.171]]]}"#
        #expect(
            error(Self.feature(#""id": "own:b", "name": "B""#, open))
                == OwnPlaceError(feature: 1, id: "own:b", .ringNotClosed(polygon: 0, ring: 0)))
        let bowTie =
            #"{"type": "Polygon", "coordinates": [[[24.94, 60.17], [24.941, 60.171], [24.941, 60.17], [24.94, 60.171], [24.94, 60.17]]]}"#
        #expect(
            error(Self.feature(#""id": "own:b", "name": "B""#, bowTie))
                == OwnPlaceError(feature: 1, id: "own:b", .ringCrossesItself(polygon: 0, ring: 0)))
        let line = #"{"type": "LineString", "coordinates": [[24.94, 60.17], [24.941, 60.17]]}"#
        #expect(error(Self.feature(#""id": "own:b", "name": "B""#, line))?.feature == 1)
        // Bytes that are not UTF-8 in a name: the document is refused, with the offset.
        var bytes = Array(Self.feature(#""id": "own:b", "name": "BXX", "radius": 3"#, point).utf8)
        let x = bytes.firstIndex(of: UInt8(ascii: "X"))!
        bytes[x] = 0xC3
        bytes[x + 1] = 0x28
        do {
            _ = try OwnPlace.readCollection(bytes)
            Issue.record("invalid UTF-8 was read")
        } catch {
            #expect(error.description.contains("invalid UTF-8"))
        }
        #expect(error(#"{"type": "Feature"}"#)?.reason == .invalidGeoJSON("no properties object"))
        #expect(error("[1, 2]")?.reason == .invalidGeoJSON("not a FeatureCollection"))
    }
}
