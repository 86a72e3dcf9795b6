import PlacedCore
import PlacedJSON
import PlacedStore
import PlacedSystem
import PlacedWire

/// A visit as the fleet export publishes it: the daemon's visit record (varlink keys) and what OwnTracks
/// needs beside it.
public struct FleetVisit: Sendable, Equatable {
    /// The varlink record of the visit (`VisitStarted` / `VisitEnded`).
    public var record: [String: JSON]
    /// The place the visit is at (selected during it, else the top one), for OwnTracks' `desc`.
    public var placeName: String?
    /// The visit's centre and its accuracy, the 95 % radius in metres.
    public var coordinate: Coordinate
    public var accuracy: Double?
    /// Wall-clock start of the visit, seconds since the Unix epoch.
    public var start: Double
    /// The GPS time of the fix that started or ended it, when known.
    public var gpsTime: Double?

    public init(
        record: [String: JSON], placeName: String?, coordinate: Coordinate, accuracy: Double?, start: Double,
        gpsTime: Double?
    ) {
        self.record = record
        self.placeName = placeName
        self.coordinate = coordinate
        self.accuracy = accuracy
        self.start = start
        self.gpsTime = gpsTime
    }
}

/// An own place entered or left, as the fleet export publishes it.
public struct FleetTransition: Sendable, Equatable {
    /// The varlink record of the crossing (`Transition`: event, id, name, kind, location, time).
    public var record: [String: JSON]
    public var event: FleetPayload.TransitionEvent
    /// The place's name and its key (the `<key>` of `own:<key>`), OwnTracks' `desc` and `rid`.
    public var placeName: String
    public var key: String
    /// The `tst` of the OwnTracks waypoint that made the place, if one did: OwnTracks' `wtst`.
    public var waypointTime: Int64?
    /// The fix that confirmed the crossing.
    public var fix: Fix

    public init(
        record: [String: JSON], event: FleetPayload.TransitionEvent, placeName: String, key: String,
        waypointTime: Int64?, fix: Fix
    ) {
        self.record = record
        self.event = event
        self.placeName = placeName
        self.key = key
        self.waypointTime = waypointTime
        self.fix = fix
    }
}

/// The fleet export: events become outbox rows in the selection log's database, and the rows go to the
/// brokers in order, over one MQTT connection at a time, driven by the daemon's event loop.
///
/// Topics (`<device>`: `DeviceId=`): `placed/<device>/marker`, `/visit` and `/transition` (every one),
/// `/state` (retained: location, top place, open visit, marker, source), `/status` (`online` retained,
/// and `offline` as the last will); with `OwnTracks=yes` also `owntracks/<user>/<device>` (`location`, on
/// each move) and `owntracks/<user>/<device>/event` (`transition` on visits and own places).
///
/// With `AcceptCommands=yes` it subscribes at QoS 1 to `placed/<device>/cmd` (and with `OwnTracks=yes`
/// to `owntracks/<user>/<device>/cmd`) on each connection; a command read from the current connection
/// goes to `onCommand`, a malformed one gets its error result on `placed/<device>/cmd/result` at once.
public final class FleetExporter {
    public let settings: FleetSettings
    public let device: String
    public let outbox: Outbox
    private let loop: EventLoop
    private let password: String?
    /// Where the connection to the brokers stands; changed only by `setState`.
    private var state: State = .stopped
    private var rotation: BrokerRotation
    /// The messages in flight on the current connection, and the cursor in memory: every message up to
    /// `acknowledgedThrough` is acknowledged.
    private var window: DeliveryWindow
    private var poison = PoisonMessageDetector()
    /// The failure last logged: the same one again (a broker down for hours) goes to the debug log.
    private var lastFailure: String?
    /// Events waiting to be written after the current loop iteration.
    private var unwritten = UnwrittenEvents()
    /// What `placed/<device>/state` says now.
    private var snapshot: [String: JSON] = [:]
    /// The state and the events waiting before the selection's or command's transaction in progress
    /// (`recordAlongside`, `recordCommandResult`).
    private var beforeTransaction: (snapshot: [String: JSON], unwritten: UnwrittenEvents)?
    private var flushSource: EventSource?
    private var cursorTimer: EventSource?
    /// Messages acknowledged since the cursor was last written (still rows in the outbox).
    private var uncommittedAcknowledgements = 0
    /// Events the outbox could not store.
    private var unrecorded: Int64 = 0
    private var lastDropLog: UInt64 = 0
    public private(set) var status: FleetStatus
    /// Called when the state, the broker or the last error changes (for D-Bus PropertiesChanged).
    public var onStatusChange: ((FleetStatus) -> Void)?
    /// Applies a command read from the broker (`AcceptCommands=yes`); without it commands are refused.
    public var onCommand: ((FleetCommand) -> Void)?

