import CSystemd
import Foundation
import PlacectlKit
import PlacedCore
import Testing

/// A D-Bus value for the stand-in service to send: just the types placed's interface uses.
private indirect enum Value {
    case s(String)
    case d(Double)
    case t(UInt64)
    case dict([(String, Value)])
    case dicts([[(String, Value)]])

    var signature: String {
        switch self {
        case .s: "s"
        case .d: "d"
        case .t: "t"
        case .dict: "a{sv}"
        case .dicts: "aa{sv}"
        }
    }

    func append(to m: OpaquePointer) {
        switch self {
        case .s(let text): _ = text.withCString { sd_bus_message_append_basic(m, code("s"), $0) }
        case .d(var number): _ = sd_bus_message_append_basic(m, code("d"), &number)
        case .t(var number): _ = sd_bus_message_append_basic(m, code("t"), &number)
        case .dict(let entries):
            sd_bus_message_open_container(m, code("a"), "{sv}")
            for (key, value) in entries {
                sd_bus_message_open_container(m, code("e"), "sv")
                Value.s(key).append(to: m)
                sd_bus_message_open_container(m, code("v"), value.signature)
                value.append(to: m)
                sd_bus_message_close_container(m)
                sd_bus_message_close_container(m)
            }
            sd_bus_message_close_container(m)
        case .dicts(let list):
            sd_bus_message_open_container(m, code("a"), "a{sv}")
            for entries in list { Value.dict(entries).append(to: m) }
            sd_bus_message_close_container(m)
        }
    }
}

private func code(_ letter: Unicode.Scalar) -> CChar { CChar(bitPattern: UInt8(letter.value)) }

private func place(_ id: String, _ name: String, likelihood: Double) -> [(String, Value)] {
    [
        ("id", .s(id)), ("name", .s(name)), ("kind", .s("amenity=cafe")), ("latitude", .d(60.17)),
        ("longitude", .d(24.94)), ("distance", .d(12.5)), ("likelihood", .d(likelihood)),
        ("attribution", .s("© OpenStreetMap contributors")),
    ]
}

private let location: [(String, Value)] = [
    ("latitude", .d(60.1699)), ("longitude", .d(24.9384)), ("accuracy", .d(8)), ("mode", .s("3d")), ("age", .d(1.5)),
]

private func marker(selection: UInt64) -> [(String, Value)] {
    [
        ("place", .dict(place("osm:node/1", "Ekberg", likelihood: 0.6))), ("location", .dict(location)),
        ("time", .s("2026-11-29T12:00:00.000Z")), ("generation", .t(7)), ("selection", .t(selection)),
    ]
}

/// A private dbus-daemon with a stand-in for placed's object (`io.placed.Placed1`), served on its
/// own thread: fixed answers, an UnknownPlace error, and signals on request.
private final class FakePlacedBus {
    let address: String
    private let daemon: Process
    private let directory: String
    private let service: FakeService?

    init(serve: Bool = true) throws {
        directory = NSTemporaryDirectory() + "placectl-bus-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        address = "unix:path=\(directory)/bus"
        daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        daemon.arguments = ["--session", "--nofork", "--nopidfile", "--address=\(address)"]
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        // Ready once the socket accepts a client.
        var probe: OpaquePointer?
        for _ in 0..<200 {
            if sd_bus_new(&probe) >= 0, sd_bus_set_address(probe, address) >= 0, sd_bus_set_bus_client(probe, 1) >= 0,
                sd_bus_start(probe) >= 0
            {
                break
            }
            sd_bus_flush_close_unref(probe)
            probe = nil
            usleep(20_000)
        }
        sd_bus_flush_close_unref(probe)
        service = serve ? FakeService(address: address) : nil
    }

    deinit {
        service?.stop()
        // SIGKILL: a thread that ran a watch blocks SIGTERM, and a child started from it inherits that.
        kill(daemon.processIdentifier, SIGKILL)
        daemon.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var rankArguments: [Double] { service?.rankArguments ?? [] }
    func emitSignals() { service?.emitSignals() }
    func leave() { service?.leave() }
}

/// The object itself, on a thread of its own until `stop()`.
private final class FakeService: @unchecked Sendable {
    let address: String
    private let lock = NSLock()
    private var pendingSignals = false
    private var leaving = false
    private var stopped = false
    private let finished = DispatchSemaphore(value: 0)
    private var arguments: [Double] = []

