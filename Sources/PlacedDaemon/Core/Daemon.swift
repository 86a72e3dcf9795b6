import PlacedCore
import PlacedStore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's core: the state and the operations, knowing no interface. Reports flow
/// source → gate → distance filter → (move) ranker → subscribers; requests from any adapter come in
/// through `PlacesService`, each: read → validate → authorize → change → log → emit. Nothing runs
/// unless a report or a client arrives.
public final class Daemon: PlacesService, LocationSink {
    public private(set) var configuration: Configuration
    private let loop: EventLoop

    private var gate = FixGate()
    private var filter: DistanceFilter
    private var ranker: Ranker
    private var history: RankingHistory
    private var catalog: PlaceCatalog?
    private let selections: SelectionLog
    /// The picks made so far, where they were made: the evidence every ranking learns from.
    private var picks: PickMemory
    private var writerGroup: UInt32?
    private var readerGroup: UInt32?
    private var subscribers: [DaemonSubscriber] = []
    /// Writes its rows in each selection's transaction (the fleet export), if set.
    public weak var selectionJournal: SelectionJournal?
    private var visits: VisitDetector
    private var visitPlace: VisitPlaceTracker
    /// The selection made during the open visit, for its end.
    private var visitSelection: Marker?
    /// The zone and holidays opening hours are evaluated with, and the values parsed so far.
    public private(set) var hoursSettings: HoursSettings
    private let openingHours = OpeningHoursCache()
    /// The own places, in the selection log's file, and in memory with their grid.
    let ownPlaceStore: OwnPlaceStore
    var ownPlaces: OwnPlaceIndex
    /// Which own places the device is inside, and the crossings it confirms.
    var boundaries: BoundaryTracker
    /// The own places near the fix being ranked: kept to reuse its storage.
    private var ownNearby: [OwnSite] = []

    public private(set) var location: Fix?
    public private(set) var sourceState: SourceState = .connecting
    public private(set) var marker: Marker?
    /// Number of moves so far.
    public private(set) var moves: UInt64 = 0

    public init(configuration: Configuration, loop: EventLoop) throws {
        self.configuration = configuration
        self.loop = loop
        filter = try DistanceFilter(threshold: configuration.distanceFilter)
        ranker = try Ranker(model: RankingModel(closedWeight: configuration.closedWeight))
        history = RankingHistory(depth: configuration.selectionGenerations)
        writerGroup = UserDatabase.groupID(named: configuration.writerGroup)
        readerGroup = UserDatabase.groupID(named: configuration.readerGroup)
        do {
            catalog = try Self.loadCatalogIfPresent(configuration.databasePath)
        } catch {
            // Exiting would only have systemd restart us into the same file: serve without places
            // (status, history, selections of nothing) until a good file is imported and refreshed.
            Log.error("cannot load the places: \(error); rankings stay empty until \(Self.remedy(for: error))")
        }
        selections = try SelectionLog(path: configuration.resolvedSelectionsPath)
        marker = try selections.last()
        ownPlaceStore = OwnPlaceStore(log: selections)
        do {
            ownPlaces = OwnPlaceIndex(try ownPlaceStore.all())
        } catch {
            // Serving OSM places beats a restart loop; PutPlaces reports the store's failure.
            Log.error("cannot read the own places: \(error); ranking without them")
            ownPlaces = OwnPlaceIndex()
        }
        hoursSettings = HoursSettings.load(configuration)
        // A pick's time of week is the device's local time, the zone opening hours are read in.
        picks = try PickMemory(
            settings: configuration.learningSettings, timeZone: hoursSettings.timeZone, picks: selections.picks())
        // Visit ids count on from the start's wall-clock milliseconds: unique across restarts while
        // the clock goes forward.
        visits = try VisitDetector(settings: configuration.visitSettings, firstID: UInt64(Self.wallClock() * 1000))
        visitPlace = try VisitPlaceTracker(autoSelectThreshold: configuration.autoSelect)
        Log.info("opening hours: evaluated in \(hoursSettings.timeZoneSource)")
        boundaries = try BoundaryTracker(
            settings: configuration.boundarySettings, inside: Self.lastPresence(in: ownPlaceStore, of: ownPlaces))
        if selections.isReadOnly {
            Log.warning(
                "selection log \(selections.path) is read-only: selections are refused until it is writable")
        }
    }

    /// `subscriber` hears every later event, after the subscribers before it.
    public func subscribe(_ subscriber: DaemonSubscriber) { subscribers.append(subscriber) }

    /// No subscriber hears anything more: at shutdown, before the adapters stop.
    public func unsubscribeAll() { subscribers = [] }