    /// The connection's lifecycle. Each state owns what only it needs, so leaving it drops its lookup,
    /// its connection and its timers.
    private enum State: CustomStringConvertible {
        /// Not started, or stopped.
        case stopped
        /// Looking the current broker's name up.
        case resolving(HostLookup)
        /// Waiting for the broker to accept the connection; `untried`: its name's other addresses.
        case connecting(MQTTConnection, untried: [String])
        case connected(Link)
        /// Trying again on the next loop iteration: the name's next address, or the next broker.
        case retrying(EventSource?)
        /// Every broker failed in a row: trying the current one again after `delay` microseconds.
        case backingOff(EventSource?, delay: UInt64)

        var connection: MQTTConnection? {
            switch self {
            case .connecting(let connection, _): connection
            case .connected(let link): link.connection
            case .stopped, .resolving, .retrying, .backingOff: nil
            }
        }

        /// The state as `placectl status`, D-Bus and varlink show it.
        var shown: FleetStatus.State {
            switch self {
            case .stopped: .stopped
            case .resolving, .connecting, .retrying: .connecting
            case .connected: .connected
            case .backingOff: .backoff
            }
        }

        var description: String {
            switch self {
            case .stopped: "stopped"
            case .resolving(let lookup): "resolving \(lookup.host)"
            case .connecting(let connection, _):
                "connecting to \(connection.broker)"
                    + (connection.host == connection.broker.host ? "" : " at \(connection.host)")
            case .connected(let link): "connected to \(link.connection.broker)"
            case .retrying: "retrying"
            case .backingOff(_, let delay): "backing off \(FleetExporter.seconds(delay)) s"
            }
        }
    }

    /// What one accepted connection needs, for as long as it lasts.
    private final class Link {
        let connection: MQTTConnection
        /// When the broker accepted the connection, and the cursor then.
        let connectedAt: UInt64
        let cursorAtConnect: Int64
        /// Message id → outbox sequence number, for the messages in flight.
        var sequences: [Int32: Int64] = [:]
        /// When a message was last sent (the connection's start before any).
        var lastSendAt: UInt64
        /// When the cursor last moved (the connection's start before it did).
        var lastProgressAt: UInt64
        /// While probing for a message the broker will not take: the connection's quiet period, nothing sent.
        var quietPeriod: EventSource?
        /// Message ids of the command topics' subscriptions the broker has not acknowledged yet.
        var subscriptionsPending: Set<Int32> = []
        /// While messages are in flight: the wake-up that gives the connection up when no PUBACK comes.
        var acknowledgementWatch: EventSource?
        /// placed gave the connection up because the broker turned a message away for now.
        var refusedForNow = false

        init(connection: MQTTConnection, at time: UInt64, cursor: Int64) {
            self.connection = connection
            connectedAt = time
            cursorAtConnect = cursor
            lastSendAt = time
            lastProgressAt = time
        }
    }

    /// Events not yet in the outbox: updates, and visits (`durable`: written with a sync to the disk).
    private struct UnwrittenEvents {
        var builds: [(Int64) -> Outbox.Message] = []
        var durable = false

        mutating func append(_ build: @escaping (Int64) -> Outbox.Message, durable: Bool) {
            builds.append(build)
            self.durable = self.durable || durable
        }
    }

    /// Reads the password credential and opens the outbox; connects only on `start()`.
    public init(loop: EventLoop, settings: FleetSettings, selections: SelectionLog) throws(FleetError) {
        guard settings.isEnabled else { throw .configuration("no Broker= configured") }
        do {
            try settings.validate()
        } catch {
            throw .configuration(error.description)
        }
        self.loop = loop
        self.settings = settings
        // libmosquitto is opened now, not at the first connection: a device without it learns at start.
        _ = try MosquittoLibrary.shared()
        if let configured = settings.deviceID {
            device = configured
        } else {
            device = try DeviceIdentity.machineSpecific()
        }
        if let name = settings.passwordCredential {
            do {
                password = try ServiceCredential.read(name)
            } catch {
                throw .credential("PasswordCredential=\(name): \(error)")
            }
        } else {
            password = nil
        }
        do {
            outbox = try Outbox(
                log: selections, configuration: settings.configurationKey(device: device), limit: settings.backlog)
        } catch {
            throw .configuration("cannot open the outbox: \(error)")
        }
        rotation = BrokerRotation(
            count: settings.brokers.count, stablePeriod: UInt64(settings.keepAlive) * 1_000_000)
        window = DeliveryWindow(capacity: settings.inFlight, after: outbox.acknowledged)
        status = FleetStatus(device: device)
        refreshCounts()
    }

