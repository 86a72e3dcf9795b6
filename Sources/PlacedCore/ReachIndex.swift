/// Coordinates of footprints that reach beyond them, found by "may come within R of here".
///
/// `PlaceIndex` finds coordinates, but an area reaches beyond its coordinate (a point inside it), so
/// a radius query on coordinates alone would miss a park whose edge is near and whose inside point is
/// not. Members are therefore grouped by *reach*, the farthest their bounding box extends from their
/// coordinate: points (reach 0) in one index queried with R exactly, areas in tiers of doubling reach,
/// each queried with R plus its tier's bound. The few large areas widen only their own small query,
/// never the dense one of points.
public struct ReachIndex: Sendable {
    private let tiers: [Tier]

    private struct Tier: Sendable {
        /// Every member reaches at most this far from its coordinate, metres.
        var reach: Double
        var index: PlaceIndex
        /// `members[i]`: the member number of the index's i-th coordinate.
        var members: [Int32]
    }

    /// Smallest tier bound above 0, metres; bounds double from here.
    static let firstReach = 16.0

    /// Member `i` is at `coordinates[i]` and reaches `reaches[i]` metres from it; a member with an
    /// invalid coordinate is never found.
    public init(coordinates: [Coordinate], reaches: [Double]) {
        precondition(coordinates.count == reaches.count, "one reach per coordinate")
        var groups: [Int: [Int32]] = [:]  // tier number → members; 0 is the points
        for (member, coordinate) in coordinates.enumerated() where coordinate.isValid {
            groups[Self.tier(forReach: reaches[member]), default: []].append(Int32(member))
        }
        tiers = groups.keys.sorted().map { tier in
            let members = groups[tier]!
            return Tier(
                reach: Self.bound(ofTier: tier), index: PlaceIndex(coordinates: members.map { coordinates[Int($0)] }),
                members: members)
        }
    }

    /// Members that may lie within `radius` metres of `center` (a superset: the ranker measures each
    /// footprint exactly), grouped by tier, each tier nearest first.
    public func members(within radius: Double, of center: Coordinate) -> [Int32] {
        var found: [Int32] = []
        var scratch: [PlaceIndex.Neighbor] = []
        members(within: radius, of: center, into: &found, scratch: &scratch)
        return found
    }

    /// The same into `found` (emptied first), with `scratch` for the index queries: a caller that
    /// keeps both, as the daemon does for every move, allocates nothing once they have grown.
    public func members(
        within radius: Double, of center: Coordinate, into found: inout [Int32],
        scratch: inout [PlaceIndex.Neighbor]
    ) {
        found.removeAll(keepingCapacity: true)
        for tier in tiers {
            tier.index.within(radius + tier.reach, of: center, into: &scratch)
            for n in scratch { found.append(tier.members[n.index]) }
        }
    }

    /// 0 for reach 0, then 1 for reach ≤ 16 m, 2 for ≤ 32 m, …
    static func tier(forReach reach: Double) -> Int {
        guard reach > 0 else { return 0 }
        var tier = 1
        var bound = firstReach
        while bound < reach, tier < 40 {
            bound *= 2
            tier += 1
        }
        return tier
    }

    static func bound(ofTier tier: Int) -> Double {
        guard tier > 0 else { return 0 }
        var bound = firstReach
        for _ in 1..<tier { bound *= 2 }
        return bound
    }
}

extension Place {
    /// Metres from the coordinate to the farthest corner of the bounding box; 0 for a point.
    public var reach: Double {
        guard area > 0, let box = bounds else { return 0 }
        let projection = LocalProjection(origin: coordinate)
        var farthest = 0.0
        for latitude in [box.minLatitude, box.maxLatitude] {
            for longitude in [box.minLongitude, box.maxLongitude] {
                farthest = max(farthest, projection.distance(to: Coordinate(latitude: latitude, longitude: longitude)))
            }
        }
        // The index measures in the query's plane, the reach in the place's: a part per thousand at
        // 10 km covers the difference.
        return farthest * 1.001
    }
}
