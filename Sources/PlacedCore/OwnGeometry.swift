#if canImport(Glibc)
    import Glibc  // libm: cos
#elseif canImport(Darwin)
    import Darwin
#endif

/// The ground an own place covers: a circle around a point, or polygons with holes (GeoJSON Polygon
/// and MultiPolygon: each polygon its outer ring, then its holes; every ring closed).
///
/// Edges are straight in longitude and latitude, as GeoJSON draws them. Longitudes are taken relative
/// to the position measured from (or a ring's first position), so a place across the antimeridian
/// (179.9 … -179.9) works as long as it spans less than 180° of longitude.
public enum OwnGeometry: Sendable, Equatable {
    /// Every position within `radius` metres (the geodesic) of `centre`.
    case circle(centre: Coordinate, radius: Double)
    /// Polygons, each its outer ring then its holes.
    case polygons([[[Coordinate]]])

    /// Positions of all rings, closing ones included; 1 for a circle.
    public var vertexCount: Int {
        switch self {
        case .circle: 1
        case .polygons(let polygons): polygons.reduce(0) { $0 + $1.reduce(0) { $0 + $1.count } }
        }
    }

    /// The first problem, or nil.
    public func problem() -> OwnPlaceError.Reason? {
        switch self {
        case let .circle(centre, radius):
            guard centre.isValid else {
                return .invalidCoordinate(latitude: centre.latitude, longitude: centre.longitude)
            }
            guard radius >= OwnPlace.minimumRadius, radius <= OwnPlace.maximumRadius else {
                return .radiusOutOfRange(radius)
            }
            return nil
        case .polygons(let polygons):
            guard !polygons.isEmpty, polygons.allSatisfy({ !$0.isEmpty }) else { return .noPolygon }
            let count = vertexCount
            guard count <= OwnPlace.maximumVertices else { return .tooManyVertices(count) }
            for (p, rings) in polygons.enumerated() {
                for (r, ring) in rings.enumerated() {
                    if let bad = ring.first(where: { !$0.isValid }) {
                        return .invalidCoordinate(latitude: bad.latitude, longitude: bad.longitude)
                    }
                    guard ring.count >= 4 else { return .ringTooShort(polygon: p, ring: r) }
                    guard ring.first == ring.last else { return .ringNotClosed(polygon: p, ring: r) }
                    if Self.crossesItself(ring) { return .ringCrossesItself(polygon: p, ring: r) }
                }
            }
            return nil
        }
    }

    // MARK: Measuring from a position

    /// Metres from `projection.origin` to the boundary: negative inside (how deep), positive outside.
    /// A circle is measured in the local plane around the position when its centre is within 1 km,
    /// else on the ellipsoid; polygons in the local plane, to centimetres within a few kilometres.
    public func signedDistance(from projection: LocalProjection) -> Double {
        switch self {
        case let .circle(centre, radius):
            // Within a kilometre the local plane is within 0.2 m of the geodesic (0.4 m at 75°), at a
            // fraction of Vincenty's cost: a ranking measures every circle near the fix.
            let near = projection.distance(to: centre)
            return (near <= 1000 ? near : Geodesy.distance(projection.origin, centre)) - radius
        case .polygons(let polygons):
            var inside = false
            var nearestSquared = Double.infinity
            for rings in polygons {
                var insideThis = false
                for ring in rings {
                    var a = projection.project(ring[0])
                    for index in 1..<ring.count {
                        let b = projection.project(ring[index])
                        // Even–odd over the outer ring and its holes: a hole's crossing toggles back out.
                        if (a.y > 0) != (b.y > 0) {
                            let crossingX = a.x + (0 - a.y) * (b.x - a.x) / (b.y - a.y)
                            if crossingX > 0 { insideThis.toggle() }
                        }
                        nearestSquared = min(nearestSquared, Footprint.squaredDistanceFromOrigin(toSegment: a, b))
                        a = b
                    }
                }
                if insideThis { inside = true }
            }
            let nearest = nearestSquared.squareRoot()
            return inside ? -nearest : nearest
        }
    }

