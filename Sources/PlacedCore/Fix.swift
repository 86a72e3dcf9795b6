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
    /// 1-sigma horizontal error in metres.
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

    /// gpsd's `eph` is a 95 % horizontal radius; for a circular normal error that is 2.448 σ.
    public static func sigma(fromEPH eph: Double) -> Double { eph / ephPerSigma }
    /// The 95 % radius of an error of `sigma` per axis.
    public static func eph(fromSigma sigma: Double) -> Double { sigma * ephPerSigma }
    static let ephPerSigma = 2.448
}
