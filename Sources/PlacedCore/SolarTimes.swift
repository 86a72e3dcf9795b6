// Sunrise, sunset, dawn and dusk: NOAA's solar position algorithm (Meeus, "Astronomical Algorithms",
// ch. 25, as in NOAA's solar calculator), good to about a minute between ±72° latitude.
#if canImport(Glibc)
    import Glibc  // libm only: sin, cos, tan, asin, acos.
#elseif canImport(Darwin)
    import Darwin
#endif

public enum SolarEvent: Sendable, Equatable {
    /// Civil dawn: the sun's centre 6° below the horizon, rising.
    case dawn
    /// The sun's upper limb on the horizon, with standard refraction (centre 0.833° below).
    case sunrise
    case sunset
    /// Civil dusk: 6° below, setting.
    case dusk

    var isRising: Bool { self == .dawn || self == .sunrise }
    /// The sun's centre below the horizon at the event, in degrees.
    var depression: Double { self == .dawn || self == .dusk ? 6 : 0.833 }
}

public enum SolarTimes {
    public enum Occurrence: Equatable, Sendable {
        /// Seconds after the date's midnight UTC (negative or past 86,400 when it falls on a neighbour).
        case at(secondsAfterMidnightUTC: Double)
        /// The sun stays above that altitude all day (polar day, or white nights for dusk).
        case sunAlwaysAbove
        /// The sun stays below it all day (polar night).
        case sunAlwaysBelow
    }

    /// When `event` happens on `date` at `coordinate`.
    public static func occurrence(_ event: SolarEvent, on date: CivilDate, at coordinate: Coordinate) -> Occurrence {
        // Two passes: the sun's position at local noon, then at the first estimate of the event.
        var minutes = 720 - 4 * coordinate.longitude
        for _ in 0..<2 {
            let julianCentury = (Double(date.daysSinceEpoch) + 2_440_587.5 + minutes / 1440 - 2_451_545) / 36525
            let (declination, equationOfTime) = sunPosition(julianCentury: julianCentury)
            let latitude = coordinate.latitude * .pi / 180
            let zenith = (90 + event.depression) * .pi / 180
            let cosHourAngle =
                cos(zenith) / (cos(latitude) * cos(declination)) - tan(latitude) * tan(declination)
            if cosHourAngle > 1 { return .sunAlwaysBelow }
            if cosHourAngle < -1 { return .sunAlwaysAbove }
            let hourAngle = acos(cosHourAngle) * 180 / .pi * (event.isRising ? 1 : -1)
            minutes = 720 - 4 * (coordinate.longitude + hourAngle) - equationOfTime
        }
        return .at(secondsAfterMidnightUTC: minutes * 60)
    }

    /// The sun's declination (radians) and the equation of time (minutes).
    private static func sunPosition(julianCentury t: Double) -> (Double, Double) {
        let radians = Double.pi / 180
        let meanLongitude = (280.466_46 + t * (36000.769_83 + t * 0.000_303_2)).truncatingRemainder(dividingBy: 360)
        let meanAnomaly = 357.529_11 + t * (35999.050_29 - 0.000_153_7 * t)
        let eccentricity = 0.016_708_634 - t * (0.000_042_037 + 0.000_000_126_7 * t)
        let m = meanAnomaly * radians
        let centre =
            sin(m) * (1.914_602 - t * (0.004_817 + 0.000_014 * t)) + sin(2 * m) * (0.019_993 - 0.000_101 * t)
            + sin(3 * m) * 0.000_289
        let omega = (125.04 - 1934.136 * t) * radians
        let apparentLongitude = (meanLongitude + centre - 0.005_69 - 0.004_78 * sin(omega)) * radians
        let meanObliquity = 23 + (26 + (21.448 - t * (46.815 + t * (0.000_59 - t * 0.001_813))) / 60) / 60
        let obliquity = (meanObliquity + 0.002_56 * cos(omega)) * radians
        let declination = asin(sin(obliquity) * sin(apparentLongitude))
        let y = tan(obliquity / 2) * tan(obliquity / 2)
        let l0 = meanLongitude * radians
        let equationOfTime =
            y * sin(2 * l0) - 2 * eccentricity * sin(m) + 4 * eccentricity * y * sin(m) * cos(2 * l0)
            - 0.5 * y * y * sin(4 * l0) - 1.25 * eccentricity * eccentricity * sin(2 * m)
        return (declination, 4 * equationOfTime / radians)
    }
}
