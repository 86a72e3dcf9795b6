import PlacedStore
import PlacedSystem
import PlacedWire
import PlacedTestSupport
import Testing

@testable import PlacedCore
@testable import PlacedDaemon

#if canImport(Glibc)
    import Glibc
#endif

private let centre = Coordinate(latitude: 60.1699, longitude: 24.9384)
private let root = Credentials(uid: 0, gid: 0)
/// A member of group `adm` (4), the reader group of these daemons.
private let reader = Credentials(uid: 65534, gid: 65534, groups: [4])

private final class Rankings: DaemonSubscriber {
    var rankings: [Ranking] = []
    var crossings: [BoundaryEvent] = []
    func handle(_ event: DaemonEvent, from service: PlacesService) {
        if case .ranked(let ranking) = event { rankings.append(ranking) }
        if case .boundaryCrossed(let crossing) = event { crossings.append(crossing) }
    }
}

/// A gpsd-like report `east` metres from the centre, its 95 % radius `eph`.
private func report(second: Int, east: Double, eph: Double = 5) -> TPVReport {
    let at = LocalProjection(origin: centre).coordinate(east: east, north: 0)
    return TPVReport(
        time: 1_000_000 + Double(second), mode: 3, latitude: at.latitude, longitude: at.longitude, eph: eph, speed: 0)
}

/// A daemon with one OSM cafe at the centre, a static position there, and its files in a directory.
private final class OwnFixture {
    let directory = makeTemporaryDirectory("placed-own")
    let loop: EventLoop
    var daemon: Daemon
    let rankings = Rankings()
    let source: StaticSource
    let loader: ConfigurationLoader

    init() throws {
        try PlaceDatabase.replace(
            at: directory + "/places.db",
            with: [Place(id: "osm:node/1", name: "Kahvila", kind: "amenity=cafe", coordinate: centre)],
            mapFeatures: nil)
        let fd = open(directory + "/placed.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        writeAll(fd, "[Interfaces]\nReaderGroup=adm\n[OwnPlaces]\nBoundaryMargin=5\nBoundaryDwell=3\n")
        close(fd)
        loader = ConfigurationLoader(arguments: [
            "--config", directory + "/placed.conf", "--db", directory + "/places.db", "--static",
            "\(centre.latitude),\(centre.longitude),8", "--bus", "none",
        ])
        loop = try EventLoop()
        daemon = try Daemon(configuration: try loader.reload(), loop: loop)
        daemon.subscribe(rankings)
        source = StaticSource(loop: loop, coordinate: centre, accuracy: 8)
        source.start(delivering: daemon)
        #expect(try loop.pump { !rankings.rankings.isEmpty })
    }

    deinit {
        for name in ["placed.conf", "places.db", "selections.db", "selections.db-wal", "selections.db-shm"] {
            unlink(directory + "/" + name)
        }
        rmdir(directory)
    }
}

private func circle(_ key: String, east: Double, radius: Double, kind: String = "depot") -> OwnPlace {
    OwnPlace(
        id: "own:\(key)", name: key.capitalized, kind: kind,
        geometry: .circle(centre: LocalProjection(origin: centre).coordinate(east: east, north: 0), radius: radius))
}

@Suite(.serialized) struct OwnPlacesDaemonTests {
    @Test func aPutRanksAgainAtOnceAndOutlivesARestart() throws {
        let fixture = try OwnFixture()
        let before = fixture.daemon.generation
        #expect(try fixture.daemon.putPlaces([circle("depot", east: 0, radius: 30)], by: root) == 1)
        // Ranked again at once, with the own place containing the fix among the OSM place.
        #expect(fixture.daemon.generation == before + 1)
        let ranking = try #require(fixture.rankings.rankings.last)
        #expect(Set(ranking.places.map(\.place.id)) == ["own:depot", "osm:node/1"])
        #expect(ranking.places.first { $0.place.id == "own:depot" }?.distance == 0)
        // Selectable like any place.
        #expect(try fixture.daemon.select(id: "own:depot", by: root).place.place.id == "own:depot")

        fixture.daemon.close()
        fixture.daemon = try Daemon(configuration: try fixture.loader.reload(), loop: fixture.loop)
        #expect(try fixture.daemon.ownPlaces(by: reader).map(\.id) == ["own:depot"])
        let what = try fixture.daemon.rank(
            latitude: centre.latitude, longitude: centre.longitude, accuracy: 10, limit: 5, by: reader)
        #expect(what.contains { $0.place.id == "own:depot" })
    }

