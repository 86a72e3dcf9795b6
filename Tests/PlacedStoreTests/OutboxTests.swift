import PlacedCore
import Testing

@testable import PlacedStore

#if canImport(Glibc)
    import Glibc
#endif

private func temporaryLog() throws -> (log: SelectionLog, path: String) {
    var template = Array("/tmp/placed-outbox-XXXXXX".utf8CString)
    let path = String(cString: mkdtemp(&template)!) + "/selections.db"
    return (try SelectionLog(path: path), path)
}

private func message(_ kind: Outbox.Kind, _ text: String) -> (Int64) -> Outbox.Message {
    { sequence in
        Outbox.Message(
            kind: kind, topic: "placed/dev/\(kind.rawValue)", payload: Array("\(text)#\(sequence)".utf8),
            retained: kind == .state, systemTime: 1_700_000_000 + Double(sequence),
            gpsTime: kind == .marker ? 1.5 : nil,
            clockSynchronized: sequence % 2 == 0)
    }
}

private func marker(_ id: String) -> Marker {
    let place = Place(
        id: id, name: "Café", kind: "amenity=cafe", address: nil,
        coordinate: Coordinate(latitude: 60.17, longitude: 24.94))
    return Marker(
        place: RankedPlace(place: place, distance: 3, likelihood: 0.4),
        location: Fix(coordinate: Coordinate(latitude: 60.17, longitude: 24.94), accuracy: 4), time: 1_795_955_188,
        generation: 1)
}

@Suite struct OutboxTests {
    @Test func rowsComeBackInOrderWithEveryField() throws {
        let (log, _) = try temporaryLog()
        let outbox = try Outbox(log: log, configuration: "a", limit: 100)
        let appended = try outbox.append([message(.marker, "m"), message(.state, "s"), message(.visit, "v")])
        #expect(appended.sequences == [1, 2, 3])
        #expect(outbox.count == 3)
        let entries = try outbox.pending(after: 0, limit: 10)
        #expect(entries.map(\.sequence) == [1, 2, 3])
        #expect(entries[0].message == message(.marker, "m")(1))
        #expect(entries[1].message.retained && entries[1].message.gpsTime == nil)
        #expect(String(decoding: entries[2].message.payload, as: UTF8.self) == "v#3")
        #expect(try outbox.pending(after: 1, limit: 1).map(\.sequence) == [2])
    }

    @Test func theCursorMovesOnAcknowledgementAndSurvivesAReopen() throws {
        let (log, path) = try temporaryLog()
        do {
            let outbox = try Outbox(log: log, configuration: "a", limit: 100)
            try outbox.append((0..<5).map { message(.marker, "m\($0)") })
            try outbox.acknowledge(through: 3)
            #expect(outbox.acknowledged == 3 && outbox.count == 2)
            try outbox.acknowledge(through: 2)  // never backwards
            #expect(outbox.acknowledged == 3)
        }
        let reopened = try Outbox(log: try SelectionLog(path: path), configuration: "a", limit: 100)
        #expect(reopened.acknowledged == 3 && reopened.count == 2)
        #expect(try reopened.pending(after: reopened.acknowledged, limit: 10).map(\.sequence) == [4, 5])
        // Sequence numbers are never reused, even once every row is acknowledged and deleted.
        try reopened.acknowledge(through: 5)
        #expect(try reopened.append([message(.state, "s")]).sequences == [6])
    }

    @Test func aNewBrokerConfigurationGetsTheWholeBacklog() throws {
        let (log, _) = try temporaryLog()
        let first = try Outbox(log: log, configuration: "brokers-a", limit: 100)
        try first.append((0..<6).map { message(.marker, "m\($0)") })
        try first.acknowledge(through: 4)
        let second = try Outbox(log: log, configuration: "brokers-b", limit: 100)
        #expect(second.acknowledged == 4, "starts before the oldest row kept (5)")
        #expect(try second.pending(after: second.acknowledged, limit: 10).map(\.sequence) == [5, 6])
        let back = try Outbox(log: log, configuration: "brokers-a", limit: 100)
        #expect(back.acknowledged == 4, "each configuration keeps its own cursor")
    }

