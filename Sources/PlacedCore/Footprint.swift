/// Distance from a position to the ground a place covers, in a local plane centred on the position.
///
/// An area is measured against its outer ring (0 anywhere inside it); an area without a ring against
/// its bounding box; a point, or an open way, against its coordinate. The plane is `LocalProjection`:
/// within the few hundred metres of a ranking its error is centimetres, far below GPS noise.
extension Place {
    /// Metres from `projection.origin` to this place's footprint; 0 inside an area.
    public func footprintDistance(from projection: LocalProjection) -> Double {
        if area > 0, let outline, outline.count >= 4 {
            return Footprint.distanceFromOrigin(toRing: outline, in: projection)
        }
        if area > 0, let bounds {
            return Footprint.distanceFromOrigin(to: bounds, in: projection)
        }
        return projection.distance(to: coordinate)
    }

    /// Metres from `projection.origin` to the bounding box, or to the coordinate for a point: never more
    /// than `footprintDistance`, and cheap, so it rules out far places before their outline is read.
    @inline(__always)
    public func lowerBoundDistance(from projection: LocalProjection) -> Double {
        if area > 0, let bounds { return Footprint.distanceFromOrigin(to: bounds, in: projection) }
        return projection.distance(to: coordinate)
    }
}

public enum Footprint {
    /// The same over a ring stored as little-endian (latitude, longitude) float64 pairs, read in place:
    /// the mapped places file's outlines. Bit for bit the result of `distanceFromOrigin(toRing:in:)`.
    public static func distanceFromOrigin(toStoredRing bytes: UnsafeRawBufferPointer, in projection: LocalProjection)
        -> Double
    {
        let count = bytes.count / 16
        @inline(__always) func corner(_ i: Int) -> Coordinate {
            Coordinate(
                latitude: Double(
                    bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 16 * i, as: UInt64.self))),
                longitude: Double(
                    bitPattern: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 16 * i + 8, as: UInt64.self))))
        }
        var inside = false
        var nearestSquared = Double.infinity
        var a = projection.project(corner(0))
        for index in 1..<count {
            let b = projection.project(corner(index))
            if (a.y > 0) != (b.y > 0) {
                let crossingX = a.x + (0 - a.y) * (b.x - a.x) / (b.y - a.y)
                if crossingX > 0 { inside.toggle() }
            }
            nearestSquared = min(nearestSquared, squaredDistanceFromOrigin(toSegment: a, b))
            a = b
        }
        return inside ? 0 : nearestSquared.squareRoot()
    }

    /// Distance from the projection's origin to a closed ring: 0 inside (even–odd rule), else to the
    /// nearest edge.
    static func distanceFromOrigin(toRing ring: [Coordinate], in projection: LocalProjection)
        -> Double
    {
        var inside = false
        var nearestSquared = Double.infinity
        var a = projection.project(ring[0])
        for index in 1..<ring.count {
            let b = projection.project(ring[index])
            // Even–odd crossing test of the ray from the origin towards +x.
            if (a.y > 0) != (b.y > 0) {
                let crossingX = a.x + (0 - a.y) * (b.x - a.x) / (b.y - a.y)
                if crossingX > 0 { inside.toggle() }
            }
            nearestSquared = min(nearestSquared, squaredDistanceFromOrigin(toSegment: a, b))
            a = b
        }
        return inside ? 0 : nearestSquared.squareRoot()
    }

    /// Distance from the origin to the segment a–b, squared.
    @inline(__always)
    static func squaredDistanceFromOrigin(
        toSegment a: (x: Double, y: Double), _ b: (x: Double, y: Double)
    ) -> Double {
        let dx = b.x - a.x
        let dy = b.y - a.y
        let lengthSquared = dx * dx + dy * dy
        // Parameter of the origin's foot on the line, clamped to the segment; a degenerate segment is a point.
        let t = lengthSquared > 0 ? min(1, max(0, -(a.x * dx + a.y * dy) / lengthSquared)) : 0
        let px = a.x + t * dx
        let py = a.y + t * dy
        return px * px + py * py
    }

    /// Distance from the origin to a bounding box: 0 inside.
    @inline(__always)
    public static func distanceFromOrigin(to box: BoundingBox, in projection: LocalProjection) -> Double {
        let low = projection.project(Coordinate(latitude: box.minLatitude, longitude: box.minLongitude))
        let high = projection.project(
            Coordinate(latitude: box.maxLatitude, longitude: box.maxLongitude))
        let dx = max(low.x, 0, -high.x)
        let dy = max(low.y, 0, -high.y)
        return (dx * dx + dy * dy).squareRoot()
    }
}
