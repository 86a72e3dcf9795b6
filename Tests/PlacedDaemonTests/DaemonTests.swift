import PlacedStore
import PlacedSystem
import PlacedTestSupport
import Testing

@testable import PlacedCore  // Visit's memberwise initializer
@testable import PlacedDaemon

#if canImport(Glibc)
    import Glibc
#endif

private let centre = Coordinate(latitude: 60.1699, longitude: 24.9384)

/// Hears what an adapter hears.
private final class RecordingSubscriber: DaemonSubscriber {
    var events: [DaemonEvent] = []

    func handle(_ event: DaemonEvent, from service: PlacesService) { events.append(event) }

    var rankings: [Ranking] {
        events.compactMap { if case .ranked(let ranking) = $0 { ranking } else { nil } }
    }
    var markers: [Marker] {
        events.compactMap { if case .markerPlaced(let marker) = $0 { marker } else { nil } }
    }
    var visitsStarted: [(Visit, Ranking)] {
        events.compactMap { if case let .visitStarted(visit, ranking) = $0 { (visit, ranking) } else { nil } }
    }
    var visitsEnded: [(Visit, RankedPlace?, Marker?)] {
        events.compactMap {
            if case let .visitEnded(visit, place, selection) = $0 { (visit, place, selection) } else { nil }
        }
    }
}

/// A gpsd-like report at `east`, `north` metres from the centre, its epoch `second`.
private func report(second: Int, east: Double = 0, north: Double = 0, eph: Double = 6) -> TPVReport {
    let at = LocalProjection(origin: centre).coordinate(east: east, north: north)
    return TPVReport(
        time: 1_000_000 + Double(second), mode: 3, latitude: at.latitude, longitude: at.longitude, eph: eph, speed: 0)
}

/// A daemon on a loop of its own, with a static source and its databases in a temporary directory.
private final class DaemonFixture {
    let directory = makeTemporaryDirectory("placed-daemon")
    let loop: EventLoop
    let daemon: Daemon
    let subscriber = RecordingSubscriber()
    let source: StaticSource
    let loader: ConfigurationLoader
    var configFile: String { directory + "/placed.conf" }
    var databasePath: String { directory + "/places.db" }

    static let places = [
        Place(id: "osm:node/1", name: "Kahvila", kind: "amenity=cafe", coordinate: centre),
        Place(
            id: "osm:node/2", name: "Kirjasto", kind: "amenity=library", address: "Kirjastokatu 1",
            coordinate: LocalProjection(origin: centre).coordinate(east: 12, north: 0), addressSource: .building,
            localizedNames: ["sv": "Bibliotek"]),
        Place(
            id: "osm:node/3", name: "Apteekki", kind: "amenity=pharmacy",
            coordinate: LocalProjection(origin: centre).coordinate(east: 0, north: 25)),
    ]

    init(distanceFilter: Double = 50, extra: String = "", mapFeatures: [MapFeature]? = nil) throws {
        try PlaceDatabase.replace(at: directory + "/places.db", with: Self.places, mapFeatures: mapFeatures)
        try "[Location]\nDistanceFilter=\(distanceFilter)\n\(extra)".write(to: directory + "/placed.conf")
        loader = ConfigurationLoader(arguments: [
            "--config", directory + "/placed.conf", "--db", directory + "/places.db", "--static",
            "\(centre.latitude),\(centre.longitude),8", "--bus", "none",
        ])
        let configuration = try loader.reload()
        loop = try EventLoop()
        daemon = try Daemon(configuration: configuration, loop: loop)
        daemon.subscribe(subscriber)
        source = StaticSource(loop: loop, coordinate: centre, accuracy: 8)
    }

    deinit {
        for name in [
            "placed.conf", "places.db", "other.db", "selections.db", "selections.db-wal", "selections.db-shm",
        ] {
            unlink(directory + "/" + name)
        }
        rmdir(directory)
    }

    func start() throws {
        source.start(delivering: daemon)
        #expect(try loop.pump { !subscriber.rankings.isEmpty })
    }
}

extension String {
    fileprivate func write(to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SystemError("open(\(path))", errno: errno) }
        defer { close(fd) }
        writeAll(fd, self)
    }
}

