import PlacedCore
import PlacedGPS
import PlacedStore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// placed, assembled: the event loop, the daemon's core, its adapters and its location source,
/// started in a fixed order (as systemd's timedated `run()` does) and stopped in reverse.
///
/// 0. the places file's readahead (`PlaceFileReadahead.start`): the disk reads what opening it and the
///    first ranking touch while the rest is built, instead of one page fault at a time later (a Helsinki
///    file evicted from the page cache: 19 reads one after another, now two steps of one or two requests);
/// 1. the event loop and its signals (SIGTERM/SIGINT stop, SIGHUP reloads);
/// 2. the core: places, selection log, last marker;
/// 3. the adapters, each subscribed to the core: the journal first (a selection is logged before
///    anyone hears of it), then the fleet export (also the core's selection journal: its outbox rows
///    commit with each selection), then varlink, then D-Bus;
/// 4. the location source, delivering to the core; then the fleet export connects (asynchronously);
/// 5. READY=1, then the watchdog.
public final class PlacedService {
    private let loader: ConfigurationLoader
    private var configuration: Configuration
    private let loop: EventLoop
    private let daemon: Daemon
    private var signals: [EventSource] = []
    private var journal: JournalAdapter?
    private var fleet: FleetAdapter?
    private var varlink: VarlinkAdapter?
    private var bus: BusAdapter?
    private var source: LocationSource?

    /// Asks for the places file, builds the core (steps 0 to 2); `run()` does the rest.
    public init(configuration: Configuration, loader: ConfigurationLoader) throws {
        self.loader = loader
        self.configuration = configuration
        Log.minimumPriority = configuration.logLevel
        PlaceFileReadahead.start(path: configuration.databasePath)
        loop = try EventLoop()
        daemon = try Daemon(configuration: configuration, loop: loop)
    }

    /// Runs until SIGTERM or SIGINT; returns the exit status.
    public func run() throws -> Int32 {
        for signal in [SIGTERM, SIGINT] {
            signals.append(
                try loop.onSignal(signal) { [unowned self] in
                    Log.info("shutting down")
                    ServiceNotifier.stopping()
                    loop.exit(0)
                })
        }
        signals.append(try loop.onSignal(SIGHUP) { [unowned self] in reload() })

        let journal = JournalAdapter()
        daemon.subscribe(journal)
        self.journal = journal
        let fleet = FleetAdapter(
            service: daemon, loop: loop, selections: daemon.selectionLog, settings: configuration.fleet)
        daemon.subscribe(fleet)
        daemon.selectionJournal = fleet
        fleet.applyCommand = { [unowned daemon] command, alongside in
            daemon.applyFleetCommand(command, alongside: alongside)
        }
        self.fleet = fleet
        let varlink = try VarlinkAdapter.start(service: daemon, loop: loop, socketPath: configuration.socketPath)
        varlink.fleetStatus = { [unowned fleet] in fleet.statusRecord }
        daemon.subscribe(varlink)
        self.varlink = varlink
        if let address = configuration.busAddress {
            let bus: BusAdapter
            do {
                bus = try BusAdapter(service: daemon, loop: loop, address: address)
            } catch {
                throw StartupError(
                    "cannot serve \(BusAdapter.name) on the \(configuration.bus.rawValue) bus: \(error)")
            }
            bus.fleetStatus = { [unowned fleet] in fleet.statusRecord }
            fleet.onStatusChange = { [unowned bus] in bus.fleetChanged() }
            daemon.subscribe(bus)
            self.bus = bus
        }
        try startSource()
        fleet.start()

        Log.info(
            "started: \(daemon.placeCount.grouped) places, distance filter "
                + "\(configuration.distanceFilter.formatted(decimals: 1)) m"
                + (daemon.marker.map { ", last marker \($0.place.place.id)" } ?? ""))
        ServiceNotifier.ready(status: daemon.statusLine)
        // What loading freed (10,000 own places read back pass through twice their size) goes back to
        // the kernel before placed idles; after READY, so starting takes no longer.
        HeapMemory.releaseFree()
        // After READY: sd-event pings once on enabling, and systemd expects READY first.
        try loop.enableWatchdog()
        let status = try loop.run()
        // On a clean stop the loop's exit closes the bus too: only a failed loop was left by it.
        if status != 0, let bus, !bus.isConnected {
            Log.error("the D-Bus connection was lost: exiting, for the service manager to start placed again")
        }

        source?.stop()
        daemon.unsubscribeAll()
        fleet.onStatusChange = nil
        self.bus = nil
        self.varlink?.close()
        self.varlink = nil
        // Publishes `offline`, disconnects and writes the cursor, before the log's last checkpoint.
        fleet.stop()
        daemon.selectionJournal = nil
        self.fleet = nil
        self.journal = nil
        daemon.close()
        return status
    }

    private func startSource() throws {
        let source: LocationSource
        switch try configuration.resolvedSource() {
        case let .gpsd(host, port):
            source = GPSDSource(
                loop: loop,
                configuration: .init(
                    host: host, port: port, silenceTimeout: UInt64(configuration.gpsdTimeout * 1_000_000)))
        case let .fixed(coordinate, accuracy):
            source = StaticSource(loop: loop, coordinate: coordinate, accuracy: accuracy)
        }
        self.source = source
        source.start(delivering: daemon)
    }

    /// SIGHUP: reads the configuration again (file and drop-ins, then the same flags), applies what
    /// changed, and reloads the places. A bad configuration is logged and the running one kept.
    private func reload() {
        ServiceNotifier.reloading()
        defer { ServiceNotifier.ready(status: daemon.statusLine) }
        let new: Configuration
        do {
            new = try loader.reload()
        } catch {
            Log.error("SIGHUP: keeping the running configuration: \(error)")
            daemon.reloadPlaces(reason: "SIGHUP")
            return
        }
        Log.minimumPriority = new.logLevel
        for setting in Settings.changed(from: configuration, to: new) where setting.reload == .restart {
            Log.warning("\(setting.key)= changed: it takes effect when placed restarts")
        }
        let old = configuration
        configuration = new
        if (try? new.resolvedSource()) != (try? old.resolvedSource()) || new.gpsdTimeout != old.gpsdTimeout {
            Log.info("location source changed: restarting it")
            source?.stop()
            source = nil
            do { try startSource() } catch { Log.error("cannot start the new location source: \(error)") }
        }
        daemon.apply(new)
        fleet?.apply(new.fleet)
    }
}

/// A part that could not start: placed exits with status 1 and this message.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
