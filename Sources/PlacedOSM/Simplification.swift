import PlacedCore

/// Douglas–Peucker simplification for display: drops the vertices that lie within `tolerance`
/// metres of the line through their kept neighbours, on a local east/north plane.
enum Simplification {
    /// The map layer's tolerance: about a metre, below what a map of a few hundred metres shows.
    static let mapTolerance = 1.0

    /// A line with its two ends kept.
    static func line(_ points: [Coordinate], tolerance: Double = mapTolerance) -> [Coordinate] {
        guard points.count > 2 else { return points }
        let projection = LocalProjection(origin: points[0])
        let plane = points.map(projection.project)
        var keep = [Bool](repeating: false, count: points.count)
        mark(plane, 0, points.count - 1, tolerance * tolerance, &keep)
        return points.indices.filter { keep[$0] }.map { points[$0] }
    }

    /// A closed ring (first == last), kept closed with at least three corners: split at the vertex
    /// farthest from the first, each half simplified as a line. A ring the tolerance would flatten
    /// is returned as it was.
    static func ring(_ ring: [Coordinate], tolerance: Double = mapTolerance) -> [Coordinate] {
        guard ring.count > 4 else { return ring }
        let projection = LocalProjection(origin: ring[0])
        let plane = ring.map(projection.project)
        var farthest = 1
        var farthestDistance = -1.0
        for index in 1..<(ring.count - 1) {
            let d = squared(plane[index].x - plane[0].x, plane[index].y - plane[0].y)
            if d > farthestDistance { (farthest, farthestDistance) = (index, d) }
        }
        var keep = [Bool](repeating: false, count: ring.count)
        mark(plane, 0, farthest, tolerance * tolerance, &keep)
        mark(plane, farthest, ring.count - 1, tolerance * tolerance, &keep)
        let simplified = ring.indices.filter { keep[$0] }.map { ring[$0] }
        return simplified.count >= 4 ? simplified : ring
    }

    /// Marks the vertices of `first...last` that the simplified line keeps (both ends included).
    /// An explicit stack instead of recursion: a coastline has hundreds of thousands of vertices.
    private static func mark(
        _ plane: [(x: Double, y: Double)], _ first: Int, _ last: Int, _ toleranceSquared: Double,
        _ keep: inout [Bool]
    ) {
        keep[first] = true
        keep[last] = true
        var stack = [(first, last)]
        while let (a, b) = stack.popLast() {
            guard b > a + 1 else { continue }
            var farthest = a
            var farthestDistance = -1.0
            for index in (a + 1)..<b {
                let d = squaredDistance(plane[index], toSegment: plane[a], plane[b])
                if d > farthestDistance { (farthest, farthestDistance) = (index, d) }
            }
            if farthestDistance > toleranceSquared {
                keep[farthest] = true
                stack.append((a, farthest))
                stack.append((farthest, b))
            }
        }
    }

    static func squaredDistance(
        _ p: (x: Double, y: Double), toSegment a: (x: Double, y: Double), _ b: (x: Double, y: Double)
    ) -> Double {
        let dx = b.x - a.x
        let dy = b.y - a.y
        let lengthSquared = dx * dx + dy * dy
        let t = lengthSquared > 0 ? min(1, max(0, ((p.x - a.x) * dx + (p.y - a.y) * dy) / lengthSquared)) : 0
        return squared(a.x + t * dx - p.x, a.y + t * dy - p.y)
    }

    private static func squared(_ x: Double, _ y: Double) -> Double { x * x + y * y }
}