@Suite(.serialized) struct DaemonTests {
    @Test func aMovePublishesARankingTheSubscriberSees() throws {
        let fixture = try DaemonFixture()
        try fixture.start()
        let daemon = fixture.daemon
        #expect(daemon.sourceState == .static)
        #expect(daemon.generation == 1)
        let ranking = try #require(fixture.subscriber.rankings.first)
        #expect(ranking.generation == 1)
        #expect(ranking.places.first?.place.id == "osm:node/1", "the place the device is at comes first")
        #expect(Set(ranking.places.map(\.place.id)) == ["osm:node/1", "osm:node/2", "osm:node/3"])
        // The move comes first, the ranking next, the location last; the gate made the accuracy σ.
        guard
            case let .moved(fix, number, distance) = fixture.subscriber.events.first(where: {
                if case .moved = $0 { true } else { false }
            })
        else {
            Issue.record("no move")
            return
        }
        #expect(number == 1 && distance == nil && fix.coordinate == centre)
        #expect(fix.radius95 == 8, "a stated accuracy is the 95 % radius, σ inside")
        #expect(abs((fix.accuracy ?? 0) - 8 / 2.448) < 1e-9)
        guard case .located = fixture.subscriber.events.last else {
            Issue.record("the location is announced after the ranking")
            return
        }
        let root = Credentials(uid: 0, gid: 0)
        #expect(try daemon.current(limit: 2, by: root)?.places.count == 2)
        #expect(throws: ServiceError.invalidLimit(21, maximum: Ranker.maximumLimit)) {
            try daemon.current(limit: 21, by: root)
        }
    }

    @Test func aSelectionWritesARowAndTheSubscriberSeesTheMarker() throws {
        let fixture = try DaemonFixture()
        try fixture.start()
        let daemon = fixture.daemon
        let root = Credentials(uid: 0, gid: 0)
        let marker = try daemon.select(id: "osm:node/2", by: root)
        #expect(marker.place.place.id == "osm:node/2")
        #expect(marker.generation == 1)
        #expect(fixture.subscriber.markers.map(\.selection) == [marker.selection])
        #expect(daemon.marker == marker)
        // The row is in the log on disk: a second reader of the file finds it.
        let log = try SelectionLog(path: fixture.directory + "/selections.db")
        #expect(try log.history(limit: 5, before: nil).map(\.place.place.id) == ["osm:node/2"])
        // Refused selections change nothing and reach no subscriber.
        #expect(throws: ServiceError.unknownPlace(id: "osm:node/404")) {
            try daemon.select(id: "osm:node/404", by: root)
        }
        #expect(
            throws: ServiceError.permissionDenied(
                operation: "Select", requirement: "root or membership of group placed")
        ) {
            try daemon.select(id: "osm:node/1", by: Credentials(uid: 65534, gid: 65534))
        }
        #expect(fixture.subscriber.markers.count == 1)
    }

    /// Fixes at one spot for longer than DwellTime make a visit, ranked at its averaged position; leaving
    /// ends it with its place. The daemon judges every gated fix, the suppressed ones too.
    @Test func aStayIsAVisitWithItsRankingAndItsPlace() throws {
        let fixture = try DaemonFixture()
        let daemon = fixture.daemon
        let start: UInt64 = 5_000_000
        for second in 0...130 {
            let jitter = Double(second % 5) - 2  // ±2 m
            daemon.receive(report(second: second, east: jitter, north: -jitter), at: start + UInt64(second) * 1_000_000)
        }
        let started = try #require(fixture.subscriber.visitsStarted.first)
        #expect(fixture.subscriber.visitsStarted.count == 1)
        #expect(started.0.startedAt == start, "the visit began at its first fix")
        #expect(LocalProjection(origin: centre).distance(to: started.0.centre) < 1)
        #expect(started.1.places.first?.place.id == "osm:node/1", "ranked at the averaged position")
        #expect(started.1.generation == daemon.generation, "published as a generation of its own")
        #expect(daemon.openVisit?.visit.id == started.0.id)
        // The selection during the visit is its place, made at the visit's averaged position.
        let marker = try daemon.select(id: "osm:node/2", by: Credentials(uid: 0, gid: 0))
        #expect(marker.location.coordinate == daemon.openVisit?.visit.centre)
        #expect(daemon.openVisit?.place?.place.id == "osm:node/2")
        for second in 131...200 {
            daemon.receive(report(second: second, east: 400), at: start + UInt64(second) * 1_000_000)
        }
        let ended = try #require(fixture.subscriber.visitsEnded.first)
        #expect(ended.0.id == started.0.id && ended.0.endedAt != nil)
        #expect(ended.1?.place.id == "osm:node/2", "the place selected during the visit")
        #expect(ended.2?.selection == marker.selection && ended.2?.automatic == false)
        #expect(daemon.openVisit == nil)
        #expect(fixture.subscriber.markers.count == 1, "no automatic selection without AutoSelect=")
    }

    @Test func autoSelectPicksTheTopPlaceOnceDurablyAndSaysSo() throws {
        let fixture = try DaemonFixture(extra: "[Visits]\nAutoSelect=0.5\n")
        let daemon = fixture.daemon
        for second in 0...200 {
            daemon.receive(report(second: second, eph: 3), at: UInt64(second + 1) * 1_000_000)
        }
        let started = try #require(fixture.subscriber.visitsStarted.first)
        let top = try #require(started.1.places.first)
        #expect(top.likelihood >= 0.5)
        #expect(fixture.subscriber.markers.count == 1, "once per visit, however long it lasts")
        let marker = try #require(fixture.subscriber.markers.first)
        #expect(marker.automatic && marker.place.place.id == top.place.id)
        #expect(marker.generation == started.1.generation)
        let log = try SelectionLog(path: fixture.directory + "/selections.db")
        let row = try #require(try log.history(limit: 1, before: nil).first)
        #expect(row.automatic && row.selection == marker.selection, "the row says it was automatic")
    }

    @Test func aStatedAccuracyIsThe95PercentRadius() throws {
        let fixture = try DaemonFixture()
        try fixture.start()
        let root = Credentials(uid: 0, gid: 0)
        // The static source said 8 m: the location states 8 m, the ranking used σ = 8 / 2.448.
        #expect(Record.location(try #require(fixture.daemon.location), now: nil)["accuracy"] == .double(8))
        let ranked = try fixture.daemon.rank(
            latitude: centre.latitude, longitude: centre.longitude, accuracy: 8, limit: 3, by: root)
        #expect(
            ranked == fixture.daemon.latestRanking?.limited(to: 3).places,
            "Rank(8) ranks as the 8 m fix did")
        #expect(throws: ServiceError.self) {
            try fixture.daemon.rank(
                latitude: centre.latitude, longitude: centre.longitude, accuracy: -1, limit: 3, by: root)
        }
    }

    @Test func reloadAppliesAChangedSetting() throws {
        let fixture = try DaemonFixture(distanceFilter: 50)
        try fixture.start()
        #expect(fixture.daemon.distanceFilter == 50)
        try "[Location]\nDistanceFilter=20\n".write(to: fixture.configFile)
        fixture.daemon.apply(try fixture.loader.reload())
        #expect(fixture.daemon.distanceFilter == 20)
        #expect(
            fixture.subscriber.events.contains {
                if case .distanceFilterChanged(20) = $0 { true } else { false }
            })
        // The reload ranks again at the location: a new generation, from the reloaded places.
        #expect(fixture.daemon.generation == 2)
        #expect(fixture.subscriber.rankings.map(\.generation) == [1, 2])
    }

    /// Reading is for root and the two groups, writing for root and the writer group: the groups are
    /// taken from the configuration by name (here the caller's own, whatever it is called).
    @Test func readersMayReadAndOnlyWritersMaySelect() throws {
        let fixture = try DaemonFixture()
        try fixture.start()
        let daemon = fixture.daemon
        let readers: UInt32 = 4242, writers: UInt32 = 4343
        var configuration = daemon.configuration
        configuration.readerGroup = try #require(UserDatabase.groupName(of: getgid()))
        daemon.apply(configuration)
        let reader = Credentials(uid: 65534, gid: 65534, groups: [getgid()])
        let stranger = Credentials(uid: 65534, gid: 65534, groups: [readers, writers])
        #expect(try daemon.current(limit: nil, by: reader)?.places.isEmpty == false)
        #expect(try daemon.history(limit: nil, before: nil, by: reader).isEmpty)
        #expect(throws: ServiceError.self) { try daemon.select(id: "osm:node/1", by: reader) }
        for read in [
            { _ = try daemon.current(limit: nil, by: stranger) },
            { _ = try daemon.history(limit: nil, before: nil, by: stranger) },
            {
                _ = try daemon.rank(
                    latitude: centre.latitude, longitude: centre.longitude, accuracy: nil, limit: nil, by: stranger)
            },
            { try daemon.authorize(stranger, to: .read, "Status") },
        ] as [() throws -> Void] {
            do {
                try read()
                Issue.record("a stranger read")
            } catch let error as ServiceError {
                #expect(error.name == "PermissionDenied")
                #expect(
                    error.description.hasSuffix(
                        "needs root or membership of group placed or \(configuration.readerGroup)"))
            }
        }
    }

    @Test func refreshOntoABadFileKeepsTheOldPlaces() throws {
        let fixture = try DaemonFixture()
        try fixture.start()
        let daemon = fixture.daemon
        let broken = fixture.directory + "/broken.db"
        try String(repeating: "not a database", count: 100).write(to: broken)
        #expect(rename(broken, fixture.databasePath) == 0)
        let error = #expect(throws: ServiceError.self) { try daemon.refresh(by: Credentials(uid: 0, gid: 0)) }
        #expect(error?.name == "StoreFailed")
        #expect(daemon.placeCount == 3, "the places loaded before keep serving")
        #expect(
            try daemon.rank(
                latitude: centre.latitude, longitude: centre.longitude, accuracy: 10, limit: nil,
                by: Credentials(uid: 0, gid: 0)
            ).count == 3)
        #expect(
            throws: ServiceError.permissionDenied(
                operation: "Refresh", requirement: "root or membership of group placed")
        ) {
            try daemon.refresh(by: Credentials(uid: 65534, gid: 65534))
        }
    }

    /// Map features: a named street through the centre, a building 500 m east, a park 1500 m north.
    static let layer: [MapFeature] = {
        let projection = LocalProjection(origin: centre)
        func square(east: Double, north: Double) -> [Coordinate] {
            [(0, 0), (10, 0), (10, 10), (0, 10), (0, 0)].map {
                projection.coordinate(east: east + $0.0, north: north + $0.1)
            }
        }
        return [
            MapFeature(
                id: "osm:way/1", kind: .street, featureClass: "primary", name: "Mannerheimintie",
                localizedNames: ["sv": "Mannerheimvägen"],
                geometry: .line([projection.coordinate(east: -40, north: 0), projection.coordinate(east: 40, north: 0)])
            ),
            MapFeature(
                id: "osm:way/2", kind: .building, featureClass: "yes",
                geometry: .polygons([[square(east: 500, north: 0)]])),
            MapFeature(
                id: "osm:way/3", kind: .green, featureClass: "park",
                geometry: .polygons([[square(east: 0, north: 1500)]])),
        ]
    }()

    @Test func mapServesTheLayerWithinTheRadiusNearestFirst() throws {
        let fixture = try DaemonFixture(mapFeatures: Self.layer)
        try fixture.start()
        let daemon = fixture.daemon
        let root = Credentials(uid: 0, gid: 0)
        func ids(_ radius: Double) throws -> [String] {
            try daemon.map(latitude: centre.latitude, longitude: centre.longitude, radius: radius, by: root).map(\.id)
        }
        #expect(try ids(100) == ["osm:way/1"])
        #expect(try ids(1000) == ["osm:way/1", "osm:way/2"])
        #expect(try ids(0) == ["osm:way/1"], "a radius of 0 is the features at the point")
        for radius in [1000.5, -1, .nan, .infinity] {
            // By name: NaN equals nothing, not even the NaN in the error.
            do {
                _ = try daemon.map(latitude: centre.latitude, longitude: centre.longitude, radius: radius, by: root)
                Issue.record("radius \(radius) was accepted")
            } catch {
                #expect(error.name == "InvalidRadius" && error.description.hasSuffix("from 0 to 1000"))
            }
        }
        #expect(throws: ServiceError.invalidPosition(latitude: 95, longitude: 24.9)) {
            try daemon.map(latitude: 95, longitude: 24.9, radius: 100, by: root)
        }
        #expect(
            throws: ServiceError.permissionDenied(
                operation: "Map", requirement: "root or membership of group placed or placed-read")
        ) {
            try daemon.map(
                latitude: centre.latitude, longitude: centre.longitude, radius: 100,
                by: Credentials(uid: 65534, gid: 65534))
        }
    }

    @Test func mapIsBoundedInFeaturesAndNeedsTheLayerOfTheFileLoaded() throws {
        let fixture = try DaemonFixture()
        try fixture.start()
        let daemon = fixture.daemon
        let root = Credentials(uid: 0, gid: 0)
        #expect(throws: ServiceError.noMapLayer) {
            try daemon.map(latitude: centre.latitude, longitude: centre.longitude, radius: 100, by: root)
        }
        // A new import renamed over the file serves its layer after a Refresh, not before.
        let projection = LocalProjection(origin: centre)
        let crowd = (0...Daemon.maximumMapFeatures).map { n in
            let at = projection.coordinate(east: Double(n % 71) - 35, north: Double(n / 71) - 35)
            return MapFeature(
                id: "osm:node/\(n)", kind: .path, featureClass: "footway",
                geometry: .line([at, projection.coordinate(east: Double(n % 71) - 34, north: Double(n / 71) - 35)]))
        }
        let other = fixture.directory + "/other.db"
        try PlaceDatabase.replace(at: other, with: DaemonFixture.places, mapFeatures: Array(Self.layer + crowd))
        #expect(rename(other, fixture.databasePath) == 0)
        #expect(throws: ServiceError.noMapLayer) {
            try daemon.map(latitude: centre.latitude, longitude: centre.longitude, radius: 100, by: root)
        }
        try daemon.refresh(by: root)
        #expect(throws: ServiceError.tooManyFeatures(maximum: Daemon.maximumMapFeatures)) {
            try daemon.map(latitude: centre.latitude, longitude: centre.longitude, radius: 100, by: root)
        }
        // Away from the crowd, the same file serves a map.
        let east = projection.coordinate(east: 500, north: 0)
        #expect(
            try daemon.map(latitude: east.latitude, longitude: east.longitude, radius: 20, by: root).map(\.id) == [
                "osm:way/2"
            ])
    }

    @Test func namesFollowTheCallsLanguageElseLanguageSetting() throws {
        let fixture = try DaemonFixture()
        try fixture.start()
        let daemon = fixture.daemon
        let root = Credentials(uid: 0, gid: 0)
        let library = try #require(
            try daemon.current(limit: nil, by: root)?.places.first { $0.place.id == "osm:node/2" })
        func name(_ language: String?) -> Record.Value? { Record.place(library, language: language)["name"] }
        #expect(daemon.language == nil)
        #expect(daemon.language(asked: nil) == nil && daemon.language(asked: "") == nil)
        #expect(name(daemon.language(asked: nil)) == .string("Kirjasto"), "no Language=: the name tag")
        #expect(name(daemon.language(asked: "sv_FI.UTF-8")) == .string("Bibliotek"))
        #expect(name(daemon.language(asked: "fi")) == .string("Kirjasto"), "no name:fi: the name tag")

        var configuration = daemon.configuration
        configuration.language = "sv"
        daemon.apply(configuration)
        #expect(daemon.language == "sv" && daemon.language(asked: "") == "sv")
        #expect(name(daemon.language(asked: nil)) == .string("Bibliotek"))
        #expect(name(daemon.language(asked: "C")) == .string("Kirjasto"), "C asks for the name tags")
        #expect(Record.place(library, language: nil)["address_source"] == .string("building"))
        // A visit's places are named as a ranking's.
        let visit = Visit(
            id: 1, startedAt: 1, endedAt: 2, lastSeenAt: 2, centre: centre, accuracy: 3, fixes: 4, mode: .threeD)
        let ended = Record.visit(
            visit, clock: ServiceClock(monotonic: 2, wall: 0), place: library, language: daemon.language(asked: nil))
        guard case .record(let visitPlace)? = ended["place"] else {
            Issue.record("a visit record without its place")
            return
        }
        #expect(visitPlace["name"] == .string("Bibliotek"))

        // A marker's place keeps the name its selection recorded and carries no address source.
        let marker = Record.marker(try daemon.select(id: "osm:node/2", by: root))
        guard case .record(let place)? = marker["place"] else {
            Issue.record("a marker without its place")
            return
        }
        #expect(place["name"] == .string("Kirjasto") && place["address"] == .string("Kirjastokatu 1"))
        #expect(place["address_source"] == nil)
    }
}