    /// The selection log, for a selection journal that keeps its rows in the same file (the fleet
    /// outbox): the assembly hands it over; adapters never see it.
    public var selectionLog: SelectionLog { selections }

    /// Makes what was written durable in the main database file: at shutdown.
    public func close() { selections.checkpoint() }

    /// Every change is announced here: on the loop's thread, the only one that may make it.
    func emit(_ event: DaemonEvent) {
        loop.preconditionInLoop()
        for subscriber in subscribers { subscriber.handle(event, from: self) }
    }

    // MARK: Location (LocationSink)

    public func receive(_ report: TPVReport, at receivedAt: UInt64) {
        guard let fix = gate.admit(report, receivedAt: receivedAt) else { return }
        location = fix
        // Every gated fix counts for visits, the ones the distance filter suppresses too.
        for event in visits.consider(fix) {
            switch event {
            case .started(let visit): visitStarted(visit)
            case .ended(let visit): visitEnded(visit)
            }
        }
        // Every gated fix counts for the own places' boundaries too: the dwell is a time, not a distance.
        for crossing in boundaries.consider(fix, places: &ownPlaces) {
            keepPresence(crossing)
            emit(.boundaryCrossed(crossing))
        }
        guard case let .move(distance) = try? filter.consider(fix) else {
            emit(.located(fix))
            return
        }
        moves += 1
        emit(.moved(fix, number: moves, distance: distance))
        rerank(at: fix)
        emit(.located(fix))
    }

    public func locationSource(_ source: LocationSource, changedTo state: SourceState, reason: String) {
        Log.info("\(source.name): \(state.rawValue): \(reason)")
        gate.sourceChanged(to: state)
        guard state != sourceState else { return }
        sourceState = state
        history.setStale(isWithoutFixes)
        ServiceNotifier.status(statusLine)
        emit(.sourceChanged(state))
    }

    // MARK: Visits

    /// Ranks at the visit's averaged position (the next generation, so a selection resolves against
    /// it), announces the visit with that ranking, and selects its top place if `AutoSelect=` says so.
    private func visitStarted(_ visit: Visit) {
        visitSelection = nil
        // No places loaded: the visit is still announced, with nothing ranked.
        let ranking =
            rerank(at: visit.position)
            ?? Ranking(generation: generation, fix: visit.position, places: [], noneLikelihood: 1, radius: 0)
        emit(.visitStarted(visit, ranking: ranking.limited(to: Ranker.defaultLimit)))
        if let place = visitPlace.started(visit, ranking: ranking) {
            selectAutomatically(place, generation: ranking.generation, at: visit.position)
        }
    }

    private func visitEnded(_ visit: Visit) {
        let place = visitPlace.ended(visit)
        emit(.visitEnded(visit, place: place, selection: visitSelection))
        visitSelection = nil
    }

    /// `AutoSelect=`: the same durable path as `Select`, marked automatic; a failure is logged, and the
    /// tracker proposes a place once per visit, so a failing store is not hammered.
    private func selectAutomatically(_ place: RankedPlace, generation: UInt64, at fix: Fix) {
        do {
            try record(
                Marker(place: place, location: fix, time: Self.wallClock(), generation: generation, automatic: true))
        } catch {
            Log.error("automatic selection of \(place.place.id) not recorded: \(error)")
        }
    }

    public var openVisit: (visit: Visit, place: RankedPlace?)? {
        visits.visit.map { ($0, visitPlace.place) }
    }

    // MARK: Ranking

    /// Ranks the places around `fix` and publishes the result as the next generation.
    @discardableResult
    func rerank(at fix: Fix) -> Ranking? {
        guard catalog != nil || !ownPlaces.isEmpty else { return nil }
        let ranking: Ranking
        do {
            ranking = try rankEverything(at: fix, limit: Ranker.maximumLimit)
        } catch {
            Log.warning("ranking failed at \(fix.coordinate): \(error)")
            return nil
        }
        let published = history.publish(ranking, stale: isWithoutFixes)
        ServiceNotifier.status(statusLine)
        // Broadcasts carry the default list; a client wanting more asks for it.
        emit(.ranked(published.limited(to: Ranker.defaultLimit)))
        return published
    }

    /// The one way a fix is ranked: the places file's places and the own places near it together.
    private func rankEverything(at fix: Fix, limit: Int) throws -> Ranking {
        ownPlaces.candidates(within: ranker.searchRadius(for: fix), of: fix.coordinate, into: &ownNearby)
        let now = Self.wallClock()
        if let catalog {
            return try catalog.rank(
                fix, with: ranker, picks: picks, now: now, openState: openState(at: now), limit: limit,
                own: ownNearby)
        }
        let state = openState(at: now)
        return try ranker.rank(
            fix: fix, candidates: ownNearby, picks: picks, now: now,
            openState: { site in state(-1, site.ownPlace.details.openingHours, site.reachCentre) }, limit: limit)
    }

