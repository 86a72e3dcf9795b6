import CMosquitto
import PlacedCore
import PlacedJSON
@testable import PlacedStore
import PlacedSystem
import PlacedWire
import Testing

@testable import PlacedFleet

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct FleetSettingsTests {
    @Test func eachKeyParsesItsValueOrNamesTheProblem() throws {
        var settings = FleetSettings()
        #expect(!settings.isEnabled)
        try settings.set("Broker", to: "mqtts://a.example mqtts://b.example:9883")
        try settings.set("Broker", to: "mqtts://c.example")
        #expect(
            settings.brokers.map(\.description) == [
                "mqtts://a.example:8883", "mqtts://b.example:9883", "mqtts://c.example:8883",
            ])
        try settings.set("KeepAlive", to: "30")
        try settings.set("Protocol", to: "5")
        try settings.set("OwnTracks", to: "yes")
        try settings.set("Backlog", to: "250_000")
        try settings.set("DeviceId", to: "van-17")
        #expect(settings.keepAlive == 30 && settings.protocolVersion == .v5 && settings.ownTracks)
        #expect(settings.backlog == 250_000 && settings.deviceID == "van-17")
        try settings.set("Broker", to: "")
        #expect(settings.brokers.isEmpty, "an empty Broker= clears the list")

        #expect(throws: FleetSettingsError.self) { try settings.set("Broker", to: "tcp://a") }
        #expect(throws: FleetSettingsError.self) { try settings.set("KeepAlive", to: "4") }
        #expect(throws: FleetSettingsError.self) { try settings.set("Protocol", to: "3.1") }
        #expect(throws: FleetSettingsError.self) { try settings.set("DeviceId", to: "van/17") }
        #expect(throws: FleetSettingsError.self) { try settings.set("DeviceId", to: "van+") }
        #expect(throws: FleetSettingsError.self) { try settings.set("OwnTracksUser", to: "#") }
        #expect(throws: FleetSettingsError.self) { try settings.set("CAFile", to: "relative/ca.pem") }
        #expect(throws: FleetSettingsError.self) { try settings.set("PasswordCredential", to: "../secret") }
        #expect(throws: FleetSettingsError.self) { try settings.set("Backlog", to: "0") }
        #expect(throws: FleetSettingsError.unknownKey("Password")) { try settings.set("Password", to: "x") }
    }

    @Test func keysAreCheckedTogether() throws {
        var settings = FleetSettings()
        try settings.set("Broker", to: "mqtts://broker.example")
        try settings.set("CertFile", to: "/etc/placed/device.pem")
        #expect(throws: FleetSettingsError.self) { try settings.validate() }
        try settings.set("KeyFile", to: "/etc/placed/device.key")
        try settings.validate()
        try settings.set("PasswordCredential", to: "mqtt-password")
        #expect(throws: FleetSettingsError.self, "a password needs a user") { try settings.validate() }
        try settings.set("Username", to: "van-17")
        try settings.validate()
        try settings.set("Broker", to: "mqtt://127.0.0.1")
        try settings.validate()  // in clear text only to this machine, beside the TLS broker
        try settings.set("Broker", to: "")
        try settings.set("Broker", to: "mqtt://broker.example")
        #expect(throws: FleetSettingsError.self, "no password in clear text to a remote broker") {
            try settings.validate()
        }
    }

    @Test func theCursorBelongsToTheBrokerListAndTheDevice() throws {
        var a = FleetSettings()
        try a.set("Broker", to: "mqtt://a mqtt://b")
        var b = a
        try b.set("KeepAlive", to: "10")
        #expect(a.configurationKey(device: "d") == b.configurationKey(device: "d"), "other keys do not matter")
        #expect(a.configurationKey(device: "d") != a.configurationKey(device: "e"))
        var c = FleetSettings()
        try c.set("Broker", to: "mqtt://b mqtt://a")
        #expect(a.configurationKey(device: "d") != c.configurationKey(device: "d"))
        #expect(a.configurationKey(device: "d").hasPrefix("fnv1a64:") && a.configurationKey(device: "d").count == 24)
    }
}