    public func signedDistance(from position: Coordinate) -> Double {
        signedDistance(from: LocalProjection(origin: position))
    }

    /// Whether `position` is inside (on the boundary counts as inside for a circle).
    public func contains(_ position: Coordinate) -> Bool { signedDistance(from: position) <= 0 }

    /// Metres from `position` to the place: 0 inside, else to the nearest edge.
    public func distance(from position: Coordinate) -> Double { max(0, signedDistance(from: position)) }

    // MARK: Shape

    /// Square metres (holes subtracted).
    public var area: Double {
        switch self {
        case .circle(_, let radius): return .pi * radius * radius
        case .polygons(let polygons):
            var total = 0.0
            for rings in polygons {
                guard let outer = rings.first else { continue }
                total += Self.ringArea(outer) - rings.dropFirst().reduce(0) { $0 + Self.ringArea($1) }
            }
            return max(total, 0)
        }
    }

    static func ringArea(_ ring: [Coordinate]) -> Double {
        let projection = LocalProjection(origin: ring[0])
        var twice = 0.0
        var a = projection.project(ring[0])
        for point in ring.dropFirst() {
            let b = projection.project(point)
            twice += a.x * b.y - b.x * a.y
            a = b
        }
        return abs(twice) / 2
    }

    /// A centre for the spatial index and the radius in metres around it that holds the whole shape.
    public var boundingCircle: (centre: Coordinate, radius: Double) {
        switch self {
        case let .circle(centre, radius): return (centre, radius)
        case .polygons:
            let box = boundingBox
            let centre = Coordinate(
                latitude: (box.minLatitude + box.maxLatitude) / 2,
                longitude: Self.wrapped((box.minLongitude + box.maxLongitude) / 2))
            var radius = 0.0
            forEachVertex { radius = max(radius, Geodesy.greatCircleDistance(centre, $0)) }
            return (centre, radius)
        }
    }

    func forEachVertex(_ body: (Coordinate) -> Void) {
        guard case .polygons(let polygons) = self else { return }
        for rings in polygons { for ring in rings { for point in ring { body(point) } } }
    }

    /// The box in degrees; its longitudes are unwrapped from the first position, so a place across
    /// the antimeridian has one beyond ±180.
    public var boundingBox: BoundingBox {
        switch self {
        case let .circle(centre, radius):
            let projection = LocalProjection(origin: centre)
            let dLat = radius / projection.metresPerDegreeLatitude
            let dLon = min(180, radius / max(projection.metresPerDegreeLongitude, 1e-9))
            return BoundingBox(
                minLatitude: max(-90, centre.latitude - dLat), minLongitude: centre.longitude - dLon,
                maxLatitude: min(90, centre.latitude + dLat), maxLongitude: centre.longitude + dLon)
        case .polygons(let polygons):
            let reference = polygons[0][0][0].longitude
            var box = BoundingBox(
                minLatitude: .infinity, minLongitude: .infinity, maxLatitude: -.infinity, maxLongitude: -.infinity)
            forEachVertex { point in
                let longitude = reference + Geodesy.normalizedLongitudeDelta(point.longitude - reference)
                box.minLatitude = min(box.minLatitude, point.latitude)
                box.maxLatitude = max(box.maxLatitude, point.latitude)
                box.minLongitude = min(box.minLongitude, longitude)
                box.maxLongitude = max(box.maxLongitude, longitude)
            }
            return box
        }
    }

    /// The outer ring of the largest polygon, for a map; nil for a circle.
    public var outline: [Coordinate]? {
        guard case .polygons(let polygons) = self else { return nil }
        return polygons.max { Self.ringArea($0[0]) < Self.ringArea($1[0]) }?[0]
    }

