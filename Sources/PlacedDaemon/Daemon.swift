import PlacedCore
import PlacedGPS
import PlacedStore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// What an interface hears from the daemon, to broadcast (PlacesChanged, MarkerPlaced,
/// PropertiesChanged, varlink Watch replies).
public protocol DaemonObserver: AnyObject {
    /// A new ranking, cut to the default list length.
    func daemon(_ daemon: Daemon, published ranking: Ranking)
    func daemon(_ daemon: Daemon, placed marker: Marker)
    func daemon(_ daemon: Daemon, changed properties: Set<DaemonProperty>)
}

public enum DaemonProperty: String, Sendable {
    case location = "Location"
    case generation = "Generation"
    case marker = "Marker"
    case distanceFilter = "DistanceFilter"
    case sourceState = "SourceState"
}

/// The daemon's one context: the event loop and every part it drives. Fixes flow
/// source → gate → distance filter → (move) ranker → observers; requests from either interface
/// come in through the operations below, each: read → validate → authorize → change → log → emit.
/// Nothing runs unless a fix or a client arrives.
public final class Daemon {
    public private(set) var configuration: Configuration
    public let loop: EventLoop

    private var filter: DistanceFilter
    private let ranker: Ranker
    private var history: RankingHistory
    private var catalog: PlaceCatalog?
    private let selections: SelectionLog
    private var writerGroup: UInt32?
    private var gpsd: GPSDSource?
    private var signalSources: [EventSource] = []
    private var staticStart: EventSource?
    private var observers: [DaemonObserver] = []
    private var varlink: VarlinkService?
    private var dbus: BusService?

    /// The latest usable fix, moves and suppressed fixes alike: what clients see as the location.
    public private(set) var location: Fix?
    public private(set) var sourceState: SourceState = .connecting
    public private(set) var marker: Marker?
    /// Number of moves so far.
    public private(set) var moves: UInt64 = 0

    public init(configuration: Configuration) throws {
        self.configuration = configuration
        loop = try EventLoop()
        filter = try DistanceFilter(threshold: configuration.distanceFilter)
        ranker = try Ranker()
        history = RankingHistory(depth: configuration.selectionGenerations)
        writerGroup = UserDatabase.groupID(named: configuration.writerGroup)
        do {
            catalog = try Self.loadCatalogIfPresent(configuration.databasePath)
        } catch {
            // Exiting would only have systemd restart us into the same file: serve without places
            // (status, history, selections of nothing) until a good file is imported and refreshed.
            Log.error(
                "cannot load the places: \(error); rankings stay empty until a new import "
                    + "(placectl import, then placectl refresh)")
        }
        selections = try SelectionLog(path: configuration.resolvedSelectionsPath)
        marker = try selections.last()
        if selections.isReadOnly {
            Log.warning(
                "selection log \(selections.path) is read-only: selections are refused until it is writable")
        }
    }

    public func addObserver(_ observer: DaemonObserver) { observers.append(observer) }

    /// Runs until SIGTERM or SIGINT; returns the exit status.
    public func run() throws -> Int32 {
        for signal in [SIGTERM, SIGINT] {
            signalSources.append(
                try loop.onSignal(signal) { [unowned self] in
                    Log.info("shutting down")
                    ServiceNotifier.stopping()
                    loop.exit(0)
                })
        }
        signalSources.append(try loop.onSignal(SIGHUP) { [unowned self] in reload() })
        try startVarlink()
        if let address = configuration.busAddress {
            do {
                dbus = try BusService(daemon: self, address: address)
            } catch {
                throw StartupError("cannot serve \(BusService.name) on the \(configuration.bus.rawValue) bus: \(error)")
            }
        }
        try startSource()
        Log.info(
            "started: \(placeCount.grouped) places, distance filter "
                + "\(configuration.distanceFilter.formatted(decimals: 1)) m"
                + (marker.map { ", last marker \($0.place.place.id)" } ?? ""))
        ServiceNotifier.ready(status: statusLine)
        // After READY: sd-event pings once on enabling, and systemd expects READY first.
        try loop.enableWatchdog()
        let status = try loop.run()
        gpsd?.stop()
        varlink?.close()
        dbus = nil
        selections.checkpoint()
        return status
    }