    @Test func readersMayListButNotChange() throws {
        let fixture = try OwnFixture()
        #expect(try fixture.daemon.ownPlaces(by: reader).isEmpty)
        #expect {
            _ = try fixture.daemon.putPlaces([circle("depot", east: 0, radius: 30)], by: reader)
        } throws: { ($0 as? ServiceError)?.name == "PermissionDenied" }
        #expect {
            _ = try fixture.daemon.deletePlaces(["own:depot"], by: reader)
        } throws: { ($0 as? ServiceError)?.name == "PermissionDenied" }
        #expect {
            _ = try fixture.daemon.ownPlaces(by: Credentials(uid: 65534, gid: 65534))
        } throws: { ($0 as? ServiceError)?.name == "PermissionDenied" }
    }

    @Test func aBadBatchChangesNothing() throws {
        let fixture = try OwnFixture()
        _ = try fixture.daemon.putPlaces([circle("a", east: 0, radius: 30)], by: root)
        let generation = fixture.daemon.generation
        do {
            _ = try fixture.daemon.putPlaces(
                [circle("b", east: 10, radius: 30), circle("c", east: 10, radius: 20_000)], by: root)
            Issue.record("a radius of 20 km was put")
        } catch {
            #expect(error == .invalidOwnPlace(OwnPlaceError(feature: 1, id: "own:c", .radiusOutOfRange(20_000))))
        }
        #expect(try fixture.daemon.ownPlaces(by: root).map(\.id) == ["own:a"])
        #expect(fixture.daemon.generation == generation)
        #expect {
            _ = try fixture.daemon.deletePlaces(["own:a", "osm:node/1"], by: root)
        } throws: { ($0 as? ServiceError)?.name == "InvalidOwnPlace" }
        #expect(try fixture.daemon.deletePlaces(["own:a", "own:zz"], by: root) == 1)
        #expect(try fixture.daemon.ownPlaces(by: root).isEmpty)
        #expect(!(fixture.rankings.rankings.last?.places.contains { $0.place.id == "own:a" } ?? true))
    }

    @Test func detailsAreServedAndClosedHoursWeighAsAnOSMPlaces() throws {
        let fixture = try OwnFixture()
        var open = circle("open", east: 0, radius: 30)
        open.details = PlaceDetails(tags: ["opening_hours": "24/7", "phone": "+358 1; +358 2", "wheelchair": "yes"])
        var closed = circle("closed", east: 0, radius: 30)
        closed.details = PlaceDetails(tags: ["opening_hours": "off"])
        _ = try fixture.daemon.putPlaces([open, closed], by: root)

        let place = try fixture.daemon.place(id: "own:open", by: reader)
        #expect(place.details.list("phone") == ["+358 1", "+358 2"])
        let records = PlaceRecords(language: nil, fields: .all, time: 1_800_000_000, service: fixture.daemon)
        let record = records.record(place)
        #expect(record["open_now"] == .bool(true))
        #expect(record["wheelchair"] == .string("yes"))
        #expect(record["phone"] == .strings(["+358 1", "+358 2"]))
        #expect(records.record(try fixture.daemon.place(id: "own:closed", by: reader))["open_now"] == .bool(false))
        #expect {
            _ = try fixture.daemon.place(id: "own:none", by: reader)
        } throws: { ($0 as? ServiceError)?.name == "UnknownPlace" }

        // The same shape at the same spot: the closed one weighs ClosedWeight= times the open one.
        let ranking = try #require(fixture.rankings.rankings.last)
        let likelihood = { (id: String) in ranking.places.first { $0.place.id == id }?.likelihood ?? 0 }
        #expect(likelihood("own:open") > 0)
        #expect(abs(likelihood("own:closed") / likelihood("own:open") - RankingModel.defaultClosedWeight) < 1e-9)
    }

    @Test func crossingABoundaryIsAnEventAfterTheDwell() throws {
        let fixture = try OwnFixture()
        let daemon = fixture.daemon
        _ = try daemon.putPlaces([circle("yard", east: 500, radius: 100)], by: root)
        let start: UInt64 = 10_000_000
        // Driving east through the yard (400 to 600 m) at 10 m/s, one fix a second, 5 m off the round numbers:
        // a fix counts from 10 m beyond the boundary (margin 5, eph 5).
        for second in 0...100 {
            daemon.receive(
                report(second: second, east: 305 + 10 * Double(second)), at: start + UInt64(second) * 1_000_000)
        }
        let crossings = fixture.rankings.crossings
        #expect(crossings.map(\.transition) == [.entered, .left])
        #expect(crossings.map(\.place.id) == ["own:yard", "own:yard"])
        // Entered once fixes 10 m inside had counted for 3 s: from the fix at 415 m, 3 s on.
        let enteredAt = LocalProjection(origin: centre).project(crossings[0].fix.coordinate).x
        #expect(abs(enteredAt - 445) < 0.5, "entered at \(enteredAt)")
        let leftAt = LocalProjection(origin: centre).project(crossings[1].fix.coordinate).x
        #expect(abs(leftAt - 645) < 0.5, "left at \(leftAt)")
        #expect(daemon.boundaries.inside.isEmpty)
    }

    @Test func aRestartInsideAPlaceNeitherEntersItAgainNorMissesLeavingIt() throws {
        // A van switched off in its depot overnight: the morning's start is no new arrival.
        let fixture = try OwnFixture()
        _ = try fixture.daemon.putPlaces(
            [circle("depot", east: 500, radius: 100), circle("gone", east: 500, radius: 50)], by: root)
        let start: UInt64 = 10_000_000
        for second in 0...5 {
            fixture.daemon.receive(report(second: second, east: 500), at: start + UInt64(second) * 1_000_000)
        }
        #expect(fixture.rankings.crossings.map(\.place.id) == ["own:depot", "own:gone"])
        _ = try fixture.daemon.deletePlaces(["own:gone"], by: root)

        fixture.daemon.close()
        fixture.daemon = try Daemon(configuration: try fixture.loader.reload(), loop: fixture.loop)
        let after = Rankings()
        fixture.daemon.subscribe(after)
        #expect(fixture.daemon.boundaries.inside == ["own:depot"])
        for second in 0...5 {
            fixture.daemon.receive(report(second: second, east: 510), at: start + UInt64(second) * 1_000_000)
        }
        #expect(after.crossings.isEmpty)
        for second in 6...12 {
            fixture.daemon.receive(report(second: second, east: 700), at: start + UInt64(second) * 1_000_000)
        }
        #expect(after.crossings.map(\.transition) == [.left] && after.crossings.map(\.place.id) == ["own:depot"])

        // And the leaving is kept too: the next start is outside.
        fixture.daemon.close()
        fixture.daemon = try Daemon(configuration: try fixture.loader.reload(), loop: fixture.loop)
        #expect(fixture.daemon.boundaries.inside.isEmpty)
    }
}

