/// An own place as the ranker and the boundary tracker read it: the place, its listing and the circle
/// that holds its shape, worked out once when the place is stored. A class: the ranker copies its
/// candidates, and a site is one reference, not a place's many.
public final class OwnSite: Sendable, RankingCandidate {
    public let ownPlace: OwnPlace
    /// Square metres: π r² for a circle, so its extent in the model is its radius; a polygon's area
    /// less its holes.
    public let area: Double
    /// The circle holding the whole shape: the spatial index's and the cheap bound's.
    public let reachCentre: Coordinate
    public let reach: Double

    public init(_ ownPlace: OwnPlace) {
        self.ownPlace = ownPlace
        area = ownPlace.geometry.area
        standardPrior = Self.prior(of: ownPlace, in: .standard)
        (reachCentre, reach) = ownPlace.geometry.boundingCircle
    }

    public var id: String { ownPlace.id }
    public var kind: String { ownPlace.kind }
    /// What a ranking lists: made only for the few places listed, so 10,000 sites keep no second copy.
    public var place: Place { ownPlace.place() }
    public func hasID(_ other: String) -> Bool { ownPlace.id == other }

    public func prior(in model: RankingModel) -> RankingModel.KindPrior {
        // The daemon ranks with the standard model: its prior looked up once, not for every ranking (a
        // copy of the model shares its kinds' storage, so the comparison is quick).
        if model == .standard { return standardPrior }
        return Self.prior(of: ownPlace, in: model)
    }

    private let standardPrior: RankingModel.KindPrior

    private static func prior(of place: OwnPlace, in model: RankingModel) -> RankingModel.KindPrior {
        .init(weight: place.effectiveWeight(in: model), pointExtent: model.prior(ofKind: place.kind).pointExtent)
    }

    /// Distance to the reach circle, less a margin for the sphere against the ellipsoid (0.5 %) and the
    /// local plane of `footprintDistance`: never more than it. Measured in the local plane within a
    /// kilometre, as `OwnGeometry.signedDistance` measures circles: hundreds of sites can be near one fix,
    /// and the plane is a few multiplications where the sphere is trigonometry.
    public func lowerBoundDistance(from projection: LocalProjection) -> Double {
        let near = projection.distance(to: reachCentre)
        let centre = near <= 1000 ? near : Geodesy.greatCircleDistance(projection.origin, reachCentre)
        return max(0, centre * 0.99 - reach * 1.01 - 1)
    }

    public func footprintDistance(from projection: LocalProjection) -> Double {
        max(0, ownPlace.geometry.signedDistance(from: projection))
    }

    /// Metres to the boundary: negative inside.
    public func signedDistance(from projection: LocalProjection) -> Double {
        ownPlace.geometry.signedDistance(from: projection)
    }
}

/// The own places in memory, indexed by the circles that hold them (`ReachIndex`, as the places file's
/// areas are): a query for the sites within a few hundred metres of a fix looks at the sites near it,
/// not at every site, however large some of them are.
public struct OwnPlaceIndex: Sendable {
    public let sites: [OwnSite]
    private let reach: ReachIndex
    private var members: [Int32] = []
    private var scratch: [PlaceIndex.Neighbor] = []

    /// `places` must be valid (`OwnPlace.validate`); ids are unique there, and here the last wins.
    public init(_ places: [OwnPlace] = []) {
        var unique: [String: OwnPlace] = [:]
        for place in places { unique[place.id] = place }
        let sites = unique.values.sorted { $0.id < $1.id }.map(OwnSite.init)
        self.sites = sites
        // The reach index measures in its own plane: a margin keeps every site it should find.
        reach = ReachIndex(coordinates: sites.map(\.reachCentre), reaches: sites.map { $0.reach * 1.01 + 1 })
    }

    public var count: Int { sites.count }
    public var isEmpty: Bool { sites.isEmpty }
    public var places: [OwnPlace] { sites.map(\.ownPlace) }

    public func site(id: String) -> OwnSite? { position(of: id).map { sites[$0] } }
    public func contains(id: String) -> Bool { position(of: id) != nil }

    /// By halving the sites, which are in id order: a dictionary of 10,000 ids would hold 0.4 MB of
    /// placed's memory for a lookup made only when a client names a place.
    private func position(of id: String) -> Int? {
        var low = 0
        var high = sites.count
        while low < high {
            let middle = (low + high) / 2
            if sites[middle].id < id { low = middle + 1 } else { high = middle }
        }
        return low < sites.count && sites[low].id == id ? low : nil
    }

    /// The index with `batch` put (inserted, or replacing the place of the same id).
    public func putting(_ batch: [OwnPlace]) -> OwnPlaceIndex {
        OwnPlaceIndex(places + batch)
    }

    /// The index without `ids` (ids it does not hold are ignored).
    public func deleting(_ ids: some Sequence<String>) -> OwnPlaceIndex {
        let gone = Set(ids)
        return OwnPlaceIndex(places.filter { !gone.contains($0.id) })
    }

    /// Every site whose shape may come within `radius` metres of `position` (more is harmless: the
    /// ranker measures each), into `found`.
    public mutating func candidates(within radius: Double, of position: Coordinate, into found: inout [OwnSite]) {
        found.removeAll(keepingCapacity: true)
        guard !sites.isEmpty else { return }
        reach.members(within: radius, of: position, into: &members, scratch: &scratch)
        for member in members { found.append(sites[Int(member)]) }
    }
}