    deinit {
        state.connection?.close()
    }

    // MARK: Topics

    public var markerTopic: String { "placed/\(device)/marker" }
    public var visitTopic: String { "placed/\(device)/visit" }
    public var stateTopic: String { "placed/\(device)/state" }
    public var statusTopic: String { "placed/\(device)/status" }
    public var ownTracksTopic: String { "owntracks/\(settings.ownTracksUser)/\(device)" }
    public var ownTracksEventTopic: String { ownTracksTopic + "/event" }
    public var transitionTopic: String { "placed/\(device)/transition" }
    public var commandTopic: String { "placed/\(device)/cmd" }
    public var commandResultTopic: String { "placed/\(device)/cmd/result" }
    public var ownTracksCommandTopic: String { ownTracksTopic + "/cmd" }

    /// The topics commands come on: none unless `AcceptCommands=yes`.
    public var commandTopics: [String] {
        guard settings.acceptCommands else { return [] }
        return settings.ownTracks ? [commandTopic, ownTracksCommandTopic] : [commandTopic]
    }

    // MARK: Running

    public func start() {
        guard case .stopped = state else { return }
        Log.info(
            "fleet: device \(device), \(settings.brokers.count) broker(s), \(outbox.count) event(s) in the outbox"
                + (outbox.dropped > 0 ? ", \(outbox.dropped) dropped so far" : ""))
        connect(reason: "started")
    }

    /// Publishes `offline` (a clean disconnect makes the broker discard the will), disconnects, and keeps
    /// whatever is not acknowledged for the next start.
    public func stop() {
        if case .stopped = state { return }
        writeUnwritten()
        if let connection = state.connection {
            if connection.isConnected {
                _ = try? connection.publish(topic: statusTopic, payload: Array("offline".utf8), retain: true)
            }
            connection.close()
        }
        commitCursor()
        cursorTimer = nil
        flushSource = nil
        setState(.stopped, reason: "stopped")
    }

    /// Every transition goes through here: it is logged at debug, and the status follows the new state.
    private func setState(_ new: State, reason: String) {
        Log.debug("fleet: \(state) → \(new) (\(reason))")
        state = new
        refreshCounts()
        let broker: String?
        if case .stopped = new {
            broker = nil
        } else {
            broker = settings.brokers[rotation.index].description
        }
        guard new.shown != status.state || broker != status.broker else { return }
        status.state = new.shown
        status.broker = broker
        onStatusChange?(status)
    }

    /// Tries the current broker, at `untried`'s first address when its name was looked up: a numeric
    /// host at once; a name is looked up first, off the loop, and each of its addresses is tried in turn
    /// (libmosquitto alone would take the first and block on the lookup). A TLS broker gets its name,
    /// which the certificate check needs: libmosquitto resolves it again, from the answer just received
    /// (systemd-resolved's or nscd's cache, or the DNS server that has just answered).
    private func connect(untried: [String] = [], reason: String) {
        let broker = settings.brokers[rotation.index]
        if let address = untried.first {
            open(broker, host: broker.tls ? broker.host : address, untried: Array(untried.dropFirst()), reason: reason)
        } else if HostLookup.isNumeric(broker.host) {
            open(broker, host: broker.host, untried: [], reason: reason)
        } else {
            do {
                let lookup = try HostLookup(loop: loop, host: broker.host, port: broker.port) {
                    [unowned self] outcome in
                    switch outcome {
                    case .failed(let reason): failed("\(broker): \(reason)")
                    case .addresses(let found):
                        // TLS connects by name once; plain MQTT tries every address.
                        connect(untried: broker.tls ? [found[0]] : found, reason: "\(found.count) address(es)")
                    }
                }
                setState(.resolving(lookup), reason: reason)
            } catch {
                failed(error.description)
            }
        }
    }

    private func open(_ broker: BrokerAddress, host: String, untried: [String], reason: String) {
        let options = MQTTConnection.Options(
            clientID: "placed-\(device)", keepAlive: settings.keepAlive, protocolVersion: settings.protocolVersion,
            username: settings.username, password: password, caFile: settings.caFile, certFile: settings.certFile,
            keyFile: settings.keyFile, will: (statusTopic, Array("offline".utf8)),
            maximumInFlight: settings.inFlight,
            connectTimeout: UInt64(min(max(settings.keepAlive, 10), 30)) * 1_000_000)
        do {
            let connection = try MQTTConnection(loop: loop, broker: broker, host: host, options: options)
            connection.onEvent = { [unowned self, unowned connection] event in handle(event, from: connection) }
            setState(.connecting(connection, untried: untried), reason: reason)
        } catch {
            failed(error.description, untried: untried)
        }
    }

