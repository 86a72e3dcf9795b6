import PlacedCore
import PlacedFleet
import PlacedJSON
import PlacedStore
import PlacedSystem
import PlacedWire

/// The fleet export as an adapter: the daemon's markers, visits, moves and source states go to the
/// fleet's MQTT brokers through the durable outbox in the selection log's file (`FleetExporter`).
///
/// - Markers: as the selection journal, its rows are written in the selection's own transaction.
/// - Moves: the state (location, top place) and, with `OwnTracks=yes`, a location, at most one a second
///   (a newer move in that second replaces the one waiting; the last one is always sent).
/// - Visits (start and end), own places entered and left, and source state changes: as they happen.
/// - Commands (`AcceptCommands=yes`): applied through `applyCommand` (the daemon's), with their result
///   row in the change's transaction.
/// Places are named in `Language=`, as in the replies to calls that ask for no language.
///
/// Without `Broker=` it holds no exporter: libmosquitto is never loaded, no socket is opened.
final class FleetAdapter: DaemonSubscriber, SelectionJournal {
    /// Moves are exported at most this often, microseconds.
    static let moveInterval: UInt64 = 1_000_000

    private unowned let service: PlacesService
    private let loop: EventLoop
    private let selections: SelectionLog
    private(set) var settings: FleetSettings
    private var exporter: FleetExporter?
    /// Why the configured export could not start (a missing credential, a read-only log, ...).
    private var failure: String?
    private var started = false
    /// A move waiting for its ranking (for the top place).
    private var unranked: Fix?
    /// A move waiting for the rate limit, and when the last one was exported.
    private var held: (fix: Fix, top: RankedPlace?)?
    private var lastMoveAt: UInt64?
    private var moveTimer: EventSource?
    /// Called when the state, the broker or the last error changes (D-Bus PropertiesChanged of `Fleet`).
    var onStatusChange: (() -> Void)?
    /// Applies a fleet command to the own places (`Daemon.applyFleetCommand`); `alongside` runs in its
    /// transaction.
    var applyCommand: ((FleetCommand, _ alongside: (FleetCommandResult) throws -> Void) -> FleetCommandResult)?

    init(service: PlacesService, loop: EventLoop, selections: SelectionLog, settings: FleetSettings) {
        self.service = service
        self.loop = loop
        self.selections = selections
        self.settings = settings
        makeExporter()
    }

    /// Connects (asynchronously: nothing here waits on the network).
    func start() {
        started = true
        exporter?.start()
    }

    /// Writes the move still held back, publishes `offline`, disconnects, and writes the cursor.
    func stop() {
        releaseHeldMove()
        moveTimer = nil
        exporter?.stop()
        started = false
    }

    /// SIGHUP with a changed `[Fleet]`: the export starts again with the new settings. The outbox stays;
    /// a new broker list or device id is a new cursor, which gets everything not yet acknowledged.
    func apply(_ new: FleetSettings) {
        guard new != settings else { return }
        Log.info(new.isEnabled ? "fleet: [Fleet] changed: starting the export again" : "fleet: no Broker=: export off")
        releaseHeldMove()
        exporter?.stop()
        exporter = nil
        failure = nil
        settings = new
        makeExporter()
        if started { exporter?.start() }
        onStatusChange?()
    }

    private func makeExporter() {
        guard settings.isEnabled else { return }
        do {
            let exporter = try FleetExporter(loop: loop, settings: settings, selections: selections)
            exporter.restoreState(
                marker: service.marker.map { Record.marker($0).jsonObject }, source: service.sourceState.rawValue)
            exporter.onStatusChange = { [unowned self] _ in onStatusChange?() }
            exporter.onCommand = { [unowned self, unowned exporter] command in apply(command, exporter) }
            self.exporter = exporter
        } catch {
            failure = error.description
            Log.error("\(error); fleet export is off")
        }
    }

    /// The export's status; nil when no broker is configured. An export that could not start reports
    /// `stopped` and why.
    var status: FleetStatus? {
        if let exporter { return exporter.status }
        guard settings.isEnabled else { return nil }
        var status = FleetStatus(device: settings.deviceID ?? (try? DeviceIdentity.machineSpecific()) ?? "")
        status.lastError = failure
        return status
    }

    /// `status` as varlink's `fleet` and D-Bus's `Fleet` carry it.
    var statusRecord: Record? { status.map(Record.fleet) }

    // MARK: Selection journal

    func write(alongside marker: Marker) throws {
        // During a visit the marker is at the visit's averaged position, which has no GPS time of its own:
        // the latest fix's is the event's.
        try exporter?.recordAlongside(
            marker, record: payload(of: marker).jsonObject, gpsTime: marker.location.time ?? service.location?.time)
    }

    /// The marker as the fleet gets it: its place with every key `Details` has (phone, website, the
    /// opening hours and whether it was open at the selection's time), so a back office needs no
    /// places file of its own to show what was chosen.
    func payload(of marker: Marker) -> Record {
        var record = Record.marker(marker)
        let place = PlaceRecords(language: nil, fields: .all, time: Int(marker.time), service: service).record(
            marker.place.place, distance: marker.place.distance, likelihood: marker.place.likelihood)
        if let index = record.fields.firstIndex(where: { $0.key == "place" }) {
            record.fields[index].value = .record(place)
        }
        return record
    }