    init(address: String) {
        self.address = address
        let ready = DispatchSemaphore(value: 0)
        Thread { [self] in
            run(ready)
            finished.signal()
        }.start()
        ready.wait()
    }

    func stop() {
        lock.withLock { stopped = true }
        finished.wait()
    }

    var rankArguments: [Double] { lock.withLock { arguments } }

    /// Emits PlacesChanged, then MarkerPlaced.
    func emitSignals() { lock.withLock { pendingSignals = true } }

    /// Releases the name, as placed does when it stops.
    func leave() { lock.withLock { leaving = true } }

    private func run(_ ready: DispatchSemaphore) {
        var bus: OpaquePointer?
        sd_bus_new(&bus)
        sd_bus_set_address(bus, address)
        sd_bus_set_bus_client(bus, 1)
        sd_bus_start(bus)
        sd_bus_request_name(bus, "io.placed.Placed1", 0)
        var slot: OpaquePointer?
        sd_bus_add_object(
            bus, &slot, "/io/placed/Placed1",
            { call, userdata, _ in
                Unmanaged<FakeService>.fromOpaque(userdata!).takeUnretainedValue().answer(call!)
            }, Unmanaged.passUnretained(self).toOpaque())
        ready.signal()
        while !lock.withLock({ stopped }) {
            while sd_bus_process(bus, nil) > 0 {}
            if lock.withLock({ () -> Bool in
                defer { pendingSignals = false }
                return pendingSignals
            }) {
                signal(bus!, "PlacesChanged", [.t(8), .dicts([place("osm:node/2", "Fazer", likelihood: 0.9)])])
                signal(bus!, "MarkerPlaced", [.dict(marker(selection: 12))])
            }
            if lock.withLock({ () -> Bool in
                defer { leaving = false }
                return leaving
            }) {
                sd_bus_release_name(bus, "io.placed.Placed1")
            }
            sd_bus_wait(bus, 20_000)
        }
        sd_bus_slot_unref(slot)
        sd_bus_flush_close_unref(bus)
    }

    private func signal(_ bus: OpaquePointer, _ member: String, _ values: [Value]) {
        var m: OpaquePointer?
        sd_bus_message_new_signal(bus, &m, "/io/placed/Placed1", "io.placed.Placed1", member)
        for value in values { value.append(to: m!) }
        sd_bus_send(bus, m, nil)
        sd_bus_message_unref(m)
    }

    private func answer(_ call: OpaquePointer) -> Int32 {
        let member = String(cString: sd_bus_message_get_member(call))
        var reply: OpaquePointer?
        sd_bus_message_new_method_return(call, &reply)
        defer { sd_bus_message_unref(reply) }
        switch member {
        case "GetPlaces":
            var limit: UInt32 = 0
            sd_bus_message_read_basic(call, code("u"), &limit)
            let places = (0..<Int(limit)).map { place("osm:node/\($0 + 1)", "Place \($0 + 1)", likelihood: 0.5) }
            Value.t(7).append(to: reply!)
            Value.dicts(places).append(to: reply!)
        case "Rank":
            var arguments: [Double] = []
            for _ in 0..<3 {
                var number = 0.0
                sd_bus_message_read_basic(call, code("d"), &number)
                arguments.append(number)
            }
            var limit: UInt32 = 0
            sd_bus_message_read_basic(call, code("u"), &limit)
            lock.withLock { self.arguments = arguments + [Double(limit)] }
            Value.dicts([place("osm:node/9", "What If", likelihood: 1)]).append(to: reply!)
        case "Select":
            var id: UnsafePointer<CChar>?
            sd_bus_message_read_basic(call, code("s"), &id)
            let text = String(cString: id!)
            guard text == "osm:node/1" else {
                var error = sd_bus_error()
                sd_bus_error_set(&error, "io.placed.Placed1.Error.UnknownPlace", "no place has the id '\(text)'")
                defer { sd_bus_error_free(&error) }
                return sd_bus_reply_method_error(call, &error)
            }
            Value.dict(marker(selection: 3)).append(to: reply!)
        case "GetHistory":
            Value.dicts([marker(selection: 3), marker(selection: 2)]).append(to: reply!)
        case "GetAll":
            Value.dict([
                ("Location", .dict(location)), ("Generation", .t(7)), ("Marker", .dict([])),
                ("DistanceFilter", .d(50)), ("SourceState", .s("fix")),
            ]).append(to: reply!)
        default:
            return 0
        }
        return sd_bus_send(nil, reply, nil)
    }
}

@Suite(.serialized) struct BusClientTests {
    @Test func currentJoinsGetPlacesAndProperties() throws {
        let fake = try FakePlacedBus()
        let client = try BusClient(bus: .address(fake.address))
        let current = try client.current(limit: 3)
        #expect(current["generation"] == 7)
        #expect(current["stale"] == false)
        #expect(current["places"]?.array?.count == 3)
        #expect(current["places"]?.array?.first?["name"] == "Place 1")
        #expect(current["places"]?.array?.first?["likelihood"] == 0.5)
        #expect(current["location"]?["mode"] == "3d")
        #expect(try client.current(limit: nil)["places"]?.array?.count == 5, "the default limit")
    }