    /// On the socket systemd passed (placed.socket), else on a socket of our own at Socket=.
    private func startVarlink() throws {
        let passed: SocketActivation.Passed?
        do {
            passed = try SocketActivation.varlinkSocket()
        } catch {
            throw StartupError("cannot serve varlink: \(error)")
        }
        let listener: VarlinkService.Listener = passed.map { .passed($0) } ?? .path(configuration.socketPath)
        do {
            varlink = try VarlinkService(daemon: self, listener: listener)
        } catch {
            throw StartupError("cannot serve varlink on \(passed?.path ?? configuration.socketPath): \(error)")
        }
        if let passed {
            Log.info("varlink: serving on \(passed.path), the socket systemd passed")
            if passed.path != configuration.socketPath {
                Log.warning("Socket=\(configuration.socketPath) is not used: systemd passed \(passed.path)")
            }
        }
    }

    // MARK: Location

    private func startSource() throws {
        switch try configuration.resolvedSource() {
        case let .gpsd(host, port):
            let source = GPSDSource(
                loop: loop,
                configuration: .init(
                    host: host, port: port, silenceTimeout: UInt64(configuration.gpsdTimeout * 1_000_000)))
            source.onFix = { [unowned self] fix in handle(fix) }
            source.onStateChange = { [unowned self] state, reason in
                Log.info("gpsd: \(state.rawValue): \(reason)")
                setSourceState(state)
            }
            gpsd = source
            source.start()
        case let .fixed(coordinate, accuracy):
            setSourceState(.static)
            let fix = Fix(receivedAt: loop.now, coordinate: coordinate, mode: .twoD, accuracy: accuracy)
            staticStart = try loop.onNextIteration { [unowned self] in handle(fix) }
        }
    }

    private func setSourceState(_ state: SourceState) {
        guard state != sourceState else { return }
        sourceState = state
        // Without fixes the last ranking is old news: stale until the next fix ranks again.
        let lost = state != .fix && state != .static
        history.setStale(lost)
        ServiceNotifier.status(statusLine)
        emit([.sourceState])
    }

    func handle(_ fix: Fix) {
        location = fix
        guard case let .move(distance) = try? filter.consider(fix) else {
            emit([.location])
            return
        }
        moves += 1
        let accuracy = fix.accuracy.map { " ±\($0.formatted(decimals: 1)) m" } ?? ""
        let after = distance.map { " after \($0.formatted(decimals: 1)) m" } ?? " (first fix)"
        Log.info(
            "move \(moves) at \(fix.coordinate.latitude.formatted(decimals: 7)),"
                + "\(fix.coordinate.longitude.formatted(decimals: 7))\(accuracy)\(after)")
        rerank(at: fix)
        emit([.location])
    }

    // MARK: Ranking

    /// Ranks the places around `fix` and publishes the result as the next generation.
    private func rerank(at fix: Fix) {
        guard let catalog else { return }
        let ranking: Ranking
        do {
            ranking = try rank(fix, in: catalog, limit: Ranker.maximumLimit)
        } catch {
            Log.warning("ranking failed at \(fix.coordinate): \(error)")
            return
        }
        let published = history.publish(ranking)
        let top = published.places.prefix(3).map { "\($0.place.name) \($0.likelihood.formatted(decimals: 2))" }
        Log.info("ranking \(published.generation): \(top.isEmpty ? "no places near" : top.joined(separator: ", "))")
        ServiceNotifier.status(statusLine)
        // Broadcasts carry the default list; a client wanting more asks for it.
        let broadcast = published.limited(to: Ranker.defaultLimit)
        for observer in observers { observer.daemon(self, published: broadcast) }
        emit([.generation])
    }

    /// The one way places are ranked, for moves and what-if queries alike: candidates within the
    /// fix's search radius, priors from the selection counts.
    private func rank(_ fix: Fix, in catalog: PlaceCatalog, limit: Int) throws -> Ranking {
        let candidates = try catalog.candidates(within: ranker.searchRadius(for: fix), of: fix.coordinate)
        return try ranker.rank(fix: fix, candidates: candidates, selectionCounts: selections.counts, limit: limit)
    }

    private func emit(_ properties: Set<DaemonProperty>) {
        for observer in observers { observer.daemon(self, changed: properties) }
    }

