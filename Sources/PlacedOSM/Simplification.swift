import PlacedCore

/// Douglas–Peucker simplification for display: drops the vertices that lie within `tolerance`
/// metres of the line through their kept neighbours, on a local east/north plane.
enum Simplification {
    /// The map layer's tolerance: about a metre, below what a map of a few hundred metres shows.
    static let mapTolerance = 1.0

    /// A line with its two ends kept.
    static func line(_ points: [Coordinate], tolerance: Double = mapTolerance) -> [Coordinate] {
        guard points.count > 2 else { return points }
        return withPlane(points) { plane, keep in
            mark(plane, 0, points.count - 1, tolerance * tolerance, keep)
            return kept(points, keep)
        }
    }

    /// A closed ring (first == last), kept closed with at least three corners: split at the vertex
    /// farthest from the first, each half simplified as a line. A ring the tolerance would flatten
    /// is returned as it was.
    static func ring(_ ring: [Coordinate], tolerance: Double = mapTolerance) -> [Coordinate] {
        guard ring.count > 4 else { return ring }
        return withPlane(ring) { plane, keep in
            var farthest = 1
            var farthestDistance = -1.0
            for index in 1..<(ring.count - 1) {
                let d = squared(plane[index].x - plane[0].x, plane[index].y - plane[0].y)
                if d > farthestDistance { (farthest, farthestDistance) = (index, d) }
            }
            mark(plane, 0, farthest, tolerance * tolerance, keep)
            mark(plane, farthest, ring.count - 1, tolerance * tolerance, keep)
            let simplified = kept(ring, keep)
            return simplified.count >= 4 ? simplified : ring
        }
    }

    /// `points` on the local plane of the first, and a mark per vertex (all false), in temporary
    /// buffers: simplification runs for every street and outline an import keeps.
    private static func withPlane(
        _ points: [Coordinate],
        _ body: (UnsafeMutableBufferPointer<(x: Double, y: Double)>, UnsafeMutableBufferPointer<Bool>) -> [Coordinate]
    ) -> [Coordinate] {
        let projection = LocalProjection(origin: points[0])
        return withUnsafeTemporaryAllocation(of: (x: Double, y: Double).self, capacity: points.count) { plane in
            for (index, point) in points.enumerated() {
                plane.initializeElement(at: index, to: projection.project(point))
            }
            return withUnsafeTemporaryAllocation(of: Bool.self, capacity: points.count) { keep in
                keep.initialize(repeating: false)
                return body(plane, keep)
            }
        }
    }

    private static func kept(_ points: [Coordinate], _ keep: UnsafeMutableBufferPointer<Bool>) -> [Coordinate] {
        var count = 0
        for index in points.indices where keep[index] { count += 1 }
        var kept: [Coordinate] = []
        kept.reserveCapacity(count)
        for index in points.indices where keep[index] { kept.append(points[index]) }
        return kept
    }

    /// Marks the vertices of `first...last` that the simplified line keeps (both ends included).
    /// An explicit stack instead of recursion: a coastline has hundreds of thousands of vertices.
    private static func mark(
        _ plane: UnsafeMutableBufferPointer<(x: Double, y: Double)>, _ first: Int, _ last: Int,
        _ toleranceSquared: Double, _ keep: UnsafeMutableBufferPointer<Bool>
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
