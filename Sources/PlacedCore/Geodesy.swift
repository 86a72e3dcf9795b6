#if canImport(Glibc)
    import Glibc  // libm only: sin, cos, atan2. The core touches no other C.
#elseif canImport(Darwin)
    import Darwin
#endif

/// A position on the WGS-84 ellipsoid, in degrees.
public struct Coordinate: Hashable, Sendable, CustomStringConvertible {
    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// Finite, latitude within ±90° and longitude within ±180°.
    public var isValid: Bool {
        latitude.isFinite && longitude.isFinite && abs(latitude) <= 90 && abs(longitude) <= 180
    }

    public var description: String {
        "\(latitude.formatted(decimals: 6)),\(longitude.formatted(decimals: 6))"
    }
}

/// Distances and bearings on the WGS-84 ellipsoid.
///
/// `distance` is Vincenty's inverse solution: sub-millimetre agreement with the exact geodesic for
/// the short lines this daemon measures, and still robust across the antimeridian and at the poles.
/// Nearly antipodal points, where Vincenty may not converge, fall back to the spherical great circle
/// scaled to the ellipsoid's mean radius — irrelevant for a 50 m filter, but never a hang or a NaN.
public enum Geodesy {
    public static let semiMajorAxis = 6_378_137.0
    public static let flattening = 1 / 298.257_223_563
    public static let semiMinorAxis = semiMajorAxis * (1 - flattening)
    /// IUGG mean radius R1 = (2a + b) / 3.
    public static let meanRadius = (2 * semiMajorAxis + semiMinorAxis) / 3

    /// Geodesic distance in metres.
    public static func distance(_ a: Coordinate, _ b: Coordinate) -> Double {
        inverse(a, b).distance
    }

    /// Distance and initial bearing of the geodesic from `a` to `b`.
    public static func inverse(_ a: Coordinate, _ b: Coordinate) -> (distance: Double, initialBearing: Double) {
        if a == b { return (0, 0) }
        let f = flattening
        let L = normalizedLongitudeDelta(b.longitude - a.longitude).radians
        let U1 = atan((1 - f) * tan(a.latitude.radians))
        let U2 = atan((1 - f) * tan(b.latitude.radians))
        let sinU1 = sin(U1), cosU1 = cos(U1), sinU2 = sin(U2), cosU2 = cos(U2)

        var lambda = L
        for _ in 0..<200 {
            let sinLambda = sin(lambda), cosLambda = cos(lambda)
            let sinSigma =
                ((cosU2 * sinLambda) * (cosU2 * sinLambda)
                + (cosU1 * sinU2 - sinU1 * cosU2 * cosLambda) * (cosU1 * sinU2 - sinU1 * cosU2 * cosLambda))
                .squareRoot()
            if sinSigma == 0 { return (0, 0) }  // coincident points
            let cosSigma = sinU1 * sinU2 + cosU1 * cosU2 * cosLambda
            let sigma = atan2(sinSigma, cosSigma)
            let sinAlpha = cosU1 * cosU2 * sinLambda / sinSigma
            let cosSqAlpha = 1 - sinAlpha * sinAlpha
            // On the equator cosSqAlpha is 0 and the term vanishes.
            let cos2SigmaM = cosSqAlpha != 0 ? cosSigma - 2 * sinU1 * sinU2 / cosSqAlpha : 0
            let C = f / 16 * cosSqAlpha * (4 + f * (4 - 3 * cosSqAlpha))
            let previous = lambda
            lambda =
                L + (1 - C) * f * sinAlpha
                * (sigma + C * sinSigma * (cos2SigmaM + C * cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)))
            if abs(lambda - previous) < 1e-12 {
                let a2 = semiMajorAxis * semiMajorAxis, b2 = semiMinorAxis * semiMinorAxis
                let uSq = cosSqAlpha * (a2 - b2) / b2
                let A = 1 + uSq / 16384 * (4096 + uSq * (-768 + uSq * (320 - 175 * uSq)))
                let B = uSq / 1024 * (256 + uSq * (-128 + uSq * (74 - 47 * uSq)))
                let deltaSigma =
                    B * sinSigma
                    * (cos2SigmaM + B / 4
                        * (cosSigma * (-1 + 2 * cos2SigmaM * cos2SigmaM)
                            - B / 6 * cos2SigmaM * (-3 + 4 * sinSigma * sinSigma)
                            * (-3 + 4 * cos2SigmaM * cos2SigmaM)))
                let distance = semiMinorAxis * A * (sigma - deltaSigma)
                let azimuth = atan2(cosU2 * sin(lambda), cosU1 * sinU2 - sinU1 * cosU2 * cos(lambda))
                return (distance, normalizedBearing(azimuth.degrees))
            }
        }
        return (greatCircleDistance(a, b), greatCircleBearing(from: a, to: b))
    }

    /// Haversine distance on the mean-radius sphere (fallback, and a cheap estimate).
    public static func greatCircleDistance(_ a: Coordinate, _ b: Coordinate) -> Double {
        let phi1 = a.latitude.radians, phi2 = b.latitude.radians
        let dPhi = phi2 - phi1
        let dLambda = normalizedLongitudeDelta(b.longitude - a.longitude).radians
        let h = sin(dPhi / 2) * sin(dPhi / 2) + cos(phi1) * cos(phi2) * sin(dLambda / 2) * sin(dLambda / 2)
        return 2 * meanRadius * asin(min(1, h.squareRoot()))
    }

    static func greatCircleBearing(from a: Coordinate, to b: Coordinate) -> Double {
        let phi1 = a.latitude.radians, phi2 = b.latitude.radians
        let dLambda = normalizedLongitudeDelta(b.longitude - a.longitude).radians
        let y = sin(dLambda) * cos(phi2)
        let x = cos(phi1) * sin(phi2) - sin(phi1) * cos(phi2) * cos(dLambda)
        return normalizedBearing(atan2(y, x).degrees)
    }

    /// Longitude difference folded into (-180, 180], so lines across the antimeridian stay short.
    public static func normalizedLongitudeDelta(_ delta: Double) -> Double {
        // Most deltas are already folded (two places' or a ring's points near each other): no fmod,
        // which would return them unchanged.
        if delta > -180, delta <= 180 { return delta }
        var d = delta.truncatingRemainder(dividingBy: 360)
        if d > 180 { d -= 360 } else if d <= -180 { d += 360 }
        return d
    }

    static func normalizedBearing(_ degrees: Double) -> Double {
        let b = degrees.truncatingRemainder(dividingBy: 360)
        return b < 0 ? b + 360 : b
    }
}