    // MARK: Operations (both interfaces)

    public var latestRanking: Ranking? { history.latest }
    public var generation: UInt64 { history.generation }
    public var placeCount: Int { catalog?.count ?? 0 }
    public var distanceFilter: Double { filter.threshold }

    /// The latest ranking cut to `limit` places (nil: the default, 5).
    public func current(limit: Int?) throws(ServiceError) -> Ranking? {
        let limit = try Self.checkLimit(limit)
        return history.latest?.limited(to: limit)
    }

    /// A what-if ranking at any position: changes nothing.
    public func rank(latitude: Double, longitude: Double, accuracy: Double?, limit: Int?) throws(ServiceError)
        -> [RankedPlace]
    {
        let limit = limit ?? Ranker.defaultLimit
        let coordinate = Coordinate(latitude: latitude, longitude: longitude)
        let fix = Fix(receivedAt: loop.now, coordinate: coordinate, mode: .twoD, accuracy: accuracy)
        do {
            try Ranker.validate(fix: fix, limit: limit)  // bad input is named before "no places"
        } catch {
            throw ServiceError(error, at: coordinate)
        }
        guard let catalog else { throw .noPlaces }
        do {
            return try rank(fix, in: catalog, limit: limit).places
        } catch let error as RankingError {
            throw ServiceError(error, at: coordinate)
        } catch {
            throw .storeFailed(reason: "\(error)")
        }
    }

    /// Records the caller's selection durably, logs it, and announces the marker.
    public func select(id: String, by caller: Credentials) throws(ServiceError) -> Marker {
        guard caller.isRootOrMember(of: writerGroup) else { throw .permissionDenied(operation: "Select") }
        let found: (place: RankedPlace, generation: UInt64)
        do {
            found = try history.resolveSelection(of: id) { catalog?.contains(id: $0) ?? false }
        } catch {
            throw ServiceError(error)
        }
        let at = location ?? history.latest!.fix
        if selections.isReadOnly { reopenSelectionLog() }
        let recorded: Marker
        do {
            recorded = try selections.append(
                Marker(place: found.place, location: at, time: Self.wallClock(), generation: found.generation))
        } catch {
            Log.error("selection of \(id) not recorded: \(error)")
            throw .storeFailed(reason: "the selection was not recorded: \(error)")
        }
        marker = recorded
        let place = recorded.place.place
        Log.log(
            .notice, "selected \(place.name) (\(place.id)) at \(at.coordinate), selection \(recorded.selection)",
            fields: [
                ("MESSAGE_ID", Self.selectionMessageID), ("PLACE_ID", place.id), ("PLACE_NAME", place.name),
                ("LATITUDE", at.coordinate.latitude.formatted(decimals: 7)),
                ("LONGITUDE", at.coordinate.longitude.formatted(decimals: 7)),
                ("SELECTION", String(recorded.selection)), ("GENERATION", String(recorded.generation)),
            ])
        for observer in observers { observer.daemon(self, placed: recorded) }
        emit([.marker])
        return recorded
    }

    /// Reloads the places if their file changed, and ranks again at the current location. A file that
    /// cannot be loaded is `storeFailed`, and the places loaded before keep serving.
    public func refresh(by caller: Credentials) throws(ServiceError) {
        guard caller.isRootOrMember(of: writerGroup) else { throw .permissionDenied(operation: "Refresh") }
        if catalog?.identity != FileIdentity(path: configuration.databasePath) {
            ServiceNotifier.reloading()
            defer { ServiceNotifier.ready(status: statusLine) }
            if let error = reloadPlaces(reason: "Refresh") {
                throw .storeFailed(
                    reason: "cannot load \(configuration.databasePath): \(error); "
                        + "keeping the \(placeCount.grouped) places loaded")
            }
        } else if let fix = location {
            rerank(at: fix)
        }
    }

    /// A log that opened read-only is tried again before each selection, so one made writable again
    /// (remounted, chmod) takes selections without a restart.
    private func reopenSelectionLog() {
        if selections.reopen() { Log.notice("selection log \(selections.path) is writable again") }
    }

