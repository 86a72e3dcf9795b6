import PlacedCore
import PlacedGPS
import PlacedStore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's one context: the event loop and every part it drives. Fixes flow
/// source → gate → distance filter → (move) ranking; nothing else runs unless a fix or a client
/// arrives.
public final class Daemon {
    public let configuration: Configuration
    let loop: EventLoop

    private var filter: DistanceFilter
    private var gpsd: GPSDSource?
    private var signalSources: [EventSource] = []
    private var staticStart: EventSource?

    /// The latest usable fix, moves and suppressed fixes alike: what clients see as the location.
    public private(set) var location: Fix?
    public private(set) var sourceState: SourceState = .connecting
    /// Number of moves so far; the ranking generation follows it.
    public private(set) var moves: UInt64 = 0

    public init(configuration: Configuration) throws {
        self.configuration = configuration
        loop = try EventLoop()
        filter = try DistanceFilter(threshold: configuration.distanceFilter)
    }

    /// Runs until SIGTERM or SIGINT; returns the exit status.
    public func run() throws -> Int32 {
        for signal in [SIGTERM, SIGINT] {
            signalSources.append(
                try loop.onSignal(signal) { [unowned self] in
                    Log.info("shutting down")
                    loop.exit(0)
                })
        }
        try startSource()
        Log.info("started; distance filter \(configuration.distanceFilter.formatted(decimals: 1)) m")
        let status = try loop.run()
        gpsd?.stop()
        return status
    }

    private func startSource() throws {
        switch try configuration.resolvedSource() {
        case .gpsd(let host, let port):
            let source = GPSDSource(
                loop: loop,
                configuration: .init(
                    host: host, port: port, silenceTimeout: UInt64(configuration.gpsdTimeout * 1_000_000)))
            source.onFix = { [unowned self] fix in handle(fix) }
            source.onStateChange = { [unowned self] state, reason in
                sourceState = state
                Log.info("gpsd: \(state.rawValue): \(reason)")
            }
            gpsd = source
            source.start()
        case .fixed(let coordinate, let accuracy):
            sourceState = .static
            let fix = Fix(receivedAt: loop.now, coordinate: coordinate, mode: .twoD, accuracy: accuracy)
            staticStart = try? loop.onNextIteration { [unowned self] in handle(fix) }
        }
    }

    func handle(_ fix: Fix) {
        location = fix
        guard case .move(let distance) = try? filter.consider(fix) else { return }
        moves += 1
        let accuracy = fix.accuracy.map { " ±\($0.formatted(decimals: 1)) m" } ?? ""
        let after = distance.map { " after \($0.formatted(decimals: 1)) m" } ?? " (first fix)"
        Log.info(
            "move \(moves) at \(fix.coordinate.latitude.formatted(decimals: 7)),"
                + "\(fix.coordinate.longitude.formatted(decimals: 7))\(accuracy)\(after)")
    }
}