@Suite struct FleetPayloadTests {
    let stamp = FleetStamp(systemTime: 1_795_955_188.25, gpsTime: 1_795_955_187.0, clockSynchronized: true)

    @Test func placedMessagesCarryTheRecordAndTheEnvelope() throws {
        let bytes = FleetPayload.placed(
            type: "marker", record: ["selection": 12, "place": ["id": "osm:node/1"]], device: "van-17", sequence: 41,
            stamp: stamp)
        let json = try JSON(parsing: bytes)
        #expect(json["id"] == "van-17:41")
        #expect(json["device"] == "van-17" && json["seq"]?.int == 41 && json["type"] == "marker")
        #expect(json["selection"]?.int == 12 && json["place"]?["id"] == "osm:node/1")
        #expect(json["systemTime"] == "2026-11-29T12:26:28.250Z")
        #expect(json["gpsTime"] == "2026-11-29T12:26:27.000Z")
        #expect(json["clockSynchronized"] == true)
        let noFix = try JSON(
            parsing: FleetPayload.placed(
                type: "state", record: [:], device: "d", sequence: 1,
                stamp: FleetStamp(systemTime: 0, gpsTime: nil, clockSynchronized: false)))
        #expect(noFix["gpsTime"] == nil && noFix["clockSynchronized"] == false)
    }

    @Test func aNonFiniteNumberBecomesNullInsteadOfLosingTheMessage() throws {
        let json = try JSON(
            parsing: FleetPayload.placed(
                type: "state", record: ["speed": .number(.nan), "ok": 1], device: "d", sequence: 3, stamp: stamp))
        #expect(json["speed"] == .null && json["ok"]?.int == 1 && json["id"] == "d:3")
    }

    @Test func ownTracksLocation() throws {
        let fix = Fix(
            time: 1_795_955_100.9, coordinate: Coordinate(latitude: 60.1699, longitude: 24.9384), mode: .threeD,
            accuracy: 4, altitude: 12.4, speed: 10, heading: 271.6)
        let json = try JSON(parsing: FleetPayload.ownTracksLocation(fix: fix, tid: "17", id: "van-17:5", stamp: stamp))
        #expect(json["_type"] == "location" && json["tid"] == "17" && json["_id"] == "van-17:5")
        #expect(json["lat"]?.double == 60.1699 && json["lon"]?.double == 24.9384)
        #expect(json["tst"]?.int == 1_795_955_100, "the fix's time")
        #expect(json["acc"]?.int == 10, "σ 4 m is a 95 % radius of 9.8 m")
        #expect(json["vel"]?.int == 36 && json["cog"]?.int == 272 && json["alt"]?.int == 12)
    }

    @Test func ownTracksTransition() throws {
        let json = try JSON(
            parsing: FleetPayload.ownTracksTransition(
                .leave, place: "Kauppatori", coordinate: Coordinate(latitude: 60.1675, longitude: 24.9525),
                accuracy: 14.6, visitStart: 1_795_950_000.5, tid: "17", id: "van-17:9", stamp: stamp))
        #expect(json["_type"] == "transition" && json["event"] == "leave" && json["desc"] == "Kauppatori")
        #expect(json["lat"]?.double == 60.1675 && json["lon"]?.double == 24.9525 && json["acc"]?.int == 15)
        #expect(json["tst"]?.int == 1_795_955_187 && json["wtst"]?.int == 1_795_949_999, "both on the GPS clock")
        #expect(json["tid"] == "17" && json["t"] == "c")
        // A system clock four hours behind the GPS: the start is still 5,187 s before the event.
        let behind = FleetStamp(systemTime: 1_795_940_788.25, gpsTime: 1_795_955_187.0, clockSynchronized: false)
        let late = try JSON(
            parsing: FleetPayload.ownTracksTransition(
                .leave, place: "Kauppatori", coordinate: Coordinate(latitude: 60.1675, longitude: 24.9525),
                accuracy: 14.6, visitStart: 1_795_935_600.5, tid: "17", id: "van-17:9", stamp: behind))
        #expect(late["tst"]?.int == 1_795_955_187 && late["wtst"]?.int == 1_795_949_999)
        #expect(FleetPayload.trackerID(device: "3f2a91") == "91")
    }

