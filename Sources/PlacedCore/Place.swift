/// A place a device can be at, from OpenStreetMap.
public struct Place: Sendable, Equatable, Identifiable {
    /// Stable id: `osm:node/123`, `osm:way/456`.
    public var id: String
    public var name: String
    /// Main OSM tag, `key=value`: `amenity=cafe`.
    public var kind: String
    /// From addr:* tags when present: "Mannerheimintie 1, 00100 Helsinki".
    public var address: String?
    /// A point on the place: the node, or for an area a point inside its shape (never a centroid
    /// that falls outside it).
    public var coordinate: Coordinate
    /// Area in square metres; 0 for a point.
    public var area: Double
    /// Bounding box of the shape; nil for a point.
    public var bounds: BoundingBox?
    /// Outer ring of an area (closed: first == last); nil or empty for a point or an open way.
    public var outline: [Coordinate]?

    public init(
        id: String, name: String, kind: String, address: String? = nil, coordinate: Coordinate,
        area: Double = 0, bounds: BoundingBox? = nil, outline: [Coordinate]? = nil
    ) {
        self.id = id
        self.name = name
        self.kind = kind
        self.address = address
        self.coordinate = coordinate
        self.area = area
        self.bounds = bounds
        self.outline = outline
    }

    public static let attribution = "© OpenStreetMap contributors"
}

public struct BoundingBox: Sendable, Equatable, Hashable {
    public var minLatitude: Double
    public var minLongitude: Double
    public var maxLatitude: Double
    public var maxLongitude: Double

    public init(minLatitude: Double, minLongitude: Double, maxLatitude: Double, maxLongitude: Double) {
        self.minLatitude = minLatitude
        self.minLongitude = minLongitude
        self.maxLatitude = maxLatitude
        self.maxLongitude = maxLongitude
    }

    public func contains(_ c: Coordinate) -> Bool {
        c.latitude >= minLatitude && c.latitude <= maxLatitude && c.longitude >= minLongitude
            && c.longitude <= maxLongitude
    }
}
