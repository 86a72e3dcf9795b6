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