    @Test func ownTracksRegionTransitionOfAnOwnPlace() throws {
        let fix = Fix(
            time: 1_795_955_100.9, coordinate: Coordinate(latitude: 60.1699, longitude: 24.9384), mode: .threeD,
            accuracy: 4)
        let json = try JSON(
            parsing: FleetPayload.ownTracksRegionTransition(
                .enter, place: "Depot", key: "Dp0t", waypointTime: 1_437_552_714, fix: fix, tid: "17",
                id: "van-17:11", stamp: stamp))
        #expect(json["_type"] == "transition" && json["event"] == "enter" && json["desc"] == "Depot")
        #expect(json["rid"] == "Dp0t" && json["wtst"]?.int == 1_437_552_714 && json["t"] == "c")
        #expect(json["lat"]?.double == 60.1699 && json["lon"]?.double == 24.9384 && json["acc"]?.int == 10)
        #expect(json["tst"]?.int == 1_795_955_100 && json["tid"] == "17" && json["_id"] == "van-17:11")
        // No waypoint made the place, no fix time, no accuracy: wtst 0, the system time, no acc.
        let bare = try JSON(
            parsing: FleetPayload.ownTracksRegionTransition(
                .leave, place: "Yard", key: "yard", waypointTime: nil,
                fix: Fix(time: nil, coordinate: fix.coordinate, mode: .twoD), tid: "17", id: "van-17:12",
                stamp: stamp))
        #expect(bare["event"] == "leave" && bare["wtst"]?.int == 0 && bare["acc"] == nil)
        #expect(bare["tst"]?.int == Int(stamp.systemTime))
        // A fix of 10 cm still says 1 m: consumers drop a transition whose acc is 0.
        var sharp = fix
        sharp.accuracy = 0.04
        let close = try JSON(
            parsing: FleetPayload.ownTracksRegionTransition(
                .enter, place: "Yard", key: "yard", waypointTime: nil, fix: sharp, tid: "17", id: "van-17:13",
                stamp: stamp))
        #expect(close["acc"]?.int == 1)
    }
}

@Suite struct FleetSystemTests {
    @Test func theDefaultDeviceIdIsStableHexAndNotTheMachineId() throws {
        let id = try DeviceIdentity.machineSpecific()
        #expect(id.count == 32 && id.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(try DeviceIdentity.machineSpecific() == id)
        let machineID = try String(contentsOfFile: "/etc/machine-id", encoding: .utf8)
        #expect(!machineID.hasPrefix(id))
    }

    @Test func credentialsComeFromTheDirectorySystemdNames() throws {
        let directory = makeTemporaryDirectory("placed-fleet-credentials")
        defer { removeTestDirectory(directory) }
        try "s3cret\n".write(toFile: directory + "/pw", atomically: true, encoding: .utf8)
        unsetenv("CREDENTIALS_DIRECTORY")
        #expect(throws: ServiceCredential.Failure.noCredentials(name: "pw")) { try ServiceCredential.read("pw") }
        setenv("CREDENTIALS_DIRECTORY", directory, 1)
        defer { unsetenv("CREDENTIALS_DIRECTORY") }
        #expect(try ServiceCredential.read("pw") == "s3cret")
        #expect(throws: ServiceCredential.Failure.self) { try ServiceCredential.read("absent") }
        #expect(throws: ServiceCredential.Failure.self) { try ServiceCredential.read("../pw") }
    }

    @Test func theClockStateMatchesTheKernelsOrTimesyncdsWord() {
        // adjtimex answers here (no seccomp filter); under the unit, timesyncd's flag file does.
        var state = timex()
        let result = adjtimex(&state)
        let kernel = result >= 0 && result != TIME_ERROR && state.status & Int32(STA_UNSYNC) == 0
        #expect(SystemClock.isSynchronized() == (result >= 0 ? kernel : access(SystemClock.timesyncdFlag, F_OK) == 0))
        #expect(abs(SystemClock.now() - Double(time(nil))) < 2)
    }
}

