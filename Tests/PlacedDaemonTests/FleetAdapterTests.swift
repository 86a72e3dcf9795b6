import PlacedCore
import PlacedFleet
import PlacedJSON
import PlacedStore
import PlacedSystem
import PlacedTestSupport
import Testing

@testable import PlacedDaemon

#if canImport(Glibc)
    import Glibc
#endif

private let centre = Coordinate(latitude: 60.1699, longitude: 24.9384)
private let root = Credentials(uid: 0, gid: 0)

/// A daemon with the fleet adapter as placed assembles it, exporting to a broker that is never there
/// (every event stays in the outbox, where the test reads it).
private final class FleetFixture {
    let directory = makeTemporaryDirectory("placed-fleet-adapter")
    let loop: EventLoop
    let daemon: Daemon
    let fleet: FleetAdapter
    let configuration: Configuration

    init(journal: SelectionJournal? = nil) throws {
        try PlaceDatabase.replace(
            at: directory + "/places.db",
            with: [
                Place(id: "osm:node/1", name: "Kahvila", kind: "amenity=cafe", coordinate: centre),
                Place(
                    id: "osm:node/2", name: "Kirjasto", kind: "amenity=library",
                    coordinate: LocalProjection(origin: centre).coordinate(east: 12, north: 0),
                    details: PlaceDetails(tags: [
                        "opening_hours": "24/7", "contact:phone": "+358 9 310 85000", "wheelchair": "yes",
                    ])),
            ])
        let file = directory + "/placed.conf"
        let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        writeAll(fd, "[Fleet]\nBroker=mqtt://127.0.0.1:1\nDeviceId=van-17\n")
        close(fd)
        configuration = try ConfigurationLoader(arguments: [
            "--config", file, "--db", directory + "/places.db", "--bus", "none",
        ]).reload()
        loop = try EventLoop()
        daemon = try Daemon(configuration: configuration, loop: loop)
        fleet = FleetAdapter(
            service: daemon, loop: loop, selections: daemon.selectionLog, settings: configuration.fleet)
        daemon.subscribe(fleet)
        daemon.selectionJournal = journal ?? fleet
        fleet.start()
    }

    deinit {
        fleet.stop()
        for name in ["placed.conf", "places.db", "selections.db", "selections.db-wal", "selections.db-shm"] {
            unlink(directory + "/" + name)
        }
        rmdir(directory)
    }

    /// A fix `north` metres north of the centre, received now.
    func fix(north: Double, second: Int) {
        let at = LocalProjection(origin: centre).coordinate(east: 0, north: north)
        daemon.receive(
            TPVReport(
                time: 1_800_000_000 + Double(second), mode: 3, latitude: at.latitude, longitude: at.longitude, eph: 6,
                speed: 0),
            at: loop.now)
    }

    /// The outbox as another reader of the file finds it.
    func rows() throws -> [Outbox.Entry] {
        let log = try SelectionLog(path: directory + "/selections.db")
        let outbox = try Outbox(
            log: log, configuration: configuration.fleet.configurationKey(device: "van-17"), limit: 1000)
        return try outbox.pending(after: 0, limit: 1000)
    }
}

/// A selection journal that refuses, as a full disk would refuse its rows.
private final class RefusingJournal: SelectionJournal {
    var ended: [Bool] = []
    struct Refused: Error {}
    func write(alongside marker: Marker) throws { throw Refused() }
    func selectionTransactionEnded(committed: Bool) { ended.append(committed) }
    func selectionLogReopened() {}
}

