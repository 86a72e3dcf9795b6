import PlacedCore

/// Assembles a multipolygon relation's member ways into polygons, as osmium's area assembler does:
/// the ways are cut into segments (a segment listed twice cancels out, so a way shared by two rings
/// or listed twice adds nothing), segments are joined end to end into closed rings wherever they
/// meet, not only at way ends, and each ring is an outer or an inner ring by containment (nested
/// depth), not by the role the relation gives it. A ring that touches another at a vertex is split
/// there. Self-intersections are not looked for (osmium rejects those; here they draw as they are).
enum MultipolygonAssembler {
    /// Why a relation makes no area.
    enum Failure: Error, Equatable, CustomStringConvertible {
        /// An end of a ring that meets no other segment, at this location.
        case openRing(at: Coordinate)
        /// No ring with an interior.
        case noRings

        var description: String {
            switch self {
            case .openRing(let at): "a ring does not close (open end at \(at))"
            case .noRings: "no ring with an interior"
            }
        }
    }

    /// Polygons (outer ring then its holes; outer rings counter-clockwise, holes clockwise, each ring
    /// closed) from the member ways' node locations.
    static func assemble(_ ways: [[NodeLocation]]) -> Result<[[[Coordinate]]], Failure> {
        // Segments with their ends in a fixed order, so that the same segment either way round is equal.
        var counts: [Segment: Int] = [:]
        for way in ways {
            for (a, b) in zip(way, way.dropFirst()) where a != b {
                counts[Segment(a, b), default: 0] += 1
            }
        }
        let segments = counts.filter { $0.value % 2 == 1 }.keys.sorted()
        var incident: [Vertex: [Int]] = [:]
        for (number, segment) in segments.enumerated() {
            incident[segment.low, default: []].append(number)
            incident[segment.high, default: []].append(number)
        }
        if let open = incident.filter({ $0.value.count % 2 == 1 }).keys.min() {
            return .failure(.openRing(at: open.coordinate))
        }

        var rings: [[Vertex]] = []
        var used = [Bool](repeating: false, count: segments.count)
        for first in segments.indices where !used[first] {
            used[first] = true
            var path = [segments[first].low, segments[first].high]
            var position: [Vertex: Int] = [path[0]: 0, path[1]: 1]
            while path.count > 1 {
                let current = path[path.count - 1]
                guard let next = incident[current]!.first(where: { !used[$0] }) else {
                    return .failure(.openRing(at: current.coordinate))
                }
                used[next] = true
                let vertex = segments[next].other(than: current)
                if let start = position[vertex] {
                    // Back at a vertex of the path: the loop from there is a ring.
                    rings.append(Array(path[start...]) + [vertex])
                    for cut in path[(start + 1)...] { position[cut] = nil }
                    path.removeSubrange((start + 1)...)
                } else {
                    position[vertex] = path.count
                    path.append(vertex)
                }
            }
        }

        let closed = rings.filter { $0.count >= 4 }.map { $0.map(\.coordinate) }
        let polygons = nest(closed)
        return polygons.isEmpty ? .failure(.noRings) : .success(polygons)
    }

    /// Groups rings into polygons by containment: a ring inside an even number of others is an outer
    /// ring, inside an odd number a hole of the smallest ring around it.
    static func nest(_ rings: [[Coordinate]]) -> [[[Coordinate]]] {
        let areas = rings.map { abs(signedArea($0)) }
        let order = rings.indices.filter { areas[$0] > 0 }.sorted { areas[$0] > areas[$1] }
        let bounds = rings.map { BoundingBox(enclosing: $0) }
        var depth: [Int: Int] = [:]
        var parent: [Int: Int] = [:]
        for (rank, ring) in order.enumerated() {
            // The smallest larger ring that contains this one.
            for container in order[..<rank].reversed()
            where bounds[container].contains(bounds[ring])
                && contains(rings[container], testPoint(of: rings[ring], outside: rings[container]))
            {
                parent[ring] = container
                break
            }
            depth[ring] = parent[ring].map { depth[$0]! + 1 } ?? 0
        }
        var polygons: [[[Coordinate]]] = []
        var polygonOfOuter: [Int: Int] = [:]
        for ring in order where depth[ring]! % 2 == 0 {
            polygonOfOuter[ring] = polygons.count
            polygons.append([oriented(rings[ring], counterClockwise: true)])
        }
        for ring in order where depth[ring]! % 2 == 1 {
            polygons[polygonOfOuter[parent[ring]!]!].append(oriented(rings[ring], counterClockwise: false))
        }
        return polygons
    }

    /// A point of `ring` to test against `other`: a vertex `other` does not share, else the middle of
    /// an edge `other` does not share.
    private static func testPoint(of ring: [Coordinate], outside other: [Coordinate]) -> Coordinate {
        let shared = Set(other)
        if let vertex = ring.first(where: { !shared.contains($0) }) { return vertex }
        for (a, b) in zip(ring, ring.dropFirst()) {
            let middle = Coordinate(latitude: (a.latitude + b.latitude) / 2, longitude: (a.longitude + b.longitude) / 2)
            if !shared.contains(middle) { return middle }
        }
        return ring[0]
    }

    /// Even–odd test in degrees: containment does not depend on the plane for shapes this small.
    static func contains(_ ring: [Coordinate], _ p: Coordinate) -> Bool {
        var inside = false
        for (a, b) in zip(ring, ring.dropFirst())
        where (a.latitude > p.latitude) != (b.latitude > p.latitude) {
            let crossing =
                a.longitude + (p.latitude - a.latitude) * (b.longitude - a.longitude) / (b.latitude - a.latitude)
            if p.longitude < crossing { inside.toggle() }
        }
        return inside
    }

    /// Twice the signed area in square degrees: positive counter-clockwise (east = x, north = y).
    static func signedArea(_ ring: [Coordinate]) -> Double {
        zip(ring, ring.dropFirst()).reduce(0) { sum, edge in
            sum + edge.0.longitude * edge.1.latitude - edge.1.longitude * edge.0.latitude
        }
    }

    private static func oriented(_ ring: [Coordinate], counterClockwise: Bool) -> [Coordinate] {
        (signedArea(ring) > 0) == counterClockwise ? ring : ring.reversed()
    }

    /// A node location as a dictionary key, ordered by latitude then longitude.
    struct Vertex: Hashable, Comparable {
        let latitude: Int32
        let longitude: Int32

        init(_ location: NodeLocation) {
            latitude = location.latitude
            longitude = location.longitude
        }

        var coordinate: Coordinate { NodeLocation(latitude: latitude, longitude: longitude).coordinate }

        static func < (a: Vertex, b: Vertex) -> Bool {
            (a.latitude, a.longitude) < (b.latitude, b.longitude)
        }
    }

    struct Segment: Hashable, Comparable {
        let low: Vertex
        let high: Vertex

        init(_ a: NodeLocation, _ b: NodeLocation) {
            let (u, v) = (Vertex(a), Vertex(b))
            (low, high) = u < v ? (u, v) : (v, u)
        }

        func other(than vertex: Vertex) -> Vertex { vertex == low ? high : low }

        static func < (a: Segment, b: Segment) -> Bool { (a.low, a.high) < (b.low, b.high) }
    }
}

extension BoundingBox {
    /// Whether `other` lies within this box (edges included).
    func contains(_ other: BoundingBox) -> Bool {
        other.minLatitude >= minLatitude && other.maxLatitude <= maxLatitude && other.minLongitude >= minLongitude
            && other.maxLongitude <= maxLongitude
    }
}