    private func handle(_ event: MQTTConnection.Event, from source: MQTTConnection) {
        switch (state, event) {
        case (.connecting(let connection, _), .connected) where connection === source:
            connected(source)
        case (.connecting(let connection, let untried), .disconnected(let reason, let tls)) where connection === source:
            failed("\(source.broker): \(reason)", tls: tls, untried: untried)
        case (.connected(let link), .acknowledged(let mid, let reason)) where link.connection === source:
            acknowledged(mid, reason: reason, on: link)
        case (.connected(let link), .disconnected(let reason, let tls)) where link.connection === source:
            disconnected(link, reason: reason, tls: tls)
        case (.connected(let link), .subscribed(let mid, let granted)) where link.connection === source:
            link.subscriptionsPending.remove(mid)
            if granted.contains(where: { $0 > 1 }) {
                note("\(source.broker) refused the subscription to \(commandTopics.joined(separator: ", "))")
            } else if link.subscriptionsPending.isEmpty {
                // Said once every topic is subscribed: a command sent after this line is received.
                Log.info("fleet: accepting commands on \(commandTopics.joined(separator: ", "))")
            }
        case (.connected(let link), .message(let topic, let payload)) where link.connection === source:
            // Only what the configured broker delivers on this connection, on a topic subscribed to.
            received(payload, on: topic)
        default:
            break  // from a connection given up already
        }
    }

    private func connected(_ connection: MQTTConnection) {
        rotation.connected(at: loop.now)
        lastFailure = nil
        status.lastError = nil
        Log.info("fleet: connected to \(connection.broker), \(outbox.count) event(s) to send")
        window = DeliveryWindow(capacity: poison.isProbing ? 1 : settings.inFlight, after: window.acknowledgedThrough)
        let link = Link(connection: connection, at: loop.now, cursor: window.acknowledgedThrough)
        _ = try? connection.publish(topic: statusTopic, payload: Array("online".utf8), retain: true)
        if !commandTopics.isEmpty {
            do {
                link.subscriptionsPending = Set(try connection.subscribe(commandTopics))
            } catch {
                note("cannot subscribe to the command topics: \(error)")
            }
        }
        setState(.connected(link), reason: "CONNACK")
        if let quiet = poison.quietPeriod {
            // A connection that drops by itself does so now, before any message could be blamed.
            link.quietPeriod = try? loop.after(quiet) { [unowned self, unowned link] in
                link.quietPeriod = nil
                pump()
            }
        }
        pump()
    }

    private func acknowledged(_ mid: Int32, reason: Int32, on link: Link) {
        guard let sequence = link.sequences.removeValue(forKey: mid) else { return }  // the status message
        switch PublishAcknowledgement(reasonCode: Int(reason)) {
        case .accepted: break
        case .refusedForGood: refused(sequence, reason: reason)
        case .refusedForNow:
            // Not acknowledged: the cursor stays before it, and the next connection, after the backoff,
            // sends it again with everything after it.
            rotation.refusedForNow(at: loop.now)
            link.refusedForNow = true
            link.connection.abandon(
                "the broker turned event \(FleetPayload.messageID(device: device, sequence: sequence)) away "
                    + "for now (MQTT reason 0x\(String(reason, radix: 16))); it is sent again")
            return
        }
        rotation.acknowledged()
        let inFlight = window.count
        defer { uncommittedAcknowledgements += inFlight - window.count }
        if let through = window.acknowledge(sequence) {
            poison.acknowledged(through: through)
            link.lastProgressAt = loop.now
        }
        // Nothing in flight: no PUBACK to wait for, and no wake-up for it while idle.
        if window.isEmpty { link.acknowledgementWatch = nil }
        scheduleFlush()
    }