    // MARK: Operations (PlacesService)

    public var latestRanking: Ranking? { history.latest }
    public var generation: UInt64 { history.generation }
    public var placeCount: Int { catalog?.count ?? 0 }
    public var distanceFilter: Double { filter.threshold }
    public var now: UInt64 { loop.now }
    public var language: String? { configuration.language.isEmpty ? nil : configuration.language }
    public var clock: ServiceClock { ServiceClock(monotonic: loop.now, wall: Self.wallClock()) }

    public func authorize(_ caller: Credentials, to access: Access, _ operation: String) throws(ServiceError) {
        // Every adapter's request begins here, and only the loop's thread serves one.
        loop.preconditionInLoop()
        let allowed =
            switch access {
            case .read: caller.isRootOrMember(of: writerGroup) || caller.isRootOrMember(of: readerGroup)
            case .write: caller.isRootOrMember(of: writerGroup)
            }
        guard !allowed else { return }
        let requirement =
            switch access {
            case .read:
                "root or membership of group \(configuration.writerGroup) or \(configuration.readerGroup)"
            case .write: "root or membership of group \(configuration.writerGroup)"
            }
        throw .permissionDenied(operation: operation, requirement: requirement)
    }

    public func current(limit: Int?, by caller: Credentials) throws(ServiceError) -> Ranking? {
        try authorize(caller, to: .read, "reading the places")
        let limit = try ServiceError.checkLimit(limit, default: Ranker.defaultLimit, maximum: Ranker.maximumLimit)
        return history.latest?.limited(to: limit)
    }

    public func rank(latitude: Double, longitude: Double, accuracy: Double?, limit: Int?, by caller: Credentials)
        throws(ServiceError) -> [RankedPlace]
    {
        try authorize(caller, to: .read, "Rank")
        let limit = try ServiceError.checkLimit(limit, default: Ranker.defaultLimit, maximum: Ranker.maximumLimit)
        let coordinate = Coordinate(latitude: latitude, longitude: longitude)
        if let accuracy, !(accuracy.isFinite && accuracy >= 0) {
            throw .invalidAccuracy(latitude: latitude, longitude: longitude, accuracy: accuracy)
        }
        // A stated accuracy is the 95 % radius; the core works in σ.
        let fix = Fix(
            receivedAt: loop.now, coordinate: coordinate, mode: .twoD, accuracy: accuracy.map(Fix.sigma(fromRadius95:)))
        do {
            try Ranker.validate(fix: fix, limit: limit)  // bad input is named before "no places"
        } catch {
            throw ServiceError(error, at: coordinate)
        }
        guard catalog != nil || !ownPlaces.isEmpty else { throw .noPlaces }
        do {
            return try rankEverything(at: fix, limit: limit).places
        } catch let error as RankingError {
            throw ServiceError(error, at: coordinate)
        } catch {
            throw .storeFailed(reason: "\(error)")
        }
    }

    public func select(id: String, by caller: Credentials) throws(ServiceError) -> Marker {
        try authorize(caller, to: .write, "Select")
        let found: (place: RankedPlace, generation: UInt64)
        do {
            found = try history.resolveSelection(of: id) {
                (catalog?.contains(id: $0) ?? false) || ownPlaces.contains(id: $0)
            }
        } catch {
            throw ServiceError(error)
        }
        // During a visit the pick was made at the visit's averaged position: the better evidence for
        // learning where it was made.
        let at = visits.visit?.position ?? location ?? history.latest!.fix
        do {
            return try record(
                Marker(place: found.place, location: at, time: Self.wallClock(), generation: found.generation))
        } catch {
            Log.error("selection of \(id) not recorded: \(error)")
            throw .storeFailed(reason: "the selection was not recorded: \(error)")
        }
    }

    /// The one durable path of a selection, a client's or an automatic one: the row first (with the
    /// selection journal's rows, in one transaction), then the pick for learning, the open visit's
    /// place, and the announcement.
    @discardableResult
    private func record(_ marker: Marker) throws -> Marker {
        if selections.isReadOnly { reopenSelectionLog() }
        let recorded: Marker
        if let journal = selectionJournal {
            do {
                recorded = try selections.append(marker) { try journal.write(alongside: $0) }
                journal.selectionTransactionEnded(committed: true)
            } catch {
                journal.selectionTransactionEnded(committed: false)
                throw error
            }
        } else {
            recorded = try selections.append(marker)
        }
        self.marker = recorded
        picks.append(Pick(recorded))
        if visits.visit != nil {
            visitPlace.recordSelection(recorded.place, automatic: recorded.automatic)
            visitSelection = recorded
        }
        emit(.markerPlaced(recorded))
        return recorded
    }