@Suite struct FleetExporterTests {
    @Test func aFullDiskLosesEventsCountedAndReportedAndRankingGoesOn() throws {
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: "mqtt://127.0.0.1:1")  // nothing listens: it all waits
            try settings.set("DeviceId", to: "full")
        }
        try publisher.select()
        publisher.loop.pump(for: 0.1)
        let database = try publisher.selections.writableConnection().database
        try database.execute("PRAGMA max_page_count=\(try database.scalarInt64("PRAGMA page_count") ?? 0)")
        let bigRecord: [String: JSON] = ["padding": .string(String(repeating: "x", count: 8000))]
        for _ in 0..<10 {
            publisher.exporter.moved(
                to: Fix(coordinate: Coordinate(latitude: 60.17, longitude: 24.95), accuracy: 4), location: bigRecord,
                top: nil)
        }
        publisher.loop.pump(for: 0.2)
        let status = publisher.exporter.status
        #expect(status.dropped == 10, "every update that could not be stored is counted")
        #expect(status.lastError?.contains("full") == true, "\(status.lastError ?? "-")")
        #expect(status.backlog == 2, "the marker and its state are still there")
    }

    @Test func withoutABrokerNothingIsExportedAndEverythingWaits() throws {
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: "mqtt://127.0.0.1:1")
            try settings.set("DeviceId", to: "waits")
            try settings.set("OwnTracks", to: "yes")
        }
        for _ in 0..<3 { try publisher.select() }
        publisher.exporter.moved(
            to: Fix(coordinate: Coordinate(latitude: 60.17, longitude: 24.95), accuracy: 4), location: [:], top: nil)
        publisher.exporter.sourceChanged("stale")
        publisher.loop.pump(for: 0.7)
        #expect(publisher.exporter.status.backlog == 3 * 2 + 2 + 1)
        #expect(publisher.exporter.status.state == .backoff || publisher.exporter.status.state == .connecting)
        #expect(publisher.exporter.status.lastError?.contains("127.0.0.1:1") == true)
        let rows = try publisher.exporter.outbox.pending(after: 0, limit: 100)
        #expect(
            rows.map(\.message.topic) == [
                "placed/waits/marker", "placed/waits/state", "placed/waits/marker", "placed/waits/state",
                "placed/waits/marker", "placed/waits/state", "placed/waits/state", "owntracks/placed/waits",
                "placed/waits/state",
            ])
        #expect(rows.filter(\.message.retained).count == 6, "the five states and the OwnTracks location")
        let state = try JSON(parsing: rows.last!.message.payload)
        #expect(state["source"] == "stale" && state["marker"]?["selection"]?.int == 3)
    }

    @Test func anOwnPlaceCrossedAndACommandsResultAreRowsOnTheirTopics() throws {
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: "mqtt://127.0.0.1:1")
            try settings.set("DeviceId", to: "van-3")
            try settings.set("OwnTracks", to: "yes")
            try settings.set("AcceptCommands", to: "yes")
        }
        let exporter = publisher.exporter
        #expect(exporter.commandTopics == ["placed/van-3/cmd", "owntracks/placed/van-3/cmd"])
        let fix = Fix(
            time: 1_795_955_100, coordinate: Coordinate(latitude: 60.17, longitude: 24.95), mode: .threeD, accuracy: 4)
        exporter.crossed(
            FleetTransition(
                record: ["event": "enter", "id": "own:gate", "name": "Gate", "kind": "own"], event: .enter,
                placeName: "Gate", key: "gate", waypointTime: 1_437_552_714, fix: fix))
        // The crossing is not written yet (that waits for the loop's turn) when a command commits: it
        // still comes first, as it happened first.
        let result = FleetCommandResult(request: "r1", origin: .placed, outcome: .applied(put: 1, deleted: 0))
        try exporter.recordCommandResult(result)
        exporter.commandTransactionEnded(committed: true)
        publisher.loop.pump(for: 0.1)
        let rows = try exporter.outbox.pending(after: 0, limit: 10)
        #expect(
            rows.map(\.message.topic) == [
                "placed/van-3/transition", "owntracks/placed/van-3/event", "placed/van-3/cmd/result",
            ])
        #expect(rows.map(\.message.kind) == [.transition, .transition, .result])
        #expect(rows.allSatisfy { !$0.message.retained && !$0.message.kind.isDroppable })
        let ours = try JSON(parsing: rows[0].message.payload)
        #expect(ours["type"] == "transition" && ours["place"] == "own:gate" && ours["id"] == "van-3:1")
        #expect(ours["event"] == "enter" && ours["name"] == "Gate" && ours["gpsTime"] == "2026-11-29T12:25:00.000Z")
        let theirs = try JSON(parsing: rows[1].message.payload)
        #expect(theirs["rid"] == "gate" && theirs["wtst"]?.int == 1_437_552_714 && theirs["_id"] == "van-3:2")
        let answer = try JSON(parsing: rows[2].message.payload)
        #expect(answer["type"] == "result" && answer["request"] == "r1" && answer["ok"] == true)
        #expect(answer["put"]?.int == 1 && answer["device"] == "van-3")
    }

    @Test func withoutAcceptCommandsNoTopicIsSubscribed() throws {
        var settings = FleetSettings()
        try settings.set("Broker", to: "mqtt://127.0.0.1:1")
        #expect(!settings.acceptCommands && settings.text(of: "AcceptCommands") == "no")
        try settings.set("AcceptCommands", to: "on")
        #expect(settings.acceptCommands && settings.text(of: "AcceptCommands") == "yes")
        #expect(throws: FleetSettingsError.self) { try settings.set("AcceptCommands", to: "maybe") }
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: "mqtt://127.0.0.1:1")
            try settings.set("OwnTracks", to: "yes")
        }
        #expect(publisher.exporter.commandTopics.isEmpty)
    }
}