    private func disconnected(_ link: Link, reason: String, tls: Bool) {
        let unacknowledged = window.unacknowledged
        window.restart()
        // A connection placed gave up for a refusal the broker stated is no evidence of a close.
        if !link.refusedForNow {
            let wasProbing = poison.isProbing
            let skipped = poison.connectionEnded(
                progressed: window.acknowledgedThrough > link.cursorAtConnect, inFlight: unacknowledged,
                sinceLastSend: loop.now &- link.lastSendAt, upBeforeSend: link.lastSendAt - link.connectedAt,
                cursor: window.acknowledgedThrough)
            if poison.isProbing, !wasProbing {
                Log.warning(
                    "fleet: the last connections ended with nothing acknowledged: sending one event at a time, "
                        + "each after a quiet while, to find one the broker will not take")
            }
            if let skipped {
                window.giveUp(on: skipped)
                uncommittedAcknowledgements += 1
                status.rejected += 1
                Log.error(
                    "fleet: \(link.connection.broker) closed the connection each time event "
                        + "\(FleetPayload.messageID(device: device, sequence: skipped)) was sent alone: skipped, "
                        + "counted as refused (an ACL denying its topic?)")
                scheduleFlush()
            }
        }
        failed("\(link.connection.broker): \(reason)", tls: tls)
    }

    /// The current broker failed; `untried`: the other addresses of its name, tried first. `tls`: the TLS
    /// handshake failed, as when the broker's certificate is not trusted: an error.
    private func failed(_ reason: String, tls: Bool = false, untried: [String] = []) {
        // Not from inside the failing connection's own call chain: on the next iteration.
        if !untried.isEmpty {
            // The broker's name has more addresses: the next one now, before the broker counts as failed.
            let retry = try? loop.onNextIteration { [unowned self] in
                connect(untried: untried, reason: "the next address")
            }
            setState(.retrying(retry), reason: reason)
            return
        }
        let quiet = reason == lastFailure
        lastFailure = reason
        status.lastError = reason
        let (_, delay) = rotation.failed(at: loop.now)
        let next = settings.brokers[rotation.index]
        let plan = delay == 0 ? "trying \(next) now" : "retrying \(next) in \(Self.seconds(delay)) s"
        Log.log(
            tls ? .error : (quiet ? .debug : .warning),
            "fleet: \(reason); \(plan) (\(outbox.count) event(s) waiting)")
        if delay == 0 {
            let retry = try? loop.onNextIteration { [unowned self] in connect(reason: "the next broker") }
            setState(.retrying(retry), reason: reason)
        } else {
            let retry = try? loop.after(delay) { [unowned self] in connect(reason: "the backoff is over") }
            setState(.backingOff(retry, delay: delay), reason: reason)
        }
    }

    private func refused(_ sequence: Int64, reason: Int32) {
        status.rejected += 1
        Log.error(
            "fleet: the broker refused event \(FleetPayload.messageID(device: device, sequence: sequence)) "
                + "(MQTT reason 0x\(String(reason, radix: 16))): it is not sent again")
    }

    // MARK: Sending

    /// Hands the broker what the outbox holds after the last message sent, while the window has room.
    private func pump() {
        guard case .connected(let link) = state, link.connection.isConnected, link.quietPeriod == nil else { return }
        while window.room > 0 {
            let asked = window.room
            let entries: [Outbox.Entry]
            do {
                entries = try outbox.pending(after: window.lastSent, limit: asked)
            } catch {
                note("cannot read the outbox: \(error)")
                return
            }
            for entry in entries {
                do {
                    let mid = try link.connection.publish(
                        topic: entry.message.topic, payload: entry.message.payload, retain: entry.message.retained)
                    window.sent(entry.sequence)
                    link.sequences[mid] = entry.sequence
                    link.lastSendAt = loop.now
                } catch .notConnected {
                    return
                } catch {
                    // This message cannot be sent at all (too large for the broker, say): skip it.
                    window.sent(entry.sequence)
                    _ = window.acknowledge(entry.sequence)
                    status.rejected += 1
                    Log.error("fleet: event \(entry.sequence) not sent: \(error)")
                }
            }
            if entries.count < asked { break }
        }
        status.inFlight = window.count
        if !window.isEmpty, link.acknowledgementWatch == nil {
            watchAcknowledgements(on: link, after: acknowledgementTimeout)
        }
    }

    /// A broker that keeps the connection (answering pings) but acknowledges nothing, such as a cluster
    /// node whose storage lost its leader, would hold the messages in flight forever: MQTT resends only on
    /// a new connection. After `acknowledgementTimeout` without a PUBACK the connection is given up, and
    /// the next broker gets everything unacknowledged.
    private func watchAcknowledgements(on link: Link, after delay: UInt64) {
        link.acknowledgementWatch = try? loop.after(delay) { [unowned self, unowned link] in
            link.acknowledgementWatch = nil
            guard link.connection.isConnected, !window.isEmpty else { return }
            let waited = loop.now &- link.lastProgressAt
            if waited >= acknowledgementTimeout {
                link.connection.abandon(
                    "no PUBACK for \(Self.seconds(waited)) s with \(window.count) message(s) in flight")
            } else {
                watchAcknowledgements(on: link, after: acknowledgementTimeout - waited)
            }
        }
    }