    /// A position inside the shape: a circle's centre; for polygons the middle of the widest stretch
    /// of the largest polygon along the latitude through its box's middle (never a centroid outside).
    public var interiorPoint: Coordinate {
        switch self {
        case .circle(let centre, _): return centre
        case .polygons(let polygons):
            let rings = polygons.max { Self.ringArea($0[0]) < Self.ringArea($1[0]) }!
            let outer = rings[0]
            let reference = outer[0].longitude
            func unwrapped(_ c: Coordinate) -> Double {
                reference + Geodesy.normalizedLongitudeDelta(c.longitude - reference)
            }
            let latitudes = outer.map(\.latitude)
            let latitude = (latitudes.min()! + latitudes.max()!) / 2
            var crossings: [Double] = []
            for ring in rings {
                for index in 1..<ring.count {
                    let a = ring[index - 1], b = ring[index]
                    guard (a.latitude > latitude) != (b.latitude > latitude) else { continue }
                    let ax = unwrapped(a), bx = unwrapped(b)
                    crossings.append(ax + (latitude - a.latitude) * (bx - ax) / (b.latitude - a.latitude))
                }
            }
            crossings.sort()
            var best = (width: -1.0, middle: outer[0].longitude)
            var index = 0
            while index + 1 < crossings.count {
                let width = crossings[index + 1] - crossings[index]
                if width > best.width { best = (width, (crossings[index] + crossings[index + 1]) / 2) }
                index += 2
            }
            return Coordinate(latitude: latitude, longitude: Self.wrapped(best.middle))
        }
    }

    static func wrapped(_ longitude: Double) -> Double {
        Geodesy.normalizedLongitudeDelta(longitude)
    }

    // MARK: Validation

    /// Whether two edges of a closed ring that are not neighbours meet (cross, touch or overlap).
    /// Edges are swept in order of their west end, so a ring of n edges costs about n log n.
    static func crossesItself(_ ring: [Coordinate]) -> Bool {
        let reference = ring[0].longitude
        let points = ring.map { c in
            (x: Geodesy.normalizedLongitudeDelta(c.longitude - reference), y: c.latitude)
        }
        let edges = points.count - 1
        var order = Array(0..<edges)
        func west(_ e: Int) -> Double { min(points[e].x, points[e + 1].x) }
        func east(_ e: Int) -> Double { max(points[e].x, points[e + 1].x) }
        order.sort { west($0) < west($1) }
        for (position, e) in order.enumerated() {
            let eastEnd = east(e)
            for f in order[(position + 1)...] {
                if west(f) > eastEnd { break }
                if adjacent(e, f, edges: edges) { continue }
                if segmentsMeet(points[e], points[e + 1], points[f], points[f + 1]) { return true }
            }
        }
        return false
    }

    private static func adjacent(_ e: Int, _ f: Int, edges: Int) -> Bool {
        abs(e - f) == 1 || abs(e - f) == edges - 1
    }

    private static func segmentsMeet(
        _ p1: (x: Double, y: Double), _ p2: (x: Double, y: Double), _ q1: (x: Double, y: Double),
        _ q2: (x: Double, y: Double)
    ) -> Bool {
        func orientation(_ a: (x: Double, y: Double), _ b: (x: Double, y: Double), _ c: (x: Double, y: Double))
            -> Int
        {
            let cross = (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x)
            return cross > 0 ? 1 : cross < 0 ? -1 : 0
        }
        func onSegment(_ a: (x: Double, y: Double), _ b: (x: Double, y: Double), _ c: (x: Double, y: Double))
            -> Bool
        {
            min(a.x, b.x) <= c.x && c.x <= max(a.x, b.x) && min(a.y, b.y) <= c.y && c.y <= max(a.y, b.y)
        }
        let o1 = orientation(p1, p2, q1), o2 = orientation(p1, p2, q2)
        let o3 = orientation(q1, q2, p1), o4 = orientation(q1, q2, p2)
        if o1 != o2 && o3 != o4 && o1 != 0 && o2 != 0 && o3 != 0 && o4 != 0 { return true }
        if o1 == 0 && onSegment(p1, p2, q1) { return true }
        if o2 == 0 && onSegment(p1, p2, q2) { return true }
        if o3 == 0 && onSegment(q1, q2, p1) { return true }
        if o4 == 0 && onSegment(q1, q2, p2) { return true }
        return false
    }
}