    public func history(limit: Int?, before: Int64?) throws(ServiceError) -> [Marker] {
        let limit = limit ?? 20
        guard (1...Self.maximumHistoryLimit).contains(limit) else {
            throw .invalidLimit(limit, maximum: Self.maximumHistoryLimit)
        }
        do {
            return try selections.history(limit: limit, before: before)
        } catch {
            throw .storeFailed(reason: error.description)
        }
    }

    /// Reads the configuration again (file and drop-ins, then the same flags), applies what changed,
    /// and reloads the places. A bad configuration is logged and the running one kept.
    public var configurationLoader: (() throws -> Configuration)?

    func reload() {
        ServiceNotifier.reloading()
        defer { ServiceNotifier.ready(status: statusLine) }
        if let configurationLoader {
            do {
                apply(try configurationLoader())
            } catch {
                Log.error("SIGHUP: keeping the running configuration: \(error)")
            }
        }
        reloadPlaces(reason: "SIGHUP")
    }

    private func apply(_ new: Configuration) {
        let old = configuration
        configuration = new
        if new.distanceFilter != old.distanceFilter, (try? filter.setThreshold(new.distanceFilter)) != nil {
            Log.info("distance filter now \(new.distanceFilter.formatted(decimals: 1)) m")
            emit([.distanceFilter])
        }
        if (try? new.resolvedSource()) != (try? old.resolvedSource()) || new.gpsdTimeout != old.gpsdTimeout {
            Log.info("location source changed: restarting it")
            gpsd?.stop()
            gpsd = nil
            do { try startSource() } catch { Log.error("cannot start the new location source: \(error)") }
        }
        if new.writerGroup != old.writerGroup {
            writerGroup = UserDatabase.groupID(named: new.writerGroup)
        }
        for (changed, key) in [
            (new.socketPath != old.socketPath, "Socket"), (new.bus != old.bus, "Bus"),
            (new.resolvedSelectionsPath != old.resolvedSelectionsPath, "Selections"),
            (new.selectionGenerations != old.selectionGenerations, "SelectionGenerations"),
        ] where changed {
            Log.warning("\(key)= changed: it takes effect when placed restarts")
        }
    }

    /// Loads the places file again; a bad file leaves the old places serving and is returned.
    @discardableResult
    func reloadPlaces(reason: String) -> (any Error)? {
        do {
            let fresh = try PlaceCatalog(path: configuration.databasePath)
            catalog = fresh
            history.clear()
            Log.info("\(reason): loaded \(fresh.count) places from \(configuration.databasePath)")
        } catch {
            Log.error("\(reason): keeping the \(placeCount) places loaded: \(error)")
            return error
        }
        if let fix = location { rerank(at: fix) }
        return nil
    }

    // MARK: Helpers

    /// A part that could not start: placed exits with status 1 and this message.
    public struct StartupError: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Most markers one History call returns.
    public static let maximumHistoryLimit = 1000

    static let selectionMessageID = "5d1b7e4c2a9f4b8e8c3f6a0d9e2b7c41"

    static func checkLimit(_ limit: Int?) throws(ServiceError) -> Int {
        let limit = limit ?? Ranker.defaultLimit
        guard (1...Ranker.maximumLimit).contains(limit) else {
            throw .invalidLimit(limit, maximum: Ranker.maximumLimit)
        }
        return limit
    }

    /// The places at `path`, or nil (with a warning) when none have been imported yet.
    static func loadCatalogIfPresent(_ path: String) throws -> PlaceCatalog? {
        if access(path, F_OK) != 0, errno == ENOENT {
            Log.warning("no places database at \(path): rankings stay empty until one is imported (placectl import)")
            return nil
        }
        return try PlaceCatalog(path: path)
    }

    static func wallClock() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// For sd_notify STATUS=: what placed is doing, in a few words.
    var statusLine: String {
        let places = "\(placeCount.grouped) places"
        switch sourceState {
        case .connecting: return "Waiting for gpsd, \(places)"
        case .noFix: return "No fix, \(places)"
        case .stale: return "gpsd lost, ranking \(generation) stale, \(places)"
        case .fix, .static:
            let mode = location?.mode == .threeD ? "3D fix" : "2D fix"
            let accuracy = location?.accuracy.map { " ±\(Int($0.rounded())) m" } ?? ""
            return "\(sourceState == .static ? "Static position" : mode)\(accuracy), \(places), ranking \(generation)"
        }
    }
}
