/// How good a position is, as gpsd reports it.
public enum FixMode: Int, Sendable, Comparable {
    case noFix = 1
    case twoD = 2
    case threeD = 3

    public static func < (a: FixMode, b: FixMode) -> Bool { a.rawValue < b.rawValue }
}

/// One usable position. Unknown quantities are `nil`, never NaN.
public struct Fix: Sendable, Equatable {
    /// Time of the fix as the receiver stated it, seconds since the Unix epoch. Informational only:
    /// old recordings may be dated decades away, so nothing is judged by it.
    public var time: Double?
    /// When placed received the fix, monotonic microseconds. Staleness is judged by this.
    public var receivedAt: UInt64
    public var coordinate: Coordinate
    public var mode: FixMode
    /// 1-sigma horizontal error per axis in metres (the core's unit; interfaces state `radius95`).
    public var accuracy: Double?
    public var altitude: Double?
    /// Metres per second over ground.
    public var speed: Double?
    /// Degrees clockwise from true north.
    public var heading: Double?

    public init(
        time: Double? = nil, receivedAt: UInt64 = 0, coordinate: Coordinate, mode: FixMode = .twoD,
        accuracy: Double? = nil, altitude: Double? = nil, speed: Double? = nil, heading: Double? = nil
    ) {
        self.time = time
        self.receivedAt = receivedAt
        self.coordinate = coordinate
        self.mode = mode
        self.accuracy = accuracy
        self.altitude = altitude
        self.speed = speed
        self.heading = heading
    }

}

/// The one accuracy convention (docs/DESIGN.md, "Accuracy"): every public interface states the radius in metres
/// that holds 95 % of fixes, as gpsd's `eph` and the W3C Geolocation API do; the core works in σ per axis.
/// For a circular normal error the 95 % radius is √(−2 ln 0.05) σ = 2.448 σ. Every conversion goes
/// through here.
extension Fix {
    /// 95 % radius / σ.
    public static let radius95PerSigma = 2.448

    /// σ per axis for a stated 95 % radius (an interface's `accuracy`, `--static`, `StaticPosition=`).
    public static func sigma(fromRadius95 radius: Double) -> Double { radius / radius95PerSigma }

    /// gpsd's `eph` is a 95 % horizontal radius.
    public static func sigma(fromEPH eph: Double) -> Double { sigma(fromRadius95: eph) }

    /// The 95 % radius an interface states for σ per axis, to the millimetre: a σ taken from a stated
    /// radius gives that radius back, not 10.000000000000002.
    public static func radius95(fromSigma sigma: Double) -> Double {
        (sigma * radius95PerSigma * 1000).rounded() / 1000
    }

    /// This fix's accuracy as interfaces state it: the 95 % radius in metres, nil when unknown.
    public var radius95: Double? { accuracy.map(Self.radius95(fromSigma:)) }
}