    public func refresh(by caller: Credentials) throws(ServiceError) {
        try authorize(caller, to: .write, "Refresh")
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
        if selections.reopen() {
            Log.notice("selection log \(selections.path) is writable again")
            selectionJournal?.selectionLogReopened()
        }
    }

    public func history(limit: Int?, before: Int64?, by caller: Credentials) throws(ServiceError) -> [Marker] {
        try authorize(caller, to: .read, "reading the history")
        let limit = try ServiceError.checkLimit(
            limit, default: Self.defaultHistoryLimit, maximum: Self.maximumHistoryLimit)
        do {
            return try selections.history(limit: limit, before: before)
        } catch {
            throw .storeFailed(reason: error.description)
        }
    }

    /// Metres around the centre a Map call may ask for: a map of a street or a square, not a city.
    public static let maximumMapRadius = 1000.0
    /// Features one Map reply carries at most: the 2,923 within 1000 m of Helsinki's centre fit (a
    /// reply of 706 kB); a denser centre asks for a smaller radius.
    public static let maximumMapFeatures = 5000

    public func map(latitude: Double, longitude: Double, radius: Double, by caller: Credentials)
        throws(ServiceError) -> [MapFeature]
    {
        try authorize(caller, to: .read, "Map")
        let centre = Coordinate(latitude: latitude, longitude: longitude)
        guard centre.isValid else { throw .invalidPosition(latitude: latitude, longitude: longitude) }
        guard radius.isFinite, radius >= 0, radius <= Self.maximumMapRadius else {
            throw .invalidRadius(radius: radius, maximum: Self.maximumMapRadius)
        }
        guard let catalog else { throw .noPlaces }
        let features: [MapFeature]
        do {
            // The catalog's own file: after a Refresh onto a new import, the new file's layer.
            features = try catalog.placeSet.features(within: radius, of: centre, limit: Self.maximumMapFeatures + 1)
        } catch .noMapLayer {
            throw .noMapLayer
        } catch {
            throw .storeFailed(reason: error.description)
        }
        guard features.count <= Self.maximumMapFeatures else {
            throw .tooManyFeatures(maximum: Self.maximumMapFeatures)
        }
        return features
    }

    // MARK: Details

    public func place(id: String, by caller: Credentials) throws(ServiceError) -> Place {
        try authorize(caller, to: .read, "Details")
        if OwnPlace.key(ofID: id) != nil {
            guard let site = ownPlaces.site(id: id) else { throw .unknownPlace(id: id) }
            return site.place
        }
        guard let catalog else { throw .noPlaces }
        let found: Place?
        do {
            found = try catalog.place(withID: id)
        } catch {
            throw .storeFailed(reason: error.description)
        }
        guard let found else { throw .unknownPlace(id: id) }
        return found
    }

    public func hours(of place: Place, at unixSeconds: Int) -> PlaceHours? {
        openingHours.summary(
            of: place, at: unixSeconds, holidays: hoursSettings.holidays, timeZone: hoursSettings.timeZone)
    }

    public var timeZone: TimeZoneRules { hoursSettings.timeZone }

    /// Whether `place` is open at `unixSeconds` (nil: no hours, unparsed, or unknown then): the question a
    /// ranker that weighs closed places asks, answered from the values parsed once.
    public func isOpen(_ place: Place, at unixSeconds: Int) -> Bool? {
        openingHours.isOpen(
            place, at: unixSeconds, holidays: hoursSettings.holidays, timeZone: hoursSettings.timeZone)
    }

    /// The ranker's question for a candidate, answered at `now` (the fix's arrival, wall-clock seconds) in
    /// the device's zone: a place closed then weighs `ClosedWeight=` times as much.
    private func openState(at now: Double) -> (Int, String?, Coordinate) -> OpenState {
        let cache = openingHours
        let settings = hoursSettings
        let seconds = Int(now.rounded(.down))
        return { _, raw, coordinate in
            guard let raw else { return .unknown }
            return cache.rankingState(
                raw, at: coordinate, unixSeconds: seconds, holidays: settings.holidays, timeZone: settings.timeZone)
        }
    }

    // MARK: Reloading

