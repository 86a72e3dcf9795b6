import PlacedCore

/// Plane geometry of OSM ways and areas for place extents: bounds, area, and a point inside.
public enum Shape {
    /// The smallest box holding every point; nil for no points.
    public static func bounds(of points: [Coordinate]) -> BoundingBox? {
        points.isEmpty ? nil : BoundingBox(enclosing: points)
    }

    /// Area in square metres of a ring (closed or not): the shoelace formula on a local east/north
    /// plane around the ring's centre, exact to well under a percent for anything a place can be.
    /// `bounds`: the ring's, when the caller has them already.
    public static func area(ofRing ring: [Coordinate], bounds: BoundingBox? = nil) -> Double {
        guard ring.count >= 3, let box = bounds ?? Self.bounds(of: ring) else { return 0 }
        let projection = LocalProjection(origin: box.center)
        var twiceArea = 0.0
        var previous = projection.project(ring[ring.count - 1])
        for point in ring {
            let current = projection.project(point)
            twiceArea += previous.x * current.y - current.x * previous.y
            previous = current
        }
        return abs(twiceArea) / 2
    }

    /// A point strictly inside a ring (closed or not), also for concave shapes where the centroid
    /// lies outside: the midpoint of the widest interval where a horizontal line crosses the ring.
    /// The line runs halfway between the two vertex latitudes nearest the ring's middle latitude,
    /// so it passes through no vertex (the scheme of GEOS's InteriorPointArea). A horizontal line is
    /// horizontal on any east/north plane too, so degrees serve as well as metres. Nil for a ring
    /// with no interior (fewer than 3 points, or all at one latitude). `bounds` as for `area`.
    public static func pointOnSurface(ofRing ring: [Coordinate], bounds: BoundingBox? = nil) -> Coordinate? {
        guard ring.count >= 3, let box = bounds ?? Self.bounds(of: ring) else { return nil }
        return pointOnSurface(ofPolygon: [ring], bounds: box)
    }

    /// A point inside a polygon with holes (outer ring first): as for one ring, with the crossings of
    /// every ring, so the widest interval lies inside the outer ring and outside every hole.
    /// `bounds`: the outer ring's.
    public static func pointOnSurface(ofPolygon rings: [[Coordinate]], bounds box: BoundingBox) -> Coordinate? {
        let middle = box.center.latitude
        var below = box.minLatitude
        var above = box.maxLatitude
        for ring in rings {
            for point in ring {
                if point.latitude <= middle {
                    below = max(below, point.latitude)
                } else {
                    above = min(above, point.latitude)
                }
            }
        }
        guard above > below else { return nil }
        let scanLatitude = (below + above) / 2

        var crossings: [Double] = []
        for ring in rings where ring.count >= 3 {
            var previous = ring[ring.count - 1]
            for point in ring {
                if (previous.latitude < scanLatitude) != (point.latitude < scanLatitude) {
                    let t = (scanLatitude - previous.latitude) / (point.latitude - previous.latitude)
                    crossings.append(previous.longitude + t * (point.longitude - previous.longitude))
                }
                previous = point
            }
        }
        crossings.sort()
        var best: (west: Double, east: Double)?
        for index in stride(from: 0, to: crossings.count - 1, by: 2) {
            let interval = (west: crossings[index], east: crossings[index + 1])
            if interval.east - interval.west > (best.map { $0.east - $0.west } ?? -1) { best = interval }
        }
        guard let best else { return nil }
        return Coordinate(latitude: scanLatitude, longitude: (best.west + best.east) / 2)
    }

    /// Area in square metres of polygons (outer ring, then holes): outer rings less their holes.
    public static func area(ofPolygons polygons: [[[Coordinate]]]) -> Double {
        polygons.reduce(0) { total, rings in
            total
                + rings.enumerated().reduce(0) { sum, ring in
                    sum + (ring.offset == 0 ? 1 : -1) * area(ofRing: ring.element)
                }
        }
    }
}

extension BoundingBox {
    /// The box's middle (not a point of any shape: see `Shape.pointOnSurface`).
    var center: Coordinate {
        Coordinate(
            latitude: (minLatitude + maxLatitude) / 2, longitude: (minLongitude + maxLongitude) / 2)
    }
}
