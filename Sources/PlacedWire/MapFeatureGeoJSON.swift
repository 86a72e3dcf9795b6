import PlacedCore
import PlacedJSON

/// The wire form of a map feature (varlink `io.placed.Places.Map`): a GeoJSON Feature
/// (RFC 7946) with the kind, class and name as properties and coordinates as [longitude, latitude]
/// rounded to 1e-6 degree (11 cm, ten times finer than the 1 m simplification).
///
///     {"type": "Feature", "id": "osm:way/4236349",
///      "properties": {"kind": "street", "class": "primary", "name": "Mannerheimintie"},
///      "geometry": {"type": "LineString", "coordinates": [[24.93805, 60.17011], ...]}}
///
/// A line is a LineString, one polygon a Polygon, several a MultiPolygon; unnamed features have no
/// `name`.
extension MapFeature {
    /// The Feature object, its name chosen for `language` (nil: the `name` tag).
    public func geoJSON(language: String? = nil) -> JSON {
        var properties: [String: JSON] = ["kind": .string(kind.rawValue), "class": .string(featureClass)]
        if let name = name(forLanguage: language) { properties["name"] = .string(name) }
        return [
            "type": "Feature", "id": .string(id), "properties": .object(properties), "geometry": geometry.geoJSON,
        ]
    }

    /// Reads a Feature as `geoJSON` writes it; nil for anything else (another shape, a kind this
    /// version does not draw, fewer points than the geometry needs).
    public init?(geoJSON: JSON) {
        guard geoJSON["type"]?.string == "Feature", let id = geoJSON["id"]?.string,
            let properties = geoJSON["properties"], let kind = properties["kind"]?.string.flatMap(Kind.init),
            let geometry = geoJSON["geometry"].flatMap(Geometry.init(geoJSON:))
        else { return nil }
        self.init(
            id: id, kind: kind, featureClass: properties["class"]?.string ?? "", name: properties["name"]?.string,
            geometry: geometry)
    }
}

extension MapFeature.Geometry {
    public var geoJSON: JSON {
        func position(_ c: Coordinate) -> JSON {
            [.number(Self.rounded(c.longitude)), .number(Self.rounded(c.latitude))]
        }
        func ring(_ points: [Coordinate]) -> JSON { .array(points.map(position)) }
        func polygon(_ rings: [[Coordinate]]) -> JSON { .array(rings.map(ring)) }
        switch self {
        case .line(let points):
            return ["type": "LineString", "coordinates": ring(points)]
        case .polygons(let polygons) where polygons.count == 1:
            return ["type": "Polygon", "coordinates": polygon(polygons[0])]
        case .polygons(let polygons):
            return ["type": "MultiPolygon", "coordinates": .array(polygons.map(polygon))]
        }
    }

    public init?(geoJSON: JSON) {
        func position(_ value: JSON) -> Coordinate? {
            guard let pair = value.array, pair.count >= 2, let lon = pair[0].double, let lat = pair[1].double else {
                return nil
            }
            let c = Coordinate(latitude: lat, longitude: lon)
            return c.isValid ? c : nil
        }
        func points(_ value: JSON?, minimum: Int) -> [Coordinate]? {
            guard let array = value?.array, array.count >= minimum else { return nil }
            let points = array.compactMap(position)
            return points.count == array.count ? points : nil
        }
        func polygon(_ value: JSON?) -> [[Coordinate]]? {
            guard let rings = value?.array, !rings.isEmpty else { return nil }
            let parsed = rings.compactMap { points($0, minimum: 4) }
            return parsed.count == rings.count ? parsed : nil
        }
        let coordinates = geoJSON["coordinates"]
        switch geoJSON["type"]?.string {
        case "LineString":
            guard let line = points(coordinates, minimum: 2) else { return nil }
            self = .line(line)
        case "Polygon":
            guard let rings = polygon(coordinates) else { return nil }
            self = .polygons([rings])
        case "MultiPolygon":
            guard let array = coordinates?.array, !array.isEmpty else { return nil }
            let polygons = array.compactMap(polygon)
            guard polygons.count == array.count else { return nil }
            self = .polygons(polygons)
        default:
            return nil
        }
    }

    static func rounded(_ degrees: Double) -> Double { (degrees * 1e6).rounded() / 1e6 }
}