@Suite struct FleetStatusTests {
    @Test func theStatusRecordNamesEveryField() throws {
        var status = FleetStatus(device: "van-17")
        status.state = .backoff
        status.broker = "mqtts://a.example:8883"
        status.backlog = 12
        status.dropped = 3
        status.lastError = "mqtts://a.example:8883: Connection refused"
        let json = status.json
        #expect(json["state"] == "backoff" && json["broker"] == "mqtts://a.example:8883")
        #expect(json["backlog"]?.int == 12 && json["dropped"]?.int == 3 && json["rejected"]?.int == 0)
        #expect(json["lastError"] == "mqtts://a.example:8883: Connection refused")
        #expect(FleetStatus(device: "d").json["broker"] == nil)
        #expect(
            status.summary
                == "backoff (mqtts://a.example:8883), backlog 12, 3 dropped; last error: \(status.lastError!)")
    }
}

@Suite struct PublishFailureTests {
    @Test func onlyWhatIsWrongWithTheMessageSkipsIt() {
        for code in [
            MOSQ_ERR_INVAL, MOSQ_ERR_PAYLOAD_SIZE, MOSQ_ERR_MALFORMED_UTF8, MOSQ_ERR_OVERSIZE_PACKET,
            MOSQ_ERR_RETAIN_NOT_SUPPORTED,
        ] {
            #expect(MQTTConnection.PublishFailure(code: code.rawValue) == .message, "\(code)")
        }
        // A write failing on a TLS link is MOSQ_ERR_TLS since libmosquitto 2.0.16: the link's, as ERRNO is.
        for code in [
            MOSQ_ERR_TLS, MOSQ_ERR_ERRNO, MOSQ_ERR_NO_CONN, MOSQ_ERR_CONN_LOST, MOSQ_ERR_NOMEM, MOSQ_ERR_PROTOCOL,
            MOSQ_ERR_QOS_NOT_SUPPORTED, MOSQ_ERR_KEEPALIVE, MOSQ_ERR_UNKNOWN,
        ] {
            #expect(MQTTConnection.PublishFailure(code: code.rawValue) == .connection, "\(code)")
        }
        #expect(MQTTConnection.PublishFailure(code: 999) == .connection, "a code this build does not know")
    }
}

@Suite struct HostLookupTests {
    @Test func aNameIsLookedUpOffTheLoopAndAnsweredOnIt() throws {
        let loop = try EventLoop()
        var outcome: HostLookup.Outcome?
        let lookup = try HostLookup(loop: loop, host: "localhost", port: 1883) { outcome = $0 }
        #expect(outcome == nil, "the answer comes on the loop, not from inside the call")
        #expect(loop.pump(seconds: 10) { outcome != nil })
        guard case .addresses(let addresses) = outcome else {
            Issue.record("localhost did not resolve: \(String(describing: outcome))")
            return
        }
        #expect(!addresses.isEmpty && addresses.allSatisfy { $0 == "::1" || $0.hasPrefix("127.") }, "\(addresses)")
        withExtendedLifetime(lookup) {}
    }

