/// One thing drawn on the map around the device (docs/DESIGN.md, "Map layer"): a street, path, railway,
/// building, water, green area or square, from OpenStreetMap, simplified for display.
public struct MapFeature: Sendable, Equatable, Identifiable {
    /// The layer a feature is drawn in, bottom to top as `allCases` lists them.
    public enum Kind: String, Sendable, CaseIterable {
        case green, water, square, building, rail, path, street
    }

    public enum Geometry: Sendable, Equatable {
        /// A line: at least two points.
        case line([Coordinate])
        /// Areas: each polygon is its outer ring then its holes, every ring closed (first == last).
        case polygons([[[Coordinate]]])

        public var pointCount: Int {
            switch self {
            case .line(let points): points.count
            case .polygons(let polygons): polygons.reduce(0) { $0 + $1.reduce(0) { $0 + $1.count } }
            }
        }

        /// Every point, ring after ring.
        public var allPoints: [Coordinate] {
            switch self {
            case .line(let points): points
            case .polygons(let polygons): polygons.flatMap { $0.flatMap { $0 } }
            }
        }
    }

    /// `osm:way/456`, `osm:relation/789`.
    public var id: String
    public var kind: Kind
    /// The OSM value that made it this kind: the highway value for streets and paths ("residential",
    /// "footway"), the railway value ("tram"), the building value ("yes"), and for water, green and
    /// squares the tag value ("park", "grass", "water", "square", "pedestrian").
    public var featureClass: String
    /// The `name` tag; nil when unnamed.
    public var name: String?
    /// `name:<language>` tags, keyed as `Place.localizedNames`.
    public var localizedNames: [String: String]
    public var geometry: Geometry
    public var bounds: BoundingBox

    public init(
        id: String, kind: Kind, featureClass: String, name: String? = nil, localizedNames: [String: String] = [:],
        geometry: Geometry, bounds: BoundingBox? = nil
    ) {
        self.id = id
        self.kind = kind
        self.featureClass = featureClass
        self.name = name
        self.localizedNames = localizedNames
        self.geometry = geometry
        self.bounds = bounds ?? BoundingBox(enclosing: geometry.allPoints)
    }

    /// The name for a reader of `language`, as `Place.name(forLanguage:)`; nil when unnamed.
    public func name(forLanguage language: String?) -> String? {
        name.map { LocalizedName.choose($0, localizedNames, language: language) }
    }
}

extension BoundingBox {
    /// The smallest box holding every point; a zero box at 0,0 for none.
    public init(enclosing points: [Coordinate]) {
        guard let first = points.first else {
            self.init(minLatitude: 0, minLongitude: 0, maxLatitude: 0, maxLongitude: 0)
            return
        }
        self.init(
            minLatitude: first.latitude, minLongitude: first.longitude, maxLatitude: first.latitude,
            maxLongitude: first.longitude)
        for point in points.dropFirst() {
            minLatitude = min(minLatitude, point.latitude)
            maxLatitude = max(maxLatitude, point.latitude)
            minLongitude = min(minLongitude, point.longitude)
            maxLongitude = max(maxLongitude, point.longitude)
        }
    }

    /// Metres from `projection.origin` to the box: 0 inside.
    public func distance(from projection: LocalProjection) -> Double {
        Footprint.distanceFromOrigin(to: self, in: projection)
    }
}

/// Where an import's map layer goes, feature by feature as they are made: `MapFeatureList` keeps them
/// in memory; the places file's writer spills them to disk, so that the layer need not fit in memory.
public protocol MapFeatureSink: AnyObject {
    func add(_ feature: MapFeature)
}

/// A `MapFeatureSink` in memory.
public final class MapFeatureList: MapFeatureSink {
    public private(set) var features: [MapFeature] = []

    public init() {}

    public func add(_ feature: MapFeature) { features.append(feature) }
}