    /// Two keepalives, at least 10 s.
    private var acknowledgementTimeout: UInt64 { UInt64(max(2 * settings.keepAlive, 10)) * 1_000_000 }

    /// Once per loop iteration: write the events that came in, send more, and have the cursor follow
    /// what was acknowledged.
    private func scheduleFlush() {
        guard flushSource == nil else { return }
        flushSource = try? loop.onNextIteration { [unowned self] in
            flushSource = nil
            writeUnwritten()
            pump()
            scheduleCursorCommit()
            refreshCounts()
        }
    }

    /// The cursor is written at most every half second: on flash storage each write wears the medium, and
    /// a cursor a moment behind only means those messages are sent again after a crash.
    private func scheduleCursorCommit() {
        guard window.acknowledgedThrough > outbox.acknowledged, cursorTimer == nil else { return }
        cursorTimer = try? loop.after(Self.cursorInterval) { [unowned self] in
            cursorTimer = nil
            commitCursor()
            refreshCounts()
        }
    }

    static let cursorInterval: UInt64 = 500_000

    private func commitCursor() {
        let through = window.acknowledgedThrough
        guard through > outbox.acknowledged else { return }
        do {
            try outbox.acknowledge(through: through)
            uncommittedAcknowledgements = 0
        } catch {
            // Kept in memory; written with the next acknowledgement. Lost at a crash, it only means
            // those messages are sent again.
            note("cannot move the outbox cursor: \(error)")
        }
    }

    /// After `SelectionLog.reopen()` made a read-only log writable: the outbox is read again from the new
    /// connection.
    public func selectionLogReopened() {
        do {
            try outbox.load()
            if outbox.acknowledged > window.acknowledgedThrough, window.isEmpty {
                window = DeliveryWindow(capacity: window.capacity, after: outbox.acknowledged)
            }
            uncommittedAcknowledgements = 0
            refreshCounts()
            scheduleFlush()
        } catch {
            note("cannot read the outbox: \(error)")
        }
    }

    // MARK: Events (from the daemon)

    /// Records `marker` in the selection log with its outbox rows, in one transaction (what the daemon
    /// does through `recordAlongside` and `selectionTransactionEnded`). `record`: the daemon's varlink
    /// record of the recorded marker.
    public func append(
        _ marker: Marker, to selections: SelectionLog, record: (Marker) -> [String: JSON]
    ) throws(SelectionLogError) -> Marker {
        do {
            let recorded = try selections.append(marker) { recorded in
                try recordAlongside(recorded, record: record(recorded), gpsTime: recorded.location.time)
            }
            selectionTransactionEnded(committed: true)
            return recorded
        } catch {
            selectionTransactionEnded(committed: false)
            throw error
        }
    }

    /// Inside the transaction that records a selection (`SelectionLog.append(_:alongside:)`), after its
    /// row: the events waiting to be written (so they keep their order), then the marker (`record`: its
    /// varlink record) and the state with it. They commit with the selection or not at all: a selection
    /// the user saw acknowledged is always exported.
    /// `gpsTime`: the GPS time of the fix the selection was made at (its location's, else the latest fix's).
    public func recordAlongside(_ marker: Marker, record: [String: JSON], gpsTime: Double?) throws(SelectionLogError) {
        beforeTransaction = (snapshot, unwritten)
        let stamp = FleetStamp.now(gpsTime: gpsTime)
        snapshot["marker"] = .object(record)
        let builds =
            unwritten.builds + [
                message(.marker, topic: markerTopic, record: record, stamp: stamp), stateMessage(stamp),
            ]
        unwritten = UnwrittenEvents()
        let appended = try outbox.append(builds)
        if appended.dropped > 0 { droppedUpdates(appended.dropped) }
    }

    /// The selection's transaction is over. Rolled back, its rows went with it: the state and the events
    /// waiting are as before, and the outbox is counted again.
    public func selectionTransactionEnded(committed: Bool) {
        guard let before = beforeTransaction else { return }
        beforeTransaction = nil
        if !committed {
            snapshot = before.snapshot
            unwritten = UnwrittenEvents(
                builds: before.unwritten.builds + unwritten.builds,
                durable: before.unwritten.durable || unwritten.durable)
            try? outbox.load()
        }
        scheduleFlush()
    }

