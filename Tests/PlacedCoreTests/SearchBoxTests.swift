import PlacedCore
import Testing

/// The box a search by degrees asks for around a circle: its arcs at the antimeridian, every longitude
/// at a pole, latitudes within ±90.
@Suite struct SearchBoxTests {
    static func arcs(_ box: SearchBox) -> [[Double]] {
        var arcs: [[Double]] = []
        box.forEachArc { arcs.append([$0, $1]) }
        return arcs
    }

    @Test func aCircleAwayFromTheEdgesIsOneArc() {
        let projection = LocalProjection(origin: Coordinate(latitude: 60.17, longitude: 24.94))
        let box = SearchBox(radius: 250, around: projection)
        let corner = projection.coordinate(east: 250, north: 250)
        #expect(box.maxLatitude >= corner.latitude && box.maxLatitude - corner.latitude < 1e-9)
        #expect(box.east >= corner.longitude && box.east - corner.longitude < 1e-9)
        #expect(Self.arcs(box).count == 1)
        #expect(Self.arcs(box)[0] == [box.west, box.east] && box.west < 24.94 && box.east > 24.94)
    }

    @Test func aCircleAcrossTheAntimeridianIsTwoArcs() {
        let east = SearchBox(
            radius: 1_000, around: LocalProjection(origin: Coordinate(latitude: 0, longitude: 179.999)))
        let eastArcs = Self.arcs(east)
        #expect(eastArcs.count == 2)
        #expect(eastArcs[0][0] < 179.999 && eastArcs[0][1] == 180)
        #expect(eastArcs[1][0] == -180 && eastArcs[1][1] > -180 && eastArcs[1][1] < -179.99)
        let west = SearchBox(radius: 1_000, around: LocalProjection(origin: Coordinate(latitude: 0, longitude: -180)))
        let westArcs = Self.arcs(west)
        #expect(westArcs.count == 2 && westArcs[0][0] == -180 && westArcs[1][1] == 180)
    }

    /// At a pole a degree of longitude is about 7e-12 m: the box must not become ±1e13 degrees, which
    /// the map layer's whole 1e-7 degrees overflowed (a trap) and the address grid's columns counted
    /// one by one (an import that never ended).
    @Test(arguments: [90.0, -90.0, 89.999_999_9, -89.999_99])
    func atAPoleEveryLongitudeAndNoLatitudeBeyond(latitude: Double) {
        let box = SearchBox(radius: 100, around: LocalProjection(origin: Coordinate(latitude: latitude, longitude: 10)))
        #expect(Self.arcs(box) == [[-180, 180]])
        #expect(box.minLatitude >= -90 && box.maxLatitude <= 90)
        #expect(box.maxLatitude - box.minLatitude <= 2 * 100 / 110_000)
    }
}
