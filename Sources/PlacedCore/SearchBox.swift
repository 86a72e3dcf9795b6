/// The latitudes and longitudes within `radius` metres of a centre, as a search by box asks for them:
/// a latitude range and one or two longitude arcs within ±180° (the second empty, `otherWest` above
/// `otherEast`, unless the circle reaches across the antimeridian). Every longitude when a degree of
/// longitude is too short to bound the circle by (at or near a pole, where a few metres are trillions
/// of degrees and a box of them overflows whatever stores it).
public struct SearchBox: Sendable, Equatable {
    public var minLatitude, maxLatitude, west, east, otherWest, otherEast: Double

    /// The box holds the whole disc: |north| <= d and |east| <= d for any point at distance d. The
    /// slack absorbs the rounding of dividing back into degrees.
    @inlinable
    public init(
        radius: Double, around center: Coordinate, metresPerDegreeLatitude: Double, metresPerDegreeLongitude: Double
    ) {
        let slack = 1 + 1e-9
        let dLat = radius / metresPerDegreeLatitude * slack
        let dLon = radius / metresPerDegreeLongitude * slack
        minLatitude = max(center.latitude - dLat, -90)
        maxLatitude = min(center.latitude + dLat, 90)
        (west, east) = (center.longitude - dLon, center.longitude + dLon)
        (otherWest, otherEast) = (.infinity, -.infinity)
        if !(dLon < 180) {  // also NaN or infinite, at a pole: every longitude
            (west, east) = (-180, 180)
        } else if west <= -180 {  // reaches the antimeridian: a second arc on the far side
            // (Reaching it exactly counts: 180 and -180 are one meridian, stored either way.)
            (otherWest, otherEast) = (west + 360, 180)
            west = -180
        } else if east >= 180 {
            (otherWest, otherEast) = (-180, east - 360)
            east = 180
        }
    }

    @inlinable
    public init(radius: Double, around projection: LocalProjection) {
        self.init(
            radius: radius, around: projection.origin, metresPerDegreeLatitude: projection.metresPerDegreeLatitude,
            metresPerDegreeLongitude: projection.metresPerDegreeLongitude)
    }

    /// Calls `body` with each longitude arc, west to east: one, or two across the antimeridian.
    @inlinable
    public func forEachArc(_ body: (_ west: Double, _ east: Double) throws -> Void) rethrows {
        try body(west, east)
        if otherWest <= otherEast { try body(otherWest, otherEast) }
    }
}