    /// What `placed/<device>/state` starts from (the last marker, the source's state), before any event:
    /// the first state sent after a restart is whole.
    public func restoreState(marker: [String: JSON]?, source: String?) {
        if let marker { snapshot["marker"] = .object(marker) }
        if let source { snapshot["source"] = .string(source) }
    }

    /// A move, after its ranking: the state (location, top place) and, with OwnTracks, a location.
    /// `location`: the varlink location record; `top`: the first place of the ranking, if any.
    public func moved(to fix: Fix, location: [String: JSON], top: [String: JSON]?) {
        snapshot["location"] = .object(location)
        snapshot["top"] = top.map(JSON.object) ?? .null
        let stamp = FleetStamp.now(gpsTime: fix.time)
        enqueue(stateMessage(stamp), durable: false)
        if settings.ownTracks {
            enqueue(
                ownTracksMessage(.location, topic: ownTracksTopic, stamp: stamp, retained: true) { tid, id in
                    FleetPayload.ownTracksLocation(fix: fix, tid: tid, id: id, stamp: stamp)
                }, durable: false)
        }
    }

    /// The location source's state changed (`SourceState`: connecting, no-fix, fix, stale, static).
    public func sourceChanged(_ state: String) {
        snapshot["source"] = .string(state)
        enqueue(stateMessage(.now()), durable: false)
    }

    public func visitStarted(_ visit: FleetVisit) { visited(visit, event: .enter) }

    public func visitEnded(_ visit: FleetVisit) { visited(visit, event: .leave) }

    private func visited(_ visit: FleetVisit, event: FleetPayload.TransitionEvent) {
        let stamp = FleetStamp.now(gpsTime: visit.gpsTime)
        var record = visit.record
        // The envelope's `id` is the message's: the visit's own number goes as `visit`, as a marker's is
        // its `selection`.
        record["visit"] = record.removeValue(forKey: "id")
        record["event"] = .string(event == .enter ? "started" : "ended")
        snapshot["visit"] = event == .enter ? .object(visit.record) : .null
        enqueue(message(.visit, topic: visitTopic, record: record, stamp: stamp), durable: true)
        enqueue(stateMessage(stamp), durable: true)
        if settings.ownTracks {
            enqueue(
                ownTracksMessage(.visit, topic: ownTracksEventTopic, stamp: stamp) { tid, id in
                    FleetPayload.ownTracksTransition(
                        event, place: visit.placeName ?? "", coordinate: visit.coordinate, accuracy: visit.accuracy,
                        visitStart: visit.start, tid: tid, id: id, stamp: stamp)
                }, durable: true)
        }
    }

    /// An own place entered or left: `placed/<device>/transition` and, with OwnTracks, a `transition`
    /// on `owntracks/<user>/<device>/event`, written durably.
    public func crossed(_ transition: FleetTransition) {
        let stamp = FleetStamp.now(gpsTime: transition.fix.time)
        var record = transition.record
        // The envelope's `id` is the message's: the place's id goes as `place`.
        record["place"] = record.removeValue(forKey: "id")
        enqueue(message(.transition, topic: transitionTopic, record: record, stamp: stamp), durable: true)
        if settings.ownTracks {
            enqueue(
                ownTracksMessage(.transition, topic: ownTracksEventTopic, stamp: stamp) { tid, id in
                    FleetPayload.ownTracksRegionTransition(
                        transition.event, place: transition.placeName, key: transition.key,
                        waypointTime: transition.waypointTime, fix: transition.fix, tid: tid, id: id, stamp: stamp)
                }, durable: true)
        }
    }

    /// An OwnTracks message: its payload made from the tracker id and the message's `_id`, which is
    /// known only once the outbox numbers it.
    private func ownTracksMessage(
        _ kind: Outbox.Kind, topic: String, stamp: FleetStamp, retained: Bool = false,
        payload: @escaping (_ tid: String, _ id: String) -> [UInt8]
    ) -> (Int64) -> Outbox.Message {
        let tid = FleetPayload.trackerID(device: device)
        return { [device] sequence in
            Outbox.Message(
                kind: kind, topic: topic,
                payload: payload(tid, FleetPayload.messageID(device: device, sequence: sequence)),
                retained: retained, systemTime: stamp.systemTime, gpsTime: stamp.gpsTime,
                clockSynchronized: stamp.clockSynchronized)
        }
    }

    // MARK: Commands (from the fleet)

