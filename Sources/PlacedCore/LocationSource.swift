/// What the location source is doing, as clients see it (`SourceState` on D-Bus, `Status` on varlink).
public enum SourceState: String, Sendable, Equatable {
    /// Connecting, or waiting to reconnect, to gpsd.
    case connecting
    /// Connected, but gpsd reports no usable fix.
    case noFix = "no-fix"
    /// Fixes are arriving.
    case fix
    /// gpsd went away or silent; the last location and ranking are kept but old.
    case stale
    /// A configured position (kiosks without GPS).
    case `static`
}

/// One TPV report as gpsd sent it, before any judgement: NaN where gpsd said nothing.
public struct TPVReport: Sendable, Equatable {
    public var time: Double?
    /// gpsd mode: 0 not seen, 1 no fix, 2 2D, 3 3D.
    public var mode: Int
    public var latitude: Double
    public var longitude: Double
    /// 95 % horizontal error radius, metres.
    public var eph: Double
    public var altitude: Double
    public var speed: Double
    public var track: Double

    public init(
        time: Double?, mode: Int, latitude: Double, longitude: Double, eph: Double = .nan,
        altitude: Double = .nan, speed: Double = .nan, track: Double = .nan
    ) {
        self.time = time
        self.mode = mode
        self.latitude = latitude
        self.longitude = longitude
        self.eph = eph
        self.altitude = altitude
        self.speed = speed
        self.track = track
    }
}

/// Decides which TPV reports become fixes, before any other work (the gate of gpsd's gpxlogger):
/// mode 2D or better, finite in-range latitude and longitude, and one fix per epoch — gpsd sends a TPV
/// for each sentence of an epoch (RMC, GGA, GSA...), all with the same time.
public struct FixGate: Sendable {
    private var lastTime: Double?

    public init() {}

    public mutating func admit(_ report: TPVReport, receivedAt: UInt64) -> Fix? {
        guard report.mode >= FixMode.twoD.rawValue else { return nil }
        let coordinate = Coordinate(latitude: report.latitude, longitude: report.longitude)
        guard coordinate.isValid else { return nil }
        if let time = report.time {
            if time == lastTime { return nil }
            lastTime = time
        }
        return Fix(
            time: report.time, receivedAt: receivedAt, coordinate: coordinate,
            mode: report.mode >= 3 ? .threeD : .twoD,
            accuracy: report.eph.finiteNonNegative.map(Fix.sigma(fromEPH:)),
            altitude: report.altitude.isFinite ? report.altitude : nil,
            speed: report.speed.finiteNonNegative,
            heading: report.track.isFinite ? report.track : nil)
    }

    /// After a reconnect gpsd may replay the current epoch; that is not a new fix either.
    public mutating func reset() { lastTime = nil }
}

/// Capped exponential backoff for reconnecting: 0.25 s, 0.5 s, 1 s ... up to `maximum`.
public struct Backoff: Sendable, Equatable {
    public let initial: UInt64
    public let maximum: UInt64
    public private(set) var current: UInt64

    /// Microseconds.
    public init(initial: UInt64 = 250_000, maximum: UInt64 = 30_000_000) {
        self.initial = max(1, initial)
        self.maximum = max(self.initial, maximum)
        current = self.initial
    }

    /// The delay to wait now; the next one doubles, up to the cap.
    public mutating func next() -> UInt64 {
        let delay = current
        current = min(maximum, current.multipliedReportingOverflow(by: 2).partialValue)
        return delay
    }

    public mutating func reset() { current = initial }
}

extension Double {
    var finiteNonNegative: Double? { isFinite && self >= 0 ? self : nil }
}
