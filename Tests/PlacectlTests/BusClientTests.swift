import CSystemd
import Foundation
import PlacectlKit
import PlacedCore
import PlacedJSON
import PlacedSystem
import Testing

private func place(_ id: String, _ name: String, likelihood: Double) -> BusValue {
    .dictionary([
        "id": .string(id), "name": .string(name), "kind": .string("amenity=cafe"), "latitude": .double(60.17),
        "longitude": .double(24.94), "distance": .double(12.5), "likelihood": .double(likelihood),
        "attribution": .string("© OpenStreetMap contributors"),
    ])
}

private let location: BusValue = .dictionary([
    "latitude": .double(60.1699), "longitude": .double(24.9384), "accuracy": .double(8), "mode": .string("3d"),
    "age": .double(1.5),
])

private func marker(selection: Int64) -> BusValue {
    .dictionary([
        "place": place("osm:node/1", "Ekberg", likelihood: 0.6), "location": location,
        "time": .string("2026-11-29T12:00:00.000Z"), "generation": .uint64(7), "selection": .int64(selection),
    ])
}

private func dictionaries(_ values: [BusValue]) -> BusValue { .dictionaries(values.map { $0.dictionary! }) }

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
        for _ in 0..<200 {
            if (try? Bus(.custom(address))) != nil { break }
            usleep(20_000)
        }
        service = serve ? try FakeService(address: address) : nil
    }

    deinit {
        service?.stop()
        // SIGKILL: a thread that ran a watch blocks SIGTERM, and a child started from it inherits that.
        kill(daemon.processIdentifier, SIGKILL)
        daemon.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var rankArguments: [BusValue] { service?.rankArguments ?? [] }
    /// Emits PlacesChanged, then MarkerPlaced.
    func emitSignals() { service?.request(.emitSignals) }
    /// Leaves the bus, as placed does when it stops.
    func leave() { service?.request(.leave) }
}

/// The object itself, served with PlacedSystem's `Bus` and `BusObject` on an event loop of its own
/// thread, which looks for requests from the test every 10 ms.
private final class FakeService: @unchecked Sendable {
    enum Request { case emitSignals, leave, stop }

    private let lock = NSLock()
    private var requests: [Request] = []
    private var arguments: [BusValue] = []
    private var startFailure: Error?
    private let finished = DispatchSemaphore(value: 0)

    init(address: String) throws {
        let ready = DispatchSemaphore(value: 0)
        Thread { [self] in
            do {
                try serve(address, ready)
            } catch {
                lock.withLock { startFailure = error }
                ready.signal()
            }
            finished.signal()
        }.start()
        ready.wait()
        if let failure = lock.withLock({ startFailure }) { throw failure }
    }

    func request(_ request: Request) { lock.withLock { requests.append(request) } }

    func stop() {
        request(.stop)
        finished.wait()
    }

    var rankArguments: [BusValue] { lock.withLock { arguments } }