    @Test func aNameThatDoesNotResolveIsAFailureWithItsReason() throws {
        let loop = try EventLoop()
        var outcome: HostLookup.Outcome?
        let lookup = try HostLookup(loop: loop, host: "no-such-broker.invalid", port: 1883) { outcome = $0 }
        #expect(loop.pump(seconds: 30) { outcome != nil })
        guard case .failed(let reason) = outcome else {
            Issue.record("resolved: \(String(describing: outcome))")
            return
        }
        #expect(reason.hasPrefix("cannot resolve no-such-broker.invalid: "), "\(reason)")
        withExtendedLifetime(lookup) {}
    }

    @Test func aCancelledLookupSaysNothing() throws {
        let loop = try EventLoop()
        var heard = false
        let lookup = try HostLookup(loop: loop, host: "localhost", port: 1883) { _ in heard = true }
        lookup.cancel()
        loop.pump(for: 0.5)
        #expect(!heard)
    }

    /// A loop that can watch nothing more (it finished): a named error, and the read end closed once, by
    /// the lookup's own cancel (the thread closes the write end once it has answered).
    @Test func aLoopThatCannotWatchTheAnswerIsANamedError() throws {
        let loop = try EventLoop()
        loop.exit(0)
        _ = try loop.runOnce(timeout: 0)
        var heard = false
        #expect {
            _ = try HostLookup(loop: loop, host: "localhost", port: 1883) { _ in heard = true }
        } throws: { error in
            "\(error)".contains("cannot look localhost up: sd_event_add_io")
        }
        #expect(!heard)
    }

    @Test func addressesNeedNoLookup() {
        #expect(HostLookup.isNumeric("127.0.0.1") && HostLookup.isNumeric("2001:db8::10"))
        #expect(!HostLookup.isNumeric("broker.example") && !HostLookup.isNumeric("localhost"))
    }
}

@Suite struct SelectionJournalTests {
    /// The daemon writes the marker's rows inside its selection transaction; when that rolls back (here:
    /// an error after them), the rows, the counts and the state go with it, and the next marker's state
    /// knows nothing of the one that was not recorded.
    @Test func aRolledBackSelectionLeavesNoRowAndNoTrace() throws {
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: "mqtt://127.0.0.1:1")
            try settings.set("DeviceId", to: "rollback")
        }
        try publisher.select()
        publisher.loop.pump(for: 0.1)
        let before = try publisher.exporter.outbox.pending(after: 0, limit: 100).count
        struct Refused: Error {}
        let marker = Marker(
            place: RankedPlace(
                place: Place(
                    id: "osm:node/99", name: "Not recorded", kind: "amenity=cafe",
                    coordinate: Coordinate(latitude: 60.17, longitude: 24.95)), distance: 1, likelihood: 0.9),
            location: Fix(coordinate: Coordinate(latitude: 60.17, longitude: 24.95), accuracy: 4), time: 0,
            generation: 1)
        #expect(throws: SelectionLogError.self) {
            _ = try publisher.selections.append(marker) { recorded in
                try publisher.exporter.recordAlongside(recorded, record: ["place": ["id": "osm:node/99"]], gpsTime: nil)
                throw Refused()
            }
        }
        publisher.exporter.selectionTransactionEnded(committed: false)
        #expect(try publisher.exporter.outbox.pending(after: 0, limit: 100).count == before)
        #expect(publisher.exporter.status.backlog == before)
        try publisher.select()
        publisher.loop.pump(for: 0.1)
        let rows = try publisher.exporter.outbox.pending(after: 0, limit: 100)
        let state = try JSON(parsing: rows.last!.message.payload)
        #expect(state["marker"]?["selection"]?.int == 2, "the second recorded selection, not the rolled back one")
        #expect(!rows.contains { String(decoding: $0.message.payload, as: UTF8.self).contains("osm:node/99") })
    }
}