    /// Applies what SIGHUP applies to the core (the distance filter, the writer group, the places
    /// file), then loads the places again. The location source is the assembly's to restart.
    public func apply(_ new: Configuration) {
        loop.preconditionInLoop()
        let old = configuration
        configuration = new
        if new.distanceFilter != old.distanceFilter, (try? filter.setThreshold(new.distanceFilter)) != nil {
            Log.info("distance filter now \(new.distanceFilter.formatted(decimals: 1)) m")
            emit(.distanceFilterChanged(new.distanceFilter))
        }
        if new.closedWeight != old.closedWeight {
            do {
                ranker = try Ranker(model: RankingModel(closedWeight: new.closedWeight))
                Log.info("closed places now weigh \(new.closedWeight.formatted(decimals: 3))")
            } catch {
                Log.error("cannot apply the new closed weight: \(error)")
            }
        }
        if new.timeZone != old.timeZone || new.publicHolidays != old.publicHolidays
            || new.schoolHolidays != old.schoolHolidays
        {
            hoursSettings = HoursSettings.load(new)
            openingHours.forgetStates()
            Log.info("opening hours: evaluated in \(hoursSettings.timeZoneSource)")
        }
        let zoneChanged = new.timeZone != old.timeZone
        if new.learningSettings != old.learningSettings || zoneChanged {
            do {
                picks = try PickMemory(
                    settings: new.learningSettings, timeZone: hoursSettings.timeZone, picks: selections.picks())
                Log.info("learning: \(new.learningSettings)")
            } catch {
                Log.error("cannot apply the new learning settings: \(error)")
            }
        }
        if new.visitSettings != old.visitSettings || new.autoSelect != old.autoSelect {
            // An open visit is judged afresh under the new rules.
            do {
                visits = try VisitDetector(settings: new.visitSettings, firstID: UInt64(Self.wallClock() * 1000))
                visitPlace = try VisitPlaceTracker(autoSelectThreshold: new.autoSelect)
                visitSelection = nil
            } catch {
                Log.error("cannot apply the new visit settings: \(error)")
            }
        }
        if new.boundarySettings != old.boundarySettings {
            do {
                try boundaries.change(to: new.boundarySettings)
            } catch {
                Log.error("cannot apply the new boundary settings: \(error)")
            }
        }
        if new.writerGroup != old.writerGroup || new.readerGroup != old.readerGroup {
            writerGroup = UserDatabase.groupID(named: new.writerGroup)
            readerGroup = UserDatabase.groupID(named: new.readerGroup)
        }
        reloadPlaces(reason: "SIGHUP")
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

    /// Without fixes the last ranking is old news: stale until the next fix ranks again, even when
    /// a refresh or a reload ranks at the last fix once more.
    private var isWithoutFixes: Bool { sourceState != .fix && sourceState != .static }

    /// Markers one History call returns unless asked, and at most.
    public static let defaultHistoryLimit = 20
    public static let maximumHistoryLimit = 1000

    /// The places at `path`, or nil (with a warning) when none have been imported yet.
    static func loadCatalogIfPresent(_ path: String) throws -> PlaceCatalog? {
        do {
            try checkPOSIX(access(path, F_OK), "access")
        } catch {
            if error.errno == ENOENT {
                Log.warning(
                    "no places database at \(path): rankings stay empty until one is imported (placectl import)")
                return nil
            }
        }
        return try PlaceCatalog(path: path)
    }

    /// What makes a places file that failed to load one placed loads: the upgrade for a file of the
    /// schema before (what a package upgrade leaves where its postinst could not), else a new import.
    static func remedy(for error: any Error) -> String {
        if case .unsupportedSchema(_, let version?)? = error as? PlaceDatabaseError,
            PlaceFileUpgrade.upgradableSchemas.contains(version)
        {
            return "it is upgraded (placectl upgrade, which refreshes placed)"
        }
        return "a new import (placectl import, then placectl refresh)"
    }

    static func wallClock() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// For sd_notify STATUS=: what placed is doing, in a few words.
    public var statusLine: String {
        let places = "\(placeCount.grouped) places"
        switch sourceState {
        case .connecting: return "Waiting for gpsd, \(places)"
        case .noFix: return "No fix, \(places)"
        case .stale: return "gpsd lost, ranking \(generation) stale, \(places)"
        case .fix, .static:
            let mode = location?.mode == .threeD ? "3D fix" : "2D fix"
            let accuracy = location?.radius95.map { " ±\(Int($0.rounded())) m" } ?? ""
            return "\(sourceState == .static ? "Static position" : mode)\(accuracy), \(places), ranking \(generation)"
        }
    }
}