    func selectionTransactionEnded(committed: Bool) {
        exporter?.selectionTransactionEnded(committed: committed)
    }

    func selectionLogReopened() {
        if let exporter {
            exporter.selectionLogReopened()
        } else if settings.isEnabled {
            // It could not open the outbox in a read-only log: now it can.
            failure = nil
            makeExporter()
            if started { exporter?.start() }
            onStatusChange?()
        }
    }

    // MARK: Events

    func handle(_ event: DaemonEvent, from service: PlacesService) {
        guard let exporter else { return }
        switch event {
        case let .moved(fix, _, _):
            unranked = fix
        case let .ranked(ranking):
            // A move's ranking comes right after it; other rankings (a visit's, a refresh) are no move.
            guard let fix = unranked else { return }
            unranked = nil
            moved(fix, top: ranking.places.first)
        case .located:
            // A move without a ranking (no places loaded).
            guard let fix = unranked else { return }
            unranked = nil
            moved(fix, top: nil)
        case let .sourceChanged(state):
            exporter.sourceChanged(state.rawValue)
        case let .visitStarted(visit, ranking):
            let record = Record.visit(visit, clock: service.clock, ranking: ranking, language: service.language)
            exporter.visitStarted(fleetVisit(visit, record: record, place: ranking.places.first, service))
        case let .visitEnded(visit, place, selection):
            let record = Record.visit(
                visit, clock: service.clock, place: place, selection: selection, language: service.language)
            exporter.visitEnded(fleetVisit(visit, record: record, place: place, service))
        case let .boundaryCrossed(crossing):
            let record = Record.transition(crossing, clock: service.clock, language: service.language)
            let id = crossing.place.id
            exporter.crossed(
                FleetTransition(
                    record: record.jsonObject, event: crossing.transition == .entered ? .enter : .leave,
                    placeName: crossing.place.name(forLanguage: service.language),
                    key: OwnPlace.key(ofID: id).map(String.init) ?? id,
                    waypointTime: try? OwnPlaceStore(log: selections).waypointTime(of: id), fix: crossing.fix))
        case .markerPlaced, .distanceFilterChanged:
            break  // a marker's rows are written in its transaction (`write(alongside:)`)
        }
    }

    /// A command read from the broker: applied once, its result published (in the change's transaction
    /// when applied now).
    private func apply(_ command: FleetCommand, _ exporter: FleetExporter) {
        guard let applyCommand else {
            exporter.publishCommandResult(
                FleetCommandResult(
                    request: command.request, origin: command.origin,
                    outcome: .refused(FleetCommandError(.unsupported, "no own places here", request: command.request))))
            return
        }
        let result = applyCommand(command) { result throws(SelectionLogError) in
            try exporter.recordCommandResult(result)
        }
        if case .applied = result.outcome {
            exporter.commandTransactionEnded(committed: true)
        } else {
            exporter.commandTransactionEnded(committed: false)
            exporter.publishCommandResult(result)
        }
    }

    /// The visit's start or end came with a fix (the one that started or ended it): its GPS time.
    private func fleetVisit(_ visit: Visit, record: Record, place: RankedPlace?, _ service: PlacesService)
        -> FleetVisit
    {
        FleetVisit(
            record: record.jsonObject, placeName: place?.place.name(forLanguage: service.language),
            coordinate: visit.centre,
            accuracy: Fix.radius95(fromSigma: visit.accuracy), start: service.clock.wall(at: visit.startedAt),
            gpsTime: service.location?.time)
    }

    private func moved(_ fix: Fix, top: RankedPlace?) {
        let now = loop.now
        if let last = lastMoveAt, now &- last < Self.moveInterval {
            held = (fix, top)
            guard moveTimer == nil else { return }
            moveTimer = try? loop.after(Self.moveInterval - (now &- last)) { [unowned self] in
                moveTimer = nil
                releaseHeldMove()
            }
            return
        }
        export(fix, top: top)
    }

    private func releaseHeldMove() {
        guard let move = held else { return }
        held = nil
        export(move.fix, top: move.top)
    }

    private func export(_ fix: Fix, top: RankedPlace?) {
        lastMoveAt = loop.now
        exporter?.moved(
            to: fix, location: Record.location(fix, now: nil).jsonObject,
            top: top.map { Record.place($0, language: service.language).jsonObject })
    }
}

extension Record {
    /// The fleet export's status, varlink's `fleet` and D-Bus's `Fleet`: `state, broker, device, backlog,
    /// inFlight, acknowledged, dropped, rejected, lastError` (FleetStatus says what each means).
    static func fleet(_ status: FleetStatus) -> Record {
        var r = Record()
        r.set("state", .string(status.state.rawValue))
        r.set("broker", status.broker.map(Value.string))
        r.set("device", .string(status.device))
        r.set("backlog", .int(Int64(status.backlog)))
        r.set("inFlight", .int(Int64(status.inFlight)))
        r.set("acknowledged", .int(status.acknowledged))
        r.set("dropped", .int(status.dropped))
        r.set("rejected", .int(status.rejected))
        r.set("lastError", status.lastError.map(Value.string))
        return r
    }
}
