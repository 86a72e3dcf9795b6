#if canImport(Glibc)
    import Glibc  // libm: cos, floor
#elseif canImport(Darwin)
    import Darwin
#endif

/// An own place as the ranker and the boundary tracker read it: the place, its listing and the circle
/// that holds its shape, worked out once when the place is stored.
public struct OwnSite: Sendable, RankingCandidate {
    public let ownPlace: OwnPlace
    /// What a ranking lists.
    public let place: Place
    /// The circle holding the whole shape: the spatial index's and the cheap bound's.
    public let reachCentre: Coordinate
    public let reach: Double

    public init(_ ownPlace: OwnPlace) {
        self.ownPlace = ownPlace
        place = ownPlace.place()
        (reachCentre, reach) = ownPlace.geometry.boundingCircle
    }

    public var id: String { ownPlace.id }
    public var kind: String { ownPlace.kind }
    /// π r² for a circle, so its extent in the model is its radius; a polygon's area less its holes.
    public var area: Double { place.area }
    public func hasID(_ other: String) -> Bool { ownPlace.id == other }

    public func prior(in model: RankingModel) -> RankingModel.KindPrior {
        .init(weight: ownPlace.effectiveWeight(in: model), pointExtent: model.prior(ofKind: kind).pointExtent)
    }

    /// Great-circle distance to the reach circle, less a margin for the sphere against the ellipsoid
    /// (0.5 %) and the local plane of `footprintDistance`: never more than it.
    public func lowerBoundDistance(from projection: LocalProjection) -> Double {
        let centre = Geodesy.greatCircleDistance(projection.origin, reachCentre)
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

/// The own places in memory with a grid over them: a query for the sites within a few hundred metres
/// of a fix looks at the cells around it, not at every site. Cells are 0.01° (1.1 km of latitude); a
/// site is listed in every cell its reach circle touches, and a site too wide for that (reach over
/// about 20 cells) is checked on every query.
public struct OwnPlaceIndex: Sendable {
    public private(set) var sites: [OwnSite]
    private var positions: [String: Int]
    private var cells: [Int64: [Int32]] = [:]
    private var wide: [Int32] = []
    /// Per site, the number of the last query that listed it: no site is listed twice.
    private var listedIn: [UInt32]
    private var queryNumber: UInt32 = 0

    static let cellDegrees = 0.01
    static let columns = Int64(360 / cellDegrees)
    static let maximumCellsPerSite = 400

    /// `places` must be valid (`OwnPlace.validate`); ids are unique there, and here the last wins.
    public init(_ places: [OwnPlace] = []) {
        var unique: [String: Int] = [:]
        var sites: [OwnSite] = []
        sites.reserveCapacity(places.count)
        for place in places {
            if let existing = unique[place.id] {
                sites[existing] = OwnSite(place)
            } else {
                unique[place.id] = sites.count
                sites.append(OwnSite(place))
            }
        }
        sites.sort { $0.id < $1.id }
        self.sites = sites
        positions = Dictionary(uniqueKeysWithValues: sites.enumerated().map { ($1.id, $0) })
        listedIn = [UInt32](repeating: 0, count: sites.count)
        for (number, site) in sites.enumerated() {
            guard let cover = Self.cells(around: site.reachCentre, within: site.reach) else {
                wide.append(Int32(number))
                continue
            }
            for key in cover { cells[key, default: []].append(Int32(number)) }
        }
    }

    public var count: Int { sites.count }
    public var isEmpty: Bool { sites.isEmpty }
    public var places: [OwnPlace] { sites.map(\.ownPlace) }

    public func site(id: String) -> OwnSite? { positions[id].map { sites[$0] } }
    public func contains(id: String) -> Bool { positions[id] != nil }

    /// The index with `batch` put (inserted, or replacing the place of the same id).
    public func putting(_ batch: [OwnPlace]) -> OwnPlaceIndex {
        OwnPlaceIndex(places + batch)
    }

    /// The index without `ids` (ids it does not hold are ignored).
    public func deleting(_ ids: some Sequence<String>) -> OwnPlaceIndex {
        let gone = Set(ids)
        return OwnPlaceIndex(places.filter { !gone.contains($0.id) })
    }

    /// Every site whose reach circle may come within `radius` metres of `position` (more is harmless:
    /// the ranker measures each), into `found`.
    public mutating func candidates(within radius: Double, of position: Coordinate, into found: inout [OwnSite]) {
        found.removeAll(keepingCapacity: true)
        guard !sites.isEmpty else { return }
        for number in wide { found.append(sites[Int(number)]) }
        guard let cover = Self.cells(around: position, within: radius) else {
            found = sites
            return
        }
        queryNumber &+= 1
        if queryNumber == 0 {
            for index in listedIn.indices { listedIn[index] = 0 }
            queryNumber = 1
        }
        for key in cover {
            guard let members = cells[key] else { continue }
            for number in members where listedIn[Int(number)] != queryNumber {
                listedIn[Int(number)] = queryNumber
                found.append(sites[Int(number)])
            }
        }
    }

    /// The cell keys a circle touches, or nil when they are too many (near a pole, or a wide circle).
    static func cells(around centre: Coordinate, within radius: Double) -> [Int64]? {
        let metresPerDegree = 111_000.0
        let latitudeSpan = radius / metresPerDegree
        let south = max(-90, centre.latitude - latitudeSpan), north = min(90, centre.latitude + latitudeSpan)
        let cosine = cos(max(abs(south), abs(north)) * .pi / 180)
        guard cosine > 1e-3 else { return nil }
        let longitudeSpan = radius / (metresPerDegree * cosine)
        guard longitudeSpan < 90 else { return nil }
        let firstRow = Int64(floor((south + 90) / cellDegrees)), lastRow = Int64(floor((north + 90) / cellDegrees))
        let firstColumn = Int64(floor((centre.longitude - longitudeSpan + 180) / cellDegrees))
        let lastColumn = Int64(floor((centre.longitude + longitudeSpan + 180) / cellDegrees))
        let count = (lastRow - firstRow + 1) * (lastColumn - firstColumn + 1)
        guard count <= Int64(maximumCellsPerSite) else { return nil }
        var keys: [Int64] = []
        keys.reserveCapacity(Int(count))
        for row in firstRow...lastRow {
            for column in firstColumn...lastColumn {
                // Columns wrap at the antimeridian.
                let wrapped = ((column % columns) + columns) % columns
                keys.append(row * columns + wrapped)
            }
        }
        return keys
    }
}
