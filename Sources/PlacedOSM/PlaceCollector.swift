import PlacedCore

/// Gathers places while blocks are decoded. Node places are complete at once; way places wait
/// for `finish()`, when every node location is known, because a file need not list nodes first.
struct PlaceCollector {
    var nodes = NodeLocations()
    var wayCount = 0
    var relationCount = 0
    private(set) var places: [Place] = []

    /// A way that is a place, waiting for its node locations.
    private struct PendingWay {
        let id: Int64
        let name: String
        let kind: String
        let address: String?
        let refs: Range<Int>
    }
    private var pendingWays: [PendingWay] = []
    /// The node refs of all pending ways, end to end.
    private var wayRefs: [Int64] = []

    var nodeCount: Int { nodes.count }
    var elementCount: Int { nodeCount + wayCount + relationCount }

    mutating func addNode(id: Int64, location: NodeLocation, tags: PlaceTags, strings: StringTable) {
        guard let (name, kind, address) = tags.place(isWay: false, strings: strings) else { return }
        places.append(
            Place(
                id: "osm:node/\(id)", name: name, kind: kind, address: address,
                coordinate: location.coordinate))
    }

    mutating func addWay(id: Int64, refs: ProtobufReader, tags: PlaceTags, strings: StringTable)
        throws(ProtobufError)
    {
        guard let (name, kind, address) = tags.place(isWay: true, strings: strings) else { return }
        let start = wayRefs.count
        var refs = refs
        var ref: Int64 = 0
        while !refs.isAtEnd {
            ref &+= try refs.signedVarint()
            wayRefs.append(ref)
        }
        pendingWays.append(
            PendingWay(id: id, name: name, kind: kind, address: address, refs: start..<wayRefs.count))
    }

    /// Resolves the pending ways and returns every place. A way with a node missing from the file
    /// (an extract cut through it) has no known shape and is left out, as osmium export does.
    mutating func finish() -> (places: [Place], incompleteWays: Int) {
        nodes.finish()
        var incomplete = 0
        var points: [Coordinate] = []
        for way in pendingWays {
            points.removeAll(keepingCapacity: true)
            var isComplete = true
            for ref in wayRefs[way.refs] {
                guard let location = nodes.location(of: ref) else {
                    isComplete = false
                    break
                }
                // Two nodes at one spot add no vertex (osmium's geometries drop them too).
                let point = location.coordinate
                if point != points.last { points.append(point) }
            }
            guard isComplete, !points.isEmpty else {
                incomplete += 1
                continue
            }
            let isClosed = points.count >= 4 && wayRefs[way.refs.first!] == wayRefs[way.refs.last!]
            places.append(Self.wayPlace(way, points: points, isClosed: isClosed))
        }
        pendingWays = []
        wayRefs = []
        return (places, incomplete)
    }

    /// A closed way is an area: a point inside it, its area and its outline. An open way (or a
    /// closed one with no interior) is a line: its middle vertex, no area.
    private static func wayPlace(_ way: PendingWay, points: [Coordinate], isClosed: Bool) -> Place {
        let bounds = Shape.bounds(of: points)
        var place = Place(
            id: "osm:way/\(way.id)", name: way.name, kind: way.kind, address: way.address,
            coordinate: points[points.count / 2], bounds: bounds)
        if isClosed, let inside = Shape.pointOnSurface(ofRing: points, bounds: bounds) {
            place.coordinate = inside
            place.area = Shape.area(ofRing: points, bounds: bounds)
            place.outline = points
        }
        return place
    }
}
