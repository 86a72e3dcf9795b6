import PlacedCore
import Testing

@testable import PlacedStore

@Suite struct OwnPlaceStoreTests {
    static let centre = Coordinate(latitude: 60.17, longitude: 24.94)
    static let ring = [(60.17, 24.94), (60.17, 24.941), (60.171, 24.941), (60.171, 24.94), (60.17, 24.94)].map {
        Coordinate(latitude: $0.0, longitude: $0.1)
    }
    static let hole = [(60.1704, 24.9404), (60.1706, 24.9404), (60.1706, 24.9406), (60.1704, 24.9404)].map {
        Coordinate(latitude: $0.0, longitude: $0.1)
    }

    static let depot = OwnPlace(
        id: "own:depot", name: "Depot", kind: "depot", address: "Satamatie 1", localizedNames: ["sv": "Depå"],
        weight: 2.5, geometry: .circle(centre: centre, radius: 40))
    static let yard = OwnPlace(id: "own:yard", name: "Yard", geometry: .polygons([[ring, hole], [ring]]))

    @Test func placesSurviveReopeningAndAPutReplaces() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("selections.db")
        do {
            let store = OwnPlaceStore(log: try SelectionLog(path: path))
            #expect(try store.all().isEmpty)
            try store.put([Self.depot, Self.yard])
        }
        let store = OwnPlaceStore(log: try SelectionLog(path: path))
        #expect(try store.all() == [Self.depot, Self.yard])
        var renamed = Self.depot
        renamed.name = "Old depot"
        renamed.weight = nil
        renamed.address = nil
        try store.put([renamed])
        #expect(try store.all() == [renamed, Self.yard])
        #expect(try store.delete(["own:depot", "own:nothing"]) == 1)
        #expect(try store.all() == [Self.yard])
    }

    @Test func aCommandIsRememberedWithItsChangeAndItsWaypointTimes() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("selections.db")
        do {
            let store = OwnPlaceStore(log: try SelectionLog(path: path))
            try store.put([Self.yard])
            #expect(try store.command("r1") == nil)
            var seen: OwnPlaceStore.CommandRecord?
            let done = try store.apply(
                request: "r1", put: [Self.depot], delete: ["own:yard", "own:nothing"],
                waypointTimes: ["own:depot": 1_437_552_714], at: 1000
            ) { record in seen = record }
            #expect(done == OwnPlaceStore.CommandRecord(put: 1, deleted: 1) && seen == done)
        }
        let store = OwnPlaceStore(log: try SelectionLog(path: path))
        #expect(try store.all() == [Self.depot])
        #expect(try store.command("r1") == OwnPlaceStore.CommandRecord(put: 1, deleted: 1))
        #expect(try store.waypointTime(of: "own:depot") == 1_437_552_714)
        // Put again by another command without a waypoint: no waypoint time any more.
        _ = try store.apply(request: "r2", put: [Self.depot], delete: [], waypointTimes: [:], at: 1001) { _ in }
        #expect(try store.waypointTime(of: "own:depot") == nil)
    }

    @Test func aCommandWhoseResultCannotBeWrittenChangesNothing() throws {
        struct Refused: Error {}
        let directory = TemporaryDirectory()
        let store = OwnPlaceStore(log: try SelectionLog(path: directory.file("selections.db")))
        try store.put([Self.yard])
        #expect(throws: SelectionLogError.self) {
            _ = try store.apply(
                request: "r1", put: [Self.depot], delete: ["own:yard"], waypointTimes: ["own:depot": 5], at: 1
            ) { _ in throw Refused() }
        }
        #expect(try store.all() == [Self.yard])
        #expect(try store.command("r1") == nil && store.waypointTime(of: "own:depot") == nil)
    }

    @Test(arguments: [1.0, -1.0])
    func theNewestRequestIdsAreRememberedWhateverTheClock(direction: Double) throws {
        // A device may start with its clock years behind: the ids come in order, the times need not.
        let directory = TemporaryDirectory()
        let store = OwnPlaceStore(log: try SelectionLog(path: directory.file("selections.db")))
        let count = 5
        for number in 0..<count {
            _ = try store.apply(
                request: "r\(number)", put: [], delete: ["own:x"], waypointTimes: [:],
                at: 1000 + direction * Double(number), remembering: 3
            ) { _ in }
        }
        #expect(try store.command("r0") == nil && store.command("r1") == nil)
        #expect(try store.command("r2") != nil && store.command("r\(count - 1)") != nil)
    }

    @Test func presenceIsKeptAndADeletedPlaceLosesIt() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("selections.db")
        let store = OwnPlaceStore(log: try SelectionLog(path: path))
        try store.put([Self.depot, Self.yard])
        try store.recordPresence("own:depot", inside: true)
        try store.recordPresence("own:yard", inside: true)
        try store.recordPresence("own:yard", inside: false)
        #expect(try OwnPlaceStore(log: try SelectionLog(path: path)).presence() == ["own:depot"])
        try store.delete(["own:depot"])
        #expect(try store.presence().isEmpty)
    }

    @Test func aPlacePutOrDeletedByAClientLosesItsWaypointTime() throws {
        let directory = TemporaryDirectory()
        let store = OwnPlaceStore(log: try SelectionLog(path: directory.file("selections.db")))
        let times: [String: Int64] = ["own:depot": 7, "own:yard": 8]
        _ = try store.apply(request: "r1", put: [Self.depot, Self.yard], delete: [], waypointTimes: times, at: 1) {
            _ in
        }
        try store.put([Self.depot])
        try store.delete(["own:yard"])
        #expect(try store.waypointTime(of: "own:depot") == nil && store.waypointTime(of: "own:yard") == nil)
    }

    @Test func detailsAreStoredAndATableFromBeforeThemGetsTheColumn() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("selections.db")
        do {
            // The table as the first own places wrote it, with one place in it.
            let database = try SelectionLog(path: path).currentConnection().database
            try database.execute(
                """
                CREATE TABLE own_places(id TEXT PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, address TEXT,
                    weight REAL, names BLOB NOT NULL, geometry BLOB NOT NULL) WITHOUT ROWID;
                """)
            let insert = try database.prepare(
                "INSERT INTO own_places(id, name, kind, names, geometry) VALUES('own:old', 'Old', 'own', ?, ?)")
            try insert.bind(blob: OwnPlaceCodec.encode(names: [:]), at: 1)
            try insert.bind(blob: OwnPlaceCodec.encode(Self.depot.geometry), at: 2)
            _ = try insert.step()
        }
        let store = OwnPlaceStore(log: try SelectionLog(path: path))
        var shop = Self.depot
        shop.id = "own:shop"
        shop.details = PlaceDetails(tags: ["opening_hours": "24/7", "phone": "+358 1;+358 2", "diet:vegan": "yes"])
        try store.put([shop])
        let all = try store.all()
        #expect(all.map(\.id) == ["own:old", "own:shop"])
        #expect(all[0].details.isEmpty)
        #expect(all[1] == shop && all[1].details.list("phone") == ["+358 1", "+358 2"])
        // A fleet command writes the same row.
        shop.details = PlaceDetails(tags: ["opening_hours": "Mo-Fr 09:00-17:00"])
        _ = try store.apply(request: "r1", put: [shop], delete: [], waypointTimes: [:], at: 1) { _ in }
        #expect(try store.all()[1].details.openingHours == "Mo-Fr 09:00-17:00")
    }

    @Test func selectionsAndOwnPlacesShareTheFile() throws {
        let directory = TemporaryDirectory()
        let log = try SelectionLog(path: directory.file("selections.db"))
        let store = OwnPlaceStore(log: log)
        try store.put([Self.depot])
        let place = RankedPlace(place: Self.depot.place(), distance: 0, likelihood: 0.9)
        _ = try log.append(Marker(place: place, location: Fix(coordinate: Self.centre), time: 1, generation: 1))
        #expect(try log.history(limit: 5).first?.place.place.id == "own:depot")
        #expect(try store.all().count == 1)
    }

    @Test func aFailingBatchLeavesNothing() throws {
        let directory = TemporaryDirectory()
        let log = try SelectionLog(path: directory.file("selections.db"))
        let store = OwnPlaceStore(log: log)
        try store.put([Self.depot])
        // A trigger refuses the second place of the batch: the first is rolled back with it.
        let database = try log.currentConnection().database
        try database.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON own_places WHEN NEW.id = 'own:bad' BEGIN SELECT RAISE(ABORT, 'no'); END"
        )
        var bad = Self.yard
        bad.id = "own:bad"
        #expect(throws: SelectionLogError.self) { try store.put([Self.yard, bad]) }
        #expect(try store.all() == [Self.depot])
    }

    @Test func codecRoundTripsAndRefusesTruncatedBlobs() {
        let bytes = OwnPlaceCodec.encode(Self.yard.geometry)
        bytes.withUnsafeBytes { #expect(OwnPlaceCodec.decodeGeometry($0) == Self.yard.geometry) }
        bytes.dropLast().withUnsafeBytes { #expect(OwnPlaceCodec.decodeGeometry($0) == nil) }
        let names = OwnPlaceCodec.encode(names: ["sv": "Depå", "fi": "Varikko"])
        names.withUnsafeBytes { #expect(OwnPlaceCodec.decodeNames($0) == ["sv": "Depå", "fi": "Varikko"]) }
    }
}