/// A local east/north plane in metres around an origin, for the many short distances of a ranking.
///
/// Uses the ellipsoid's meridional and prime-vertical radii at the origin; within a few hundred metres
/// the error against the geodesic is far below GPS noise, at a fraction of Vincenty's cost.
public struct LocalProjection: Sendable {
    public let origin: Coordinate
    public let metresPerDegreeLatitude: Double
    public let metresPerDegreeLongitude: Double

    public init(origin: Coordinate) {
        self.origin = origin
        let e2 = Geodesy.flattening * (2 - Geodesy.flattening)
        let phi = origin.latitude.radians
        let w = (1 - e2 * sin(phi) * sin(phi)).squareRoot()
        let meridional = Geodesy.semiMajorAxis * (1 - e2) / (w * w * w)
        let primeVertical = Geodesy.semiMajorAxis / w
        metresPerDegreeLatitude = meridional * .pi / 180
        metresPerDegreeLongitude = primeVertical * cos(phi) * .pi / 180
    }

    /// (east, north) in metres from the origin.
    @inline(__always)
    public func project(_ c: Coordinate) -> (x: Double, y: Double) {
        (
            Geodesy.normalizedLongitudeDelta(c.longitude - origin.longitude) * metresPerDegreeLongitude,
            (c.latitude - origin.latitude) * metresPerDegreeLatitude
        )
    }

    /// The point `east` and `north` metres from the origin: `project` undone (longitudes unwrapped).
    public func coordinate(east: Double, north: Double) -> Coordinate {
        Coordinate(
            latitude: origin.latitude + north / metresPerDegreeLatitude,
            longitude: origin.longitude + east / metresPerDegreeLongitude)
    }

    @inline(__always)
    public func distance(to c: Coordinate) -> Double {
        let p = project(c)
        return (p.x * p.x + p.y * p.y).squareRoot()
    }
}

extension Double {
    @inline(__always) var radians: Double { self * .pi / 180 }
    @inline(__always) var degrees: Double { self * 180 / .pi }
}