    @Test func pastTheBoundTheOldestUpdatesGoAndMarkersStay() throws {
        let (log, path) = try temporaryLog()
        let outbox = try Outbox(log: log, configuration: "a", limit: 10)
        try outbox.append((0..<4).map { message(.marker, "m\($0)") })  // 1-4
        try outbox.append((0..<6).map { message(.location, "l\($0)") })  // 5-10
        let overflow = try outbox.append([message(.state, "s"), message(.visit, "v"), message(.state, "t")])  // 11-13
        #expect(overflow.dropped == 3)
        #expect(outbox.count == 10 && outbox.dropped == 3)
        let kept = try outbox.pending(after: 0, limit: 100)
        #expect(kept.map(\.sequence) == [1, 2, 3, 4, 8, 9, 10, 11, 12, 13], "5, 6, 7: the oldest updates")
        // Only markers and visits left: they are never dropped, whatever the bound.
        try outbox.append((0..<12).map { message(.marker, "x\($0)") })
        let all = try outbox.pending(after: 0, limit: 100)
        #expect(all.filter { $0.message.kind == .marker }.count == 16)
        #expect(all.filter { $0.message.kind.isDroppable }.isEmpty)
        #expect(all.contains { $0.message.kind == .visit })
        #expect(outbox.dropped == 8 && outbox.count == 17, "3, then the 5 updates left")
        #expect(try Outbox(log: try SelectionLog(path: path), configuration: "a", limit: 10).dropped == 8)
    }

    @Test func aMarkerAndItsOutboxRowsCommitTogether() throws {
        let (log, _) = try temporaryLog()
        let outbox = try Outbox(log: log, configuration: "a", limit: 100)
        let recorded = try log.append(marker("osm:node/1")) { recorded in
            try outbox.append([message(.marker, "selection \(recorded.selection)")])
        }
        #expect(recorded.selection == 1)
        #expect(
            try outbox.pending(after: 0, limit: 10).map { String(decoding: $0.message.payload, as: UTF8.self) } == [
                "selection 1#1"
            ])
        struct Refused: Error {}
        #expect(throws: SelectionLogError.self) {
            _ = try log.append(marker("osm:node/2")) { _ in
                try outbox.append([message(.marker, "lost")])
                throw Refused()
            }
        }
        try outbox.load()
        #expect(try log.history(limit: 10).count == 1, "the selection rolled back with its outbox row")
        #expect(outbox.count == 1)
        #expect(log.counts == ["osm:node/1": 1])
    }

    @Test func aFullDiskIsANamedErrorAndChangesNothing() throws {
        let (log, _) = try temporaryLog()
        let outbox = try Outbox(log: log, configuration: "a", limit: 100_000)
        try outbox.append([message(.marker, "kept")])
        let database = try log.writableConnection().database
        let pages = try database.scalarInt64("PRAGMA page_count") ?? 0
        try database.execute("PRAGMA max_page_count=\(pages)")
        let big = (0..<200).map { index in
            { (sequence: Int64) in
                Outbox.Message(
                    kind: .state, topic: "t", payload: [UInt8](repeating: UInt8(index % 256), count: 4096),
                    retained: false, systemTime: 0, gpsTime: nil, clockSynchronized: false)
            }
        }
        #expect(throws: SelectionLogError.diskFull(path: log.path)) { try outbox.append(big) }
        #expect(outbox.count == 1)
        #expect(try outbox.pending(after: 0, limit: 10).count == 1)
    }

    @Test func anotherWriterHoldingTheLockIsAnErrorNotAHang() throws {
        let (_, path) = try temporaryLog()
        let log = try SelectionLog(path: path, busyTimeout: 0)
        let outbox = try Outbox(log: log, configuration: "a", limit: 100)
        let blocker = try Database(path: path)
        try blocker.execute("PRAGMA busy_timeout=0")
        try blocker.execute("BEGIN IMMEDIATE")
        defer { try? blocker.execute("ROLLBACK") }
        #expect(throws: SelectionLogError.self) { try outbox.append([message(.visit, "v")]) }
        #expect(throws: SelectionLogError.self) { try outbox.acknowledge(through: 1) }
    }
}
