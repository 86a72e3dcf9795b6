import PlacedCore
import PlacedJSON

/// The wire and file form of own places: GeoJSON (RFC 7946) Features in a FeatureCollection, what
/// `placectl own import` reads, `own export` writes and varlink `PutPlaces` carries.
///
///     {"type": "Feature",
///      "properties": {"id": "own:depot-1", "name": "North depot", "name:fi": "Pohjoinen varikko",
///                     "kind": "depot", "address": "Satamatie 1", "weight": 2, "radius": 40,
///                     "opening_hours": "Mo-Fr 06:00-22:00", "phone": "+358 9 123;+358 9 456"},
///      "geometry": {"type": "Point", "coordinates": [24.95, 60.17]}}
///
/// A Point needs `radius` (metres, 1 to 10,000); a Polygon or MultiPolygon has rings closed, each
/// polygon its outer ring first. The detail keys are OpenStreetMap's (`PlaceDetails`: `opening_hours`,
/// `phone`, `website`, `wheelchair`, `diet:*`…), strings in OSM's form, a list's items also as an array
/// of strings; written back as OSM's normalized strings. Other properties are kept by nothing and
/// refused by nothing.
extension OwnPlace {
    /// The Feature object. Coordinates are written exactly, so a place read back is the same place.
    public var geoJSON: JSON {
        var properties: [String: JSON] = ["id": .string(id), "name": .string(name), "kind": .string(kind)]
        if let address { properties["address"] = .string(address) }
        if let weight { properties["weight"] = .number(weight) }
        for (language, variant) in localizedNames { properties["name:\(language)"] = .string(variant) }
        for (key, value) in details.tags { properties[key] = .string(value) }
        func position(_ c: Coordinate) -> JSON { [.number(c.longitude), .number(c.latitude)] }
        func polygon(_ rings: [[Coordinate]]) -> JSON { .array(rings.map { .array($0.map(position)) }) }
        let geometry: JSON
        switch self.geometry {
        case let .circle(centre, radius):
            properties["radius"] = .number(radius)
            geometry = ["type": "Point", "coordinates": position(centre)]
        case .polygons(let polygons) where polygons.count == 1:
            geometry = ["type": "Polygon", "coordinates": polygon(polygons[0])]
        case .polygons(let polygons):
            geometry = ["type": "MultiPolygon", "coordinates": .array(polygons.map(polygon))]
        }
        return ["type": "Feature", "properties": .object(properties), "geometry": geometry]
    }