    private func received(_ payload: [UInt8], on topic: String) {
        let origin: FleetCommand.Origin
        switch topic {
        case commandTopic where settings.acceptCommands: origin = .placed
        case ownTracksCommandTopic where settings.acceptCommands && settings.ownTracks: origin = .ownTracks
        default:
            Log.debug("fleet: a message on \(topic), which is no command topic: ignored")
            return
        }
        do throws(FleetCommandError) {
            let command = try FleetCommand.parse(payload, origin: origin)
            guard let onCommand else {
                throw FleetCommandError(.unsupported, "this device applies no commands", request: command.request)
            }
            onCommand(command)
        } catch {
            Log.warning("fleet: command on \(topic) refused, nothing changed: \(error)")
            publishCommandResult(FleetCommandResult(request: error.request, origin: origin, outcome: .refused(error)))
        }
    }

    /// A command's result on `placed/<device>/cmd/result`, written durably after the current loop
    /// iteration: a refusal, or a command applied before.
    public func publishCommandResult(_ result: FleetCommandResult) {
        enqueue(commandResultMessage(result), durable: true)
    }

    /// Inside the transaction that applies a command (`OwnPlaceStore.apply`): the events waiting to be
    /// written (so a transition seen before the command keeps its place before the result), then the
    /// result; they commit with the change or not at all. `commandTransactionEnded` must follow.
    public func recordCommandResult(_ result: FleetCommandResult) throws(SelectionLogError) {
        beforeTransaction = (snapshot, unwritten)
        let builds = unwritten.builds + [commandResultMessage(result)]
        unwritten = UnwrittenEvents()
        let appended = try outbox.append(builds)
        if appended.dropped > 0 { droppedUpdates(appended.dropped) }
    }

    /// The command's transaction is over: as a selection's (`selectionTransactionEnded`).
    public func commandTransactionEnded(committed: Bool) { selectionTransactionEnded(committed: committed) }

    private func commandResultMessage(_ result: FleetCommandResult) -> (Int64) -> Outbox.Message {
        message(.result, topic: commandResultTopic, record: result.record, stamp: .now())
    }

    private func message(
        _ kind: Outbox.Kind, topic: String, record: [String: JSON], stamp: FleetStamp, retained: Bool = false
    ) -> (Int64) -> Outbox.Message {
        { [device] sequence in
            Outbox.Message(
                kind: kind, topic: topic,
                payload: FleetPayload.placed(
                    type: kind.rawValue, record: record, device: device, sequence: sequence, stamp: stamp),
                retained: retained, systemTime: stamp.systemTime, gpsTime: stamp.gpsTime,
                clockSynchronized: stamp.clockSynchronized)
        }
    }

    /// `placed/<device>/state` as the snapshot stands now, retained.
    private func stateMessage(_ stamp: FleetStamp) -> (Int64) -> Outbox.Message {
        message(.state, topic: stateTopic, record: snapshot, stamp: stamp, retained: true)
    }

    /// Writes happen after the current loop iteration, in one transaction: a move's broadcast never
    /// waits for the disk.
    private func enqueue(_ build: @escaping (Int64) -> Outbox.Message, durable: Bool) {
        unwritten.append(build, durable: durable)
        scheduleFlush()
    }

    private func writeUnwritten() {
        guard !unwritten.builds.isEmpty else { return }
        let events = unwritten
        unwritten = UnwrittenEvents()
        do {
            let appended = try outbox.append(durable: events.durable, events.builds)
            if appended.dropped > 0 { droppedUpdates(appended.dropped) }
        } catch {
            // A full or read-only disk: the events are lost, counted and reported; ranking goes on.
            unrecorded += Int64(events.builds.count)
            note("\(events.builds.count) event(s) not recorded: \(error)")
        }
    }

    private func droppedUpdates(_ count: Int) {
        let now = loop.now
        guard lastDropLog == 0 || now &- lastDropLog >= 60_000_000 else { return }
        lastDropLog = now
        Log.warning(
            "fleet: the outbox holds \(settings.backlog) events (Backlog=): dropped the oldest \(count) "
                + "location/state update(s), \(outbox.dropped) in all; markers and visits are kept")
    }

    // MARK: Status

    private func note(_ error: String) {
        status.lastError = error
        Log.error("fleet: \(error)")
        onStatusChange?(status)
    }

    private func refreshCounts() {
        status.backlog = max(0, outbox.count - uncommittedAcknowledgements)
        status.acknowledged = max(outbox.acknowledged, window.acknowledgedThrough)
        status.inFlight = window.count
        status.dropped = outbox.dropped + unrecorded
    }

    static func seconds(_ microseconds: UInt64) -> String { (Double(microseconds) / 1e6).formatted(decimals: 1) }
}