    @Test func rankSendsTheModelsAccuracyWhenNoneIsGiven() throws {
        let fake = try FakePlacedBus()
        let client = try BusClient(bus: .address(fake.address))
        let ranked = try client.rank(latitude: 60.2, longitude: -24.9, accuracy: nil, limit: 2)
        #expect(
            ranked == [
                "places": [
                    [
                        "id": "osm:node/9", "name": "What If", "kind": "amenity=cafe", "latitude": 60.17,
                        "longitude": 24.94, "distance": 12.5, "likelihood": 1,
                        "attribution": "© OpenStreetMap contributors",
                    ]
                ]
            ])
        #expect(fake.rankArguments == [60.2, -24.9, RankingModel().defaultAccuracy, 2])
    }

    @Test func selectAndItsNamedError() throws {
        let fake = try FakePlacedBus()
        let client = try BusClient(bus: .address(fake.address))
        #expect(try client.select(id: "osm:node/1")["marker"]?["selection"] == 3)
        let error = ClientError.daemon(
            name: "io.placed.Placed1.Error.UnknownPlace", parameters: [:], message: "no place has the id 'nope'")
        #expect(throws: error) { try client.select(id: "nope") }
        #expect(error.description == "no place has the id 'nope' (io.placed.Placed1.Error.UnknownPlace)")
    }

    @Test func historyAndStatus() throws {
        let fake = try FakePlacedBus()
        let client = try BusClient(bus: .address(fake.address))
        let markers = try client.history(limit: nil, before: nil)["markers"]?.array
        #expect(markers?.compactMap { $0["selection"]?.int } == [3, 2])
        #expect(markers?.first?["place"]?["id"] == "osm:node/1")
        #expect(throws: ClientError.self) { try client.history(limit: 5, before: 3) }

        let status = try client.status()
        #expect(status["source"] == "fix")
        #expect(status["generation"] == 7)
        #expect(status["distance_filter"] == 50)
        #expect(status["marker"] == nil, "an empty Marker means none")
        #expect(status["location"]?["latitude"] == 60.1699)
        #expect(Format.status(status).contains("marker           none yet"))
    }

    @Test func watchDeliversStateThenSignalsUntilPlacedLeaves() throws {
        let fake = try FakePlacedBus()
        let client = try BusClient(bus: .address(fake.address))
        var updates: [[String: JSON]] = []
        let endpoint = "io.placed.Placed1 on bus \(fake.address)"
        #expect(throws: ClientError.disconnected(endpoint: endpoint)) {
            try client.watch { update in
                updates.append(update)
                if updates.count == 1 { fake.emitSignals() }
                if update["marker"] != nil { fake.leave() }
            }
        }
        #expect(updates.count == 3)
        #expect(updates.first?["places"]?.array?.count == 5)
        #expect(updates.first?["marker"] == nil)
        #expect(updates.dropFirst().first?["generation"] == 8)
        #expect(updates.dropFirst().first?["places"]?.array?.first?["name"] == "Fazer")
        #expect(updates.last?["marker"]?["selection"] == 12)
        #expect(updates.last?["generation"] == 7)
    }

    @Test func absentServiceIsUnreachableWithAHint() throws {
        let fake = try FakePlacedBus(serve: false)
        let client = try BusClient(bus: .address(fake.address))
        #expect {
            try client.status()
        } throws: { error in
            guard case .unreachable(_, _, let hint)? = error as? ClientError else { return false }
            return hint == "is placed running?"
        }
    }

    @Test func noBusAtTheAddress() {
        #expect(throws: ClientError.self) { try BusClient(bus: .address("unix:path=/nonexistent/bus")) }
    }
}