    /// Reads one Feature (number `feature` of its batch, for errors), without the checks of
    /// `problem()` beyond what reading needs.
    public init(geoJSON: JSON, feature: Int? = nil) throws(OwnPlaceError) {
        func fail(_ what: String, id: String? = nil) -> OwnPlaceError {
            OwnPlaceError(feature: feature, id: id, .invalidGeoJSON(what))
        }
        guard geoJSON["type"]?.string == "Feature" else { throw fail("not a Feature") }
        guard let properties = geoJSON["properties"]?.object else { throw fail("no properties object") }
        guard let id = properties["id"]?.string ?? geoJSON["id"]?.string else { throw fail("no properties.id") }
        guard let name = properties["name"]?.string else { throw fail("no name (a string)", id: id) }
        var localizedNames: [String: String] = [:]
        for (key, value) in properties where key.hasPrefix("name:") {
            guard let variant = value.string else { throw fail("\(key) is not a string", id: id) }
            localizedNames[String(key.dropFirst(5)).lowercased()] = variant
        }
        func optionalString(_ key: String) throws(OwnPlaceError) -> String? {
            guard let value = properties[key], !value.isNull else { return nil }
            guard let string = value.string else { throw fail("\(key) is not a string", id: id) }
            return string
        }
        func optionalNumber(_ key: String) throws(OwnPlaceError) -> Double? {
            guard let value = properties[key], !value.isNull else { return nil }
            guard let number = value.double else { throw fail("\(key) is not a number", id: id) }
            return number
        }
        let kind = try optionalString("kind") ?? OwnPlace.defaultKind
        let address = try optionalString("address")
        let weight = try optionalNumber("weight")
        let radius = try optionalNumber("radius")
        var detailTags: [(key: String, value: String)] = []
        for (key, value) in properties where PlaceDetails.mayKeep(key) && !value.isNull {
            let text: String
            if let string = value.string {
                text = string
            } else if let items = value.array, PlaceDetails.listKeys.contains(key),
                case let strings = items.compactMap(\.string), strings.count == items.count
            {
                text = strings.joined(separator: ";")
            } else {
                throw fail("\(key) is not a string", id: id)
            }
            // Dropped whole at an OSM import; here the place's creator hears of it.
            guard text.utf8.count <= PlaceDetails.maximumValueLength else {
                throw OwnPlaceError(feature: feature, id: id, .detailTooLong(key: key, bytes: text.utf8.count))
            }
            detailTags.append((key, text))
        }

        guard let geometry = geoJSON["geometry"], let type = geometry["type"]?.string,
            let coordinates = geometry["coordinates"]
        else { throw fail("no geometry with a type and coordinates", id: id) }
        func position(_ value: JSON) throws(OwnPlaceError) -> Coordinate {
            guard let pair = value.array, pair.count >= 2, let longitude = pair[0].double,
                let latitude = pair[1].double
            else { throw fail("a position is not [longitude, latitude]", id: id) }
            return Coordinate(latitude: latitude, longitude: longitude)
        }
        func rings(_ value: JSON) throws(OwnPlaceError) -> [[Coordinate]] {
            guard let rings = value.array else { throw fail("a polygon is not an array of rings", id: id) }
            var result: [[Coordinate]] = []
            for ring in rings {
                guard let positions = ring.array else { throw fail("a ring is not an array of positions", id: id) }
                var points: [Coordinate] = []
                points.reserveCapacity(positions.count)
                for value in positions { points.append(try position(value)) }
                result.append(points)
            }
            return result
        }
        let shape: OwnGeometry
        switch type {
        case "Point":
            guard let radius else { throw fail("a Point needs properties.radius (metres)", id: id) }
            shape = .circle(centre: try position(coordinates), radius: radius)
        case "Polygon":
            if radius != nil { throw fail("radius is for a Point only", id: id) }
            shape = .polygons([try rings(coordinates)])
        case "MultiPolygon":
            if radius != nil { throw fail("radius is for a Point only", id: id) }
            guard let polygons = coordinates.array else { throw fail("MultiPolygon coordinates", id: id) }
            var all: [[[Coordinate]]] = []
            for polygon in polygons { all.append(try rings(polygon)) }
            shape = .polygons(all)
        default:
            throw fail("geometry \(type): an own place is a Point, Polygon or MultiPolygon", id: id)
        }
        self.init(
            id: id, name: name, kind: kind, address: address, localizedNames: localizedNames, weight: weight,
            geometry: shape, details: PlaceDetails(tags: detailTags))
    }

    /// Reads a FeatureCollection (or a single Feature) and checks every place and the batch: the
    /// places, or the first error naming its feature; all or nothing.
    public static func readCollection(_ bytes: [UInt8]) throws(OwnPlaceError) -> [OwnPlace] {
        let document: JSON
        do {
            document = try JSON(parsing: bytes)
        } catch {
            throw OwnPlaceError(feature: nil, id: nil, .invalidGeoJSON("\(error)"))
        }
        return try readCollection(document)
    }

    public static func readCollection(_ document: JSON) throws(OwnPlaceError) -> [OwnPlace] {
        let features: [JSON]
        switch document["type"]?.string {
        case "FeatureCollection":
            guard let list = document["features"]?.array else {
                throw OwnPlaceError(feature: nil, id: nil, .invalidGeoJSON("a FeatureCollection without features"))
            }
            features = list
        case "Feature": features = [document]
        default:
            throw OwnPlaceError(feature: nil, id: nil, .invalidGeoJSON("not a FeatureCollection"))
        }
        return try readFeatures(features)
    }

    /// Reads and checks a list of Features as one batch.
    public static func readFeatures(_ features: [JSON]) throws(OwnPlaceError) -> [OwnPlace] {
        var places: [OwnPlace] = []
        places.reserveCapacity(features.count)
        for (number, feature) in features.enumerated() {
            places.append(try OwnPlace(geoJSON: feature, feature: number))
        }
        try OwnPlace.validate(places)
        return places
    }

    /// The places as a FeatureCollection, in id order.
    public static func collection(_ places: [OwnPlace]) -> JSON {
        ["type": "FeatureCollection", "features": .array(places.sorted { $0.id < $1.id }.map(\.geoJSON))]
    }
}
