/// A place a device can be at, from OpenStreetMap.
public struct Place: Sendable, Equatable, Identifiable {
    /// Stable id: `osm:node/123`, `osm:way/456`, `osm:relation/789`.
    public var id: String
    /// The `name` tag: the name shown when no `localizedNames` entry fits the reader's language.
    public var name: String
    /// Main OSM tag, `key=value`: `amenity=cafe`.
    public var kind: String
    /// From addr:* tags when present: "Mannerheimintie 1, 00100 Helsinki"; else derived from what is
    /// around the place (`addressSource` says how), e.g. "near Mannerheimintie".
    public var address: String?
    /// Where `address` came from.
    public var addressSource: AddressSource
    /// The `name:<language>` tags: language (lower case, `-` between subtags: "sv", "zh-hant") → name.
    /// `name(forLanguage:)` chooses among them.
    public var localizedNames: [String: String]
    /// A point on the place: the node, or for an area a point inside its shape (never a centroid
    /// that falls outside it).
    public var coordinate: Coordinate
    /// Area in square metres; 0 for a point.
    public var area: Double
    /// Bounding box of the shape; nil for a point.
    public var bounds: BoundingBox?
    /// Outer ring of an area (closed: first == last); nil or empty for a point or an open way.
    public var outline: [Coordinate]?
    /// Opening hours, contact, access and services (`PlaceDetails`); empty when OSM has none.
    public var details: PlaceDetails

    public init(
        id: String, name: String, kind: String, address: String? = nil, coordinate: Coordinate,
        area: Double = 0, bounds: BoundingBox? = nil, outline: [Coordinate]? = nil,
        addressSource: AddressSource? = nil, localizedNames: [String: String] = [:],
        details: PlaceDetails = PlaceDetails()
    ) {
        self.id = id
        self.name = name
        self.kind = kind
        self.address = address
        self.addressSource = addressSource ?? (address == nil ? .none : .own)
        self.localizedNames = localizedNames
        self.coordinate = coordinate
        self.area = area
        self.bounds = bounds
        self.outline = outline
        self.details = details
    }

    public static let attribution = "© OpenStreetMap contributors"

    /// The name for a reader of `language` ("sv", "sv-FI", "sv_FI.UTF-8"; nil: the `name` tag).
    public func name(forLanguage language: String?) -> String {
        LocalizedName.choose(name, localizedNames, language: language)
    }
}

/// Where a place's address comes from (docs/DESIGN.md, "Place data"), in the order they are tried.
public enum AddressSource: String, Sendable, CaseIterable {
    /// Its own addr:* tags.
    case own
    /// The addr:* tags of the building it stands in.
    case building
    /// The nearest address (a node or building with addr:*) within 30 m.
    case nearby
    /// "near <street>": the nearest named street.
    case street
    /// Nothing near enough: no address.
    case none
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

/// Where an import puts the places it makes, one at a time, so that it need not hold them all: a file
/// writer spills them to disk (PlacedStore's `PlaceFileWriter`), `PlaceList` keeps them in memory.
/// Places whose address is derived from what is around them come without one; `assignAddresses` then
/// gives each, in the order they were added, the address `resolve` finds at its point.
/// `forEachPlaceLackingAddress` lists those places first (number in the order added, point), so that an
/// import can work out their addresses region by region before handing them over in order.
public protocol PlaceSink: AnyObject {
    /// Places added so far.
    var count: Int { get }
    func add(_ place: Place)
    func forEachPlaceLackingAddress(_ body: (_ number: Int, _ point: Coordinate) -> Void)
    func assignAddresses(_ resolve: (Coordinate) -> (address: String?, source: AddressSource))
}

/// A `PlaceSink` in memory.
public final class PlaceList: PlaceSink {
    public private(set) var places: [Place] = []

    public init() {}

    public var count: Int { places.count }

    public func add(_ place: Place) { places.append(place) }

    public func forEachPlaceLackingAddress(_ body: (_ number: Int, _ point: Coordinate) -> Void) {
        for (number, place) in places.enumerated() where place.address == nil { body(number, place.coordinate) }
    }

    public func assignAddresses(_ resolve: (Coordinate) -> (address: String?, source: AddressSource)) {
        for index in places.indices where places[index].address == nil {
            (places[index].address, places[index].addressSource) = resolve(places[index].coordinate)
        }
    }
}
