import PlacedCore
import Testing

@testable import PlacedStore

#if canImport(Glibc)
    import Glibc
#endif

private func temporaryDirectory() -> String {
    var template = Array("/tmp/placed-selections-XXXXXX".utf8CString)
    return String(cString: mkdtemp(&template)!)
}

private func marker(_ id: String, generation: UInt64 = 1) -> Marker {
    let place = Place(
        id: id, name: "Café \(id)", kind: "amenity=cafe", address: "Aleksanterinkatu 1",
        coordinate: Coordinate(latitude: 60.17, longitude: 24.94))
    let fix = Fix(
        receivedAt: 0, coordinate: Coordinate(latitude: 60.1701, longitude: 24.9402), mode: .threeD, accuracy: 4.5,
        speed: 1.25)
    return Marker(
        place: RankedPlace(place: place, distance: 12.5, likelihood: 0.42), location: fix, time: 1_795_955_188.25,
        generation: generation)
}

@Suite struct SelectionLogTests {
    @Test func appendsDurablyAndReadsBackNewestFirst() throws {
        let dir = temporaryDirectory()
        let path = dir + "/selections.db"
        do {
            let log = try SelectionLog(path: path)
            let first = try log.append(marker("osm:node/1"))
            let second = try log.append(marker("osm:node/2", generation: 2))
            _ = try log.append(marker("osm:node/1", generation: 3))
            #expect(first.selection == 1 && second.selection == 2)
            #expect(log.counts == ["osm:node/1": 2, "osm:node/2": 1])
        }
        // A new process sees everything: counts, order, every field.
        let reopened = try SelectionLog(path: path)
        #expect(reopened.counts == ["osm:node/1": 2, "osm:node/2": 1])
        let history = try reopened.history(limit: 10)
        #expect(history.map(\.selection) == [3, 2, 1])
        #expect(history.map(\.generation) == [3, 2, 1])
        var expected = marker("osm:node/2", generation: 2)
        expected.selection = 2
        #expect(history[1] == expected)
        #expect(try reopened.last()?.selection == 3)
        #expect(try reopened.history(limit: 2, before: 3).map(\.selection) == [2, 1])
    }

    @Test func usesWALWithFullSync() throws {
        let path = temporaryDirectory() + "/selections.db"
        _ = try SelectionLog(path: path)
        let database = try Database(path: path, mode: .readOnly)
        let mode = try database.prepare("PRAGMA journal_mode")
        #expect(try mode.step())
        #expect(mode.text(at: 0) == "wal")
    }

    @Test func readOnlyDatabaseGivesANamedErrorAndKeepsReading() throws {
        let dir = temporaryDirectory()
        let path = dir + "/selections.db"
        let log = try SelectionLog(path: path)
        _ = try log.append(marker("osm:node/1"))
        // Root ignores file modes, so make the log read-only the way a full or broken store would:
        // a second connection holds the write lock.
        let blocker = try Database(path: path)
        try blocker.execute("PRAGMA busy_timeout=0")
        try blocker.execute("BEGIN IMMEDIATE")
        defer { try? blocker.execute("ROLLBACK") }
        let locked = try SelectionLog(path: path, busyTimeout: 0)
        #expect(throws: SelectionLogError.self) { try locked.append(marker("osm:node/2")) }
        #expect(locked.counts == ["osm:node/1": 1], "a failed append counts nothing")
        #expect(try locked.history(limit: 5).count == 1)
    }

    @Test func cleanlyClosedLogReadsAsImmutable() throws {
        // What a read-only file system leaves: a WAL database without -wal or -shm files.
        let path = temporaryDirectory() + "/selections.db"
        do {
            let log = try SelectionLog(path: path)
            _ = try log.append(marker("osm:node/7"))
            #expect(!log.isReadOnly)
        }
        #expect(access(path + "-wal", F_OK) != 0, "closing checkpointed and removed the WAL")
        let database = try Database(path: path, mode: .immutable)
        #expect(database.isReadOnly)
        let count = try database.prepare("SELECT place_id FROM selections")
        #expect(try count.step())
        #expect(count.text(at: 0) == "osm:node/7")
    }

