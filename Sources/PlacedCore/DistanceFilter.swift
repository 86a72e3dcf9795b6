/// The CoreLocation / GeoClue distance filter: the first usable fix is a move; afterwards a fix is a
/// move when it lies at least `threshold` metres from the last *emitted* fix. Measuring from the last
/// emitted fix (not the last seen) makes slow creep emit once per threshold instead of never, and
/// keeps jitter around a standing point from ever emitting.
public struct DistanceFilter: Sendable {
    public enum Decision: Equatable, Sendable {
        /// A move: refresh the ranking. `distance` is from the previous reference (nil for the first).
        case move(distance: Double?)
        /// Within the threshold of the reference point: update the shown location only.
        case suppressed(distance: Double)
    }

    /// Metres; 0 means every fix is a move.
    public private(set) var threshold: Double
    /// The last emitted fix: the reference point.
    public private(set) var reference: Fix?

    public init(threshold: Double = 50) throws(DistanceFilterError) {
        guard threshold.isFinite, threshold >= 0 else { throw .invalidThreshold(threshold) }
        self.threshold = threshold
    }

    /// Changing the threshold keeps the reference point: the next fix is judged against it.
    public mutating func setThreshold(_ value: Double) throws(DistanceFilterError) {
        guard value.isFinite, value >= 0 else { throw .invalidThreshold(value) }
        threshold = value
    }

    /// Forget the reference, so the next fix is a move (after a reload, or a long gap).
    public mutating func reset() { reference = nil }

    public mutating func consider(_ fix: Fix) throws(DistanceFilterError) -> Decision {
        guard fix.coordinate.isValid else {
            throw .invalidFix(latitude: fix.coordinate.latitude, longitude: fix.coordinate.longitude)
        }
        guard let reference else {
            self.reference = fix
            return .move(distance: nil)
        }
        let distance = Geodesy.distance(reference.coordinate, fix.coordinate)
        if distance >= threshold {
            self.reference = fix
            return .move(distance: distance)
        }
        return .suppressed(distance: distance)
    }
}

public enum DistanceFilterError: Error, Equatable, CustomStringConvertible {
    case invalidThreshold(Double)
    case invalidFix(latitude: Double, longitude: Double)

    public var description: String {
        switch self {
        case let .invalidThreshold(v): "invalid distance filter \(v): must be a finite number of metres >= 0"
        case let .invalidFix(lat, lon): "invalid fix \(lat),\(lon): latitude and longitude must be finite and in range"
        }
    }
}
