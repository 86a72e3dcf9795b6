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
        guard Self.isUsable(report) else { return nil }
        let coordinate = Coordinate(latitude: report.latitude, longitude: report.longitude)
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

    /// The source's state changed: anything but fixes arriving (a reconnect, a lost fix) starts a new
    /// run of epochs.
    public mutating func sourceChanged(to state: SourceState) {
        if state != .fix { reset() }
    }

    /// A report that says where the device is: a 2D or 3D fix at a valid coordinate. (Whether it is
    /// a new epoch is the gate's to judge.)
    public static func isUsable(_ report: TPVReport) -> Bool {
        report.mode >= FixMode.twoD.rawValue
            && Coordinate(latitude: report.latitude, longitude: report.longitude).isValid
    }
}

extension Double {
    var finiteNonNegative: Double? { isFinite && self >= 0 ? self : nil }
}