@Suite(.serialized) struct FleetAdapterTests {
    /// The marker's outbox rows are in the file when Select returns: they committed in its transaction,
    /// before any loop iteration could write them.
    @Test func aSelectionsOutboxRowsCommitInItsOwnTransaction() throws {
        let fixture = try FleetFixture()
        fixture.fix(north: 0, second: 0)
        let marker = try fixture.daemon.select(id: "osm:node/2", by: root)
        let markers = try fixture.rows().filter { $0.message.topic == "placed/van-17/marker" }
        #expect(markers.count == 1)
        let payload = try JSON(parsing: markers[0].message.payload)
        #expect(payload["selection"]?.int == Int(marker.selection) && payload["place"]?["id"] == "osm:node/2")
        #expect(
            abs((payload["location"]?["accuracy"]?.double ?? 0) - 6) < 1e-9,
            "the 95 % radius, as the varlink record says")
        #expect(payload["gpsTime"] == "2027-01-15T08:00:00.000Z", "the fix's own time")
        #expect(payload["id"] == .string("van-17:\(markers[0].sequence)"))
        // The place's details, and its hours at the selection's time, ride along.
        let place = payload["place"]
        #expect(place?["opening_hours"] == "24/7" && place?["open_now"] == .bool(true))
        #expect(place?["phone"] == .array(["+358 9 310 85000"]) && place?["wheelchair"] == "yes")
        #expect(place?["name"] == "Kirjasto" && place?["likelihood"]?.double != nil)
    }

    @Test func aJournalThatFailsRollsTheSelectionBack() throws {
        let journal = RefusingJournal()
        let fixture = try FleetFixture(journal: journal)
        fixture.fix(north: 0, second: 0)
        #expect(throws: ServiceError.self) { try fixture.daemon.select(id: "osm:node/2", by: root) }
        #expect(journal.ended == [false])
        #expect(try fixture.daemon.history(limit: 5, before: nil, by: root).isEmpty, "no row without its rows")
        #expect(fixture.daemon.marker == nil)
    }

    /// Ten moves within a second: the first is exported at once, the last when the second is over, the
    /// ones between never (each would only say where the device no longer is).
    @Test func movesAreExportedAtMostOnceASecondAndTheLastAlways() throws {
        let fixture = try FleetFixture()
        for index in 0..<10 { fixture.fix(north: Double(index) * 100, second: index) }
        _ = try fixture.loop.pump(seconds: 1.5) { false }
        let located = try fixture.rows().compactMap { row -> Double? in
            guard row.message.topic == "placed/van-17/state",
                let state = try? JSON(parsing: row.message.payload), let location = state["location"]
            else { return nil }
            return location["latitude"]?.double
        }
        let last = LocalProjection(origin: centre).coordinate(east: 0, north: 900).latitude
        #expect(located.count == 2, "\(located)")
        #expect(abs((located.last ?? 0) - last) < 1e-9, "the last move is the state")
    }

    @Test func theStatusRecordHasTheKeysTheInterfaceDescribes() throws {
        var status = FleetStatus(device: "van-17")
        status.broker = "mqtt://127.0.0.1:1883"
        status.lastError = "refused"
        let keys = Set(Record.fleet(status).fields.map(\.key))
        let lines = InterfaceDescriptions.varlink.split(separator: "\n")
        let start = try #require(lines.firstIndex(of: "type FleetStatus ("))
        let fields = lines[(start + 1)...].prefix { $0 != ")" }
        let declared = Set(fields.map { String($0.split(separator: ":")[0]).trimmed })
        #expect(keys == declared)
        #expect(Record.fleet(status).jsonObject == status.json, "the exporter's own JSON says the same")
    }

    @Test func fleetKeysAreCheckedTogetherWhenTheConfigurationIsRead() throws {
        let directory = makeTemporaryDirectory("placed-fleet-config")
        let file = directory + "/placed.conf"
        defer {
            unlink(file)
            rmdir(directory)
        }
        let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        writeAll(fd, "[Fleet]\nBroker=mqtts://broker.example\nCertFile=/etc/placed/device.pem\n")
        close(fd)
        #expect(throws: ConfigError.self) { try ConfigurationLoader(arguments: ["--config", file]).command() }
        do {
            _ = try ConfigurationLoader(arguments: ["--config", file]).command()
        } catch let error as ConfigError {
            #expect(
                error.description == "\(file): [Fleet]: CertFile= and KeyFile= go together: "
                    + "the client certificate needs its key")
        }
    }
}

extension String {
    fileprivate var trimmed: String { String(drop { $0 == " " }) }
}
