/// Where position reports come from: gpsd, or a configured position for a kiosk without GPS. A
/// source only reads; it judges nothing. Every report goes to its sink, which passes it through the
/// one `FixGate`, so all sources are gated alike.
public protocol LocationSource: AnyObject {
    /// How the log names the source: `gpsd`, `static`.
    var name: String { get }
    /// Begins delivering to `sink`, now or from later loop iterations.
    func start(delivering sink: LocationSink)
    /// Stops delivering; the source may be started again.
    func stop()
}

/// What a `LocationSource` delivers to: the daemon.
public protocol LocationSink: AnyObject {
    /// One report as the source received it, at `receivedAt` (monotonic microseconds).
    func receive(_ report: TPVReport, at receivedAt: UInt64)
    /// The source's state changed (connected, lost, fixes arriving), with why in a few words.
    func locationSource(_ source: LocationSource, changedTo state: SourceState, reason: String)
}