    private func serve(_ address: String, _ ready: DispatchSemaphore) throws {
        let loop = try EventLoop()
        var bus: Bus? = try Bus(.custom(address))
        let object = BusObject(path: "/io/placed/Placed1", interface: "io.placed.Placed1")
        object.addMethod("GetPlaces", arguments: "u", returns: "taa{sv}") { call in
            let limit = Int(try call.arguments()[0].uint32!)
            let count = limit == 0 ? 5 : limit
            return [
                .uint64(7), dictionaries((1...count).map { place("osm:node/\($0)", "Place \($0)", likelihood: 0.5) }),
            ]
        }
        object.addMethod("Rank", arguments: "dddu", returns: "aa{sv}") { [self] call in
            let received = try call.arguments()
            lock.withLock { arguments = received }
            return [dictionaries([place("osm:node/9", "What If", likelihood: 1)])]
        }
        // The localized forms answer with the language in each name, so a test sees which was asked.
        object.addMethod("GetPlacesLocalized", arguments: "us", returns: "taa{sv}") { call in
            let arguments = try call.arguments()
            let limit = Int(arguments[0].uint32!), language = arguments[1].string!
            return [
                .uint64(8),
                dictionaries(
                    (1...(limit == 0 ? 5 : limit)).map {
                        place("osm:node/\($0)", "Paikka \($0) \(language)", likelihood: 0.5)
                    }),
            ]
        }
        object.addMethod("RankLocalized", arguments: "dddus", returns: "aa{sv}") { [self] call in
            let received = try call.arguments()
            lock.withLock { arguments = received }
            return [dictionaries([place("osm:node/9", "Mitä jos \(received[4].string!)", likelihood: 1)])]
        }
        object.addMethod("Select", arguments: "s", returns: "a{sv}") { call in
            let id = try call.arguments()[0].string!
            guard id == "osm:node/1" else {
                throw BusError("io.placed.Placed1.Error.UnknownPlace", "no place has the id '\(id)'")
            }
            return [marker(selection: 3)]
        }
        object.addMethod("GetHistory", arguments: "u", returns: "aa{sv}") { _ in
            [dictionaries([marker(selection: 3), marker(selection: 2)])]
        }
        object.addProperty("Location", signature: "a{sv}") { _ in location }
        object.addProperty("Generation", signature: "t") { _ in .uint64(7) }
        object.addProperty("Marker", signature: "a{sv}") { _ in .dictionary([:]) }
        object.addProperty("DistanceFilter", signature: "d") { _ in .double(50) }
        object.addProperty("SourceState", signature: "s") { _ in .string("fix") }
        object.addSignal("PlacesChanged", signature: "taa{sv}")
        object.addSignal("MarkerPlaced", signature: "a{sv}")
        try bus!.register(object)
        try bus!.attach(to: loop)
        try bus!.requestName("io.placed.Placed1")

        var poll: EventSource?
        poll = try loop.after(10_000) { [self] in
            for request in lock.withLock({ () -> [Request] in
                defer { requests.removeAll() }
                return requests
            }) {
                switch request {
                case .emitSignals:
                    try? object.emitSignal(
                        "PlacesChanged", [.uint64(8), dictionaries([place("osm:node/2", "Fazer", likelihood: 0.9)])])
                    try? object.emitSignal("MarkerPlaced", [marker(selection: 12)])
                case .leave:
                    bus = nil
                case .stop:
                    loop.exit(0)
                    return
                }
            }
            try? poll?.schedule(after: 10_000)
        }
        ready.signal()
        try loop.run()
        poll = nil
        _ = bus
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
        #expect(try client.current(limit: nil)["places"]?.array?.count == 5, "0: the default limit")
    }

    @Test func aLanguageAsksForTheLocalizedMethodsAndRenamesSignalledRankings() throws {
        let fake = try FakePlacedBus()
        let client = try Endpoint.bus(.address(fake.address)).connect(language: "sv")
        let current = try client.current(limit: 2)
        #expect(current["generation"] == 8 && current["location"]?["mode"] == "3d")
        #expect(current["places"]?.array?.map { $0["name"] } == ["Paikka 1 sv", "Paikka 2 sv"])
        #expect(
            try client.rank(latitude: 60.2, longitude: 24.9, accuracy: 5, limit: 1)["places"]?.array?.first?["name"]
                == "Mitä jos sv")
        #expect(fake.rankArguments.count == 5 && fake.rankArguments[4] == .string("sv"))

        // PlacesChanged (generation 8, in placed's Language=) is asked again in the reader's language.
        var updates: [[String: JSON]] = []
        #expect(throws: ClientError.disconnected(endpoint: "io.placed.Placed1 on bus \(fake.address)")) {
            try client.watch { update in
                updates.append(update)
                if updates.count == 1 { fake.emitSignals() }
                if update["marker"] != nil { fake.leave() }
            }
        }
        #expect(updates.count == 3 && updates[1]["generation"] == 8)
        #expect(updates[1]["places"]?.array?.first?["name"] == "Paikka 1 sv")
    }

    @Test func rankSendsNaNForAnUnknownAccuracy() throws {
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
        #expect(fake.rankArguments.count == 4)
        #expect(fake.rankArguments[0] == .double(60.2) && fake.rankArguments[1] == .double(-24.9))
        #expect(fake.rankArguments[2].double?.isNaN == true, "NaN: placed's own assumption")
        #expect(fake.rankArguments[3] == .uint32(2))
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