    @Test func immutableOpenEscapesThePath() {
        #expect(Database.uri("/var/lib/placed/selections.db") == "file:/var/lib/placed/selections.db")
        #expect(Database.uri("/tmp/a b?c#d%e/é.db") == "file:/tmp/a%20b%3Fc%23d%25e/%C3%A9.db")
    }

    @Test func picksAreEverySelectionOldestFirstWithItsFixAndTime() throws {
        let log = try SelectionLog(path: temporaryDirectory() + "/selections.db")
        #expect(try log.picks().isEmpty)
        _ = try log.append(marker("osm:node/1"))
        var second = marker("osm:node/2")
        second.location.accuracy = nil
        second.time += 60
        _ = try log.append(second)
        let picks = try log.picks()
        #expect(picks.map(\.placeID) == ["osm:node/1", "osm:node/2"])
        #expect(picks[0] == Pick(marker("osm:node/1")))
        #expect(picks[1].accuracy == nil && picks[1].time == marker("x").time + 60)
        #expect(picks[1].coordinate == Coordinate(latitude: 60.1701, longitude: 24.9402))
    }

    @Test func anAutomaticSelectionIsMarkedSo() throws {
        let path = temporaryDirectory() + "/selections.db"
        do {
            let log = try SelectionLog(path: path)
            var automatic = marker("osm:node/1")
            automatic.automatic = true
            #expect(try log.append(automatic).automatic)
            _ = try log.append(marker("osm:node/2"))
        }
        let history = try SelectionLog(path: path).history(limit: 5)
        #expect(history.map(\.automatic) == [false, true])
    }

    @Test func aLogWrittenBeforeAutomaticSelectionsGainsTheColumnAndKeepsItsRows() throws {
        let path = temporaryDirectory() + "/selections.db"
        do {
            // The schema as the first release wrote it, with one row.
            let old = try Database(path: path)
            try old.execute(
                """
                CREATE TABLE selections(
                    id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, generation INTEGER NOT NULL,
                    place_id TEXT NOT NULL, place_name TEXT NOT NULL, place_kind TEXT NOT NULL, place_address TEXT,
                    place_latitude REAL NOT NULL, place_longitude REAL NOT NULL, distance REAL NOT NULL,
                    likelihood REAL NOT NULL, latitude REAL NOT NULL, longitude REAL NOT NULL, accuracy REAL,
                    speed REAL, heading REAL, altitude REAL, mode INTEGER NOT NULL);
                INSERT INTO selections(time, generation, place_id, place_name, place_kind, place_latitude,
                    place_longitude, distance, likelihood, latitude, longitude, accuracy, mode)
                    VALUES(1795955188.25, 4, 'osm:node/9', 'Old', 'amenity=cafe', 60.17, 24.94, 3, 0.5,
                    60.1701, 24.9402, 4.5, 3);
                """)
            // Read as a log that could only be opened for reading would read it.
            let query = try old.prepare(
                "SELECT \(SelectionLog.columns(hasAutomatic: false)) FROM selections ORDER BY id")
            #expect(try query.step())
            let read = SelectionLog.marker(from: query)
            #expect(read.place.place.id == "osm:node/9" && !read.automatic && read.generation == 4)
        }
        let log = try SelectionLog(path: path)
        #expect(try log.last()?.place.place.id == "osm:node/9")
        #expect(try log.last()?.automatic == false)
        #expect(log.counts == ["osm:node/9": 1])
        var automatic = marker("osm:node/1")
        automatic.automatic = true
        _ = try log.append(automatic)
        #expect(try log.history(limit: 5).map(\.automatic) == [true, false])
        #expect(try log.picks().map(\.placeID) == ["osm:node/9", "osm:node/1"])
        #expect(try SelectionLog.hasAutomaticColumn(Database(path: path, mode: .readOnly)))
    }

    @Test func unopenablePathIsANamedError() {
        #expect(throws: SelectionLogError.self) { try SelectionLog(path: "/nonexistent-dir/x/selections.db") }
    }
}