/// Commands from the fleet (`AcceptCommands=yes`), as the fleet adapter hands them to the daemon.
@Suite(.serialized) struct FleetCommandDaemonTests {
    @Test func aCommandIsAppliedOnceRankedAtOnceAndItsResultRecordedInItsTransaction() throws {
        let fixture = try OwnFixture()
        let command = FleetCommand(
            origin: .placed, request: "req-1", put: [circle("depot", east: 0, radius: 30)], delete: ["own:none"])
        var recorded: [FleetCommandResult] = []
        let before = fixture.daemon.generation
        let first = fixture.daemon.applyFleetCommand(command) { recorded.append($0) }
        #expect(first.outcome == .applied(put: 1, deleted: 0) && recorded == [first])
        #expect(fixture.daemon.generation == before + 1, "ranked again at once")
        #expect(fixture.rankings.rankings.last?.places.contains { $0.place.id == "own:depot" } == true)

        // Deleted in between, then the command delivered again: not applied again, nothing recorded.
        _ = try fixture.daemon.deletePlaces(["own:depot"], by: root)
        let again = fixture.daemon.applyFleetCommand(command) { recorded.append($0) }
        #expect(again.outcome == .duplicate(put: 1, deleted: 0) && recorded.count == 1)
        #expect(try fixture.daemon.ownPlaces(by: reader).isEmpty)

        // Still a duplicate after a restart: the request id is in the file.
        fixture.daemon.close()
        fixture.daemon = try Daemon(configuration: try fixture.loader.reload(), loop: fixture.loop)
        #expect(fixture.daemon.applyFleetCommand(command) { _ in }.outcome == .duplicate(put: 1, deleted: 0))
        #expect(try fixture.daemon.ownPlaces(by: reader).isEmpty)
    }

    @Test func aResultThatCannotBeRecordedLeavesTheCommandUnapplied() throws {
        struct Full: Error {}
        let fixture = try OwnFixture()
        let command = FleetCommand(origin: .ownTracks, request: "ot-1", put: [circle("gate", east: 0, radius: 30)])
        let failed = fixture.daemon.applyFleetCommand(command) { _ in throw Full() }
        guard case .refused(let error) = failed.outcome else {
            Issue.record("applied without its result: \(failed)")
            return
        }
        #expect(error.kind == .storeFailed && error.request == "ot-1")
        #expect(try fixture.daemon.ownPlaces(by: reader).isEmpty)
        // Not remembered either: sent again, it is applied.
        #expect(fixture.daemon.applyFleetCommand(command) { _ in }.outcome == .applied(put: 1, deleted: 0))
        #expect(try fixture.daemon.ownPlaces(by: reader).map(\.id) == ["own:gate"])
    }
}
