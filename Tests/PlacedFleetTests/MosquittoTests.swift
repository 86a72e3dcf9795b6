import Foundation
import PlacedCore
import PlacedStore
import PlacedSystem
import Testing

@testable import PlacedFleet

#if canImport(Glibc)
    import Glibc
#endif

/// PlacedFleet against real mosquitto brokers on loopback, with a persistent QoS 1 subscriber.
@Suite(.serialized) struct MosquittoTests {
    /// Subscribes, then restarts the broker once so the subscriber's session is in its persistence file
    /// (a later kill -9 restores it from there).
    func consumer(of broker: MosquittoBroker, device: String) throws -> Subscriber {
        let subscriber = try Subscriber(broker: broker, topic: "placed/\(device)/#")
        let deadline = Date().addingTimeInterval(10)
        while !(try String(contentsOfFile: broker.log, encoding: .utf8)).contains("fleet-test-consumer 1 placed/") {
            guard Date() < deadline else {
                throw FixtureError("the subscriber did not subscribe: \(tail(of: broker.log))")
            }
            usleep(20_000)
        }
        try broker.stop()
        try broker.start()
        return subscriber
    }

    @Test func tenThousandSelectionsThroughTenBrokerRestarts() throws {
        let broker = try MosquittoBroker()
        let device = "restarts"
        let subscriber = try consumer(of: broker, device: device)
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: broker.url)
            try settings.set("DeviceId", to: device)
        }
        var stopsWithMessagesInFlight = 0
        for _ in 0..<10 {
            // Half a round with the broker up: markers go out while more are recorded...
            for _ in 0..<500 {
                try publisher.select()
                _ = try? publisher.loop.runOnce(timeout: 0)
            }
            if publisher.exporter.status.inFlight > 0 || publisher.exporter.status.backlog > 0 {
                stopsWithMessagesInFlight += 1
            }
            // ...then stopped in the middle of it, and the other half recorded while it is down.
            try broker.stop()
            for _ in 0..<500 {
                try publisher.select()
                _ = try? publisher.loop.runOnce(timeout: 0)
            }
            try broker.start()
            publisher.loop.pump(for: 0.2)
        }
        let drained = publisher.loop.pump(seconds: 120) {
            publisher.isDrained && MarkerLedger(subscriber.messages, device: device).firstSeen.count == 10_000
        }
        let ledger = MarkerLedger(subscriber.messages, device: device)
        #expect(drained, "status \(publisher.exporter.status.summary); received \(ledger.firstSeen.count)")
        #expect(ledger.missing(of: 1...10_000).isEmpty, "missing \(ledger.missing(of: 1...10_000).count)")
        #expect(ledger.problems.isEmpty, "\(ledger.problems.prefix(5))")
        #expect(stopsWithMessagesInFlight >= 5, "the broker stopped with nothing in flight: the test tested little")
        #expect(publisher.exporter.status.dropped == 0)
    }

    @Test func nothingUnacknowledgedIsLostWhenTheBrokerIsKilled() throws {
        let broker = try MosquittoBroker()
        let device = "killed"
        let subscriber = try consumer(of: broker, device: device)
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: broker.url)
            try settings.set("DeviceId", to: device)
        }
        for _ in 0..<200 { try publisher.select() }
        #expect(publisher.loop.pump(seconds: 20) { publisher.isDrained })
        // A hung broker: it reads nothing and acknowledges nothing, then dies without saving.
        broker.pause()
        for _ in 0..<300 { try publisher.select() }
        publisher.loop.pump(for: 1)
        let acknowledged = publisher.exporter.status.acknowledged
        #expect(publisher.exporter.status.inFlight > 0, "nothing was in flight when the broker died")
        broker.kill()
        try broker.start()
        // Every marker from the first not acknowledged on must arrive (seq 2k-1 is marker k); those the
        // broker acknowledged since its last save died with it, which is the broker's loss.
        let firstUnacknowledged = Int(acknowledged + 1) / 2 + 1
        let drained = publisher.loop.pump(seconds: 60) {
            publisher.isDrained
                && MarkerLedger(subscriber.messages, device: device).missing(of: firstUnacknowledged...500).isEmpty
        }
        let ledger = MarkerLedger(subscriber.messages, device: device)
        #expect(drained, "status \(publisher.exporter.status.summary)")
        #expect(
            ledger.missing(of: firstUnacknowledged...500).isEmpty,
            "missing \(ledger.missing(of: firstUnacknowledged...500).count) after \(firstUnacknowledged)")
        #expect(ledger.problems.isEmpty, "\(ledger.problems.prefix(5))")
    }

    @Test func aLongOutageDrainsInOrder() throws {
        let broker = try MosquittoBroker()
        let device = "outage"
        let subscriber = try consumer(of: broker, device: device)
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: broker.url)
            try settings.set("DeviceId", to: device)
        }
        #expect(publisher.loop.pump(seconds: 10) { publisher.exporter.status.state == .connected })
        try broker.stop()
        for index in 0..<2_000 {
            if index % 2 == 0 {
                try publisher.select()
            } else {
                let visit = FleetVisit(
                    record: ["index": .number(Double(index))], placeName: "Place \(index)",
                    coordinate: Coordinate(latitude: 60.17, longitude: 24.95), accuracy: 12, start: SystemClock.now(),
                    gpsTime: nil)
                index % 4 == 1 ? publisher.exporter.visitStarted(visit) : publisher.exporter.visitEnded(visit)
            }
            _ = try? publisher.loop.runOnce(timeout: 0)
        }
        publisher.loop.pump(for: 1)
        #expect(publisher.exporter.status.state != .connected)
        #expect(publisher.exporter.status.backlog == 4_000, "each event and its state update wait in the outbox")
        try broker.start()
        let drained = publisher.loop.pump(seconds: 90) {
            publisher.isDrained && subscriber.messages.filter { $0.topic.hasSuffix("/visit") }.count >= 1_000
                && MarkerLedger(subscriber.messages, device: device).firstSeen.count == 1_000
        }
        #expect(drained, "status \(publisher.exporter.status.summary)")
        let ledger = MarkerLedger(subscriber.messages, device: device)
        #expect(ledger.missing(of: 1...1_000).isEmpty)
        #expect(ledger.problems.isEmpty)
        // Everything, visits and states included, in sequence order.
        let sequences = subscriber.messages.compactMap { $0.json?["seq"]?.int }
        var seen = Set<Int>()
        let firsts = sequences.filter { seen.insert($0).inserted }
        #expect(firsts == firsts.sorted())
        #expect(Set(firsts).isSuperset(of: 1...4_000))
    }

    @Test func failsOverToTheNextBrokerWhenOneHangs() throws {
        let first = try MosquittoBroker()
        let second = try MosquittoBroker()
        let device = "failover"
        let firstConsumer = try consumer(of: first, device: device)
        let secondConsumer = try consumer(of: second, device: device)
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: "\(first.url) \(second.url)")
            try settings.set("DeviceId", to: device)
            try settings.set("KeepAlive", to: "5")
        }
        for _ in 0..<100 { try publisher.select() }
        #expect(publisher.loop.pump(seconds: 20) { publisher.isDrained })
        #expect(publisher.exporter.status.broker == first.url)
        // Hung, not closed: only the keepalive can tell. Within two intervals the export moves on.
        first.pause()
        for _ in 0..<100 { try publisher.select() }
        let start = Date()
        let movedOn = publisher.loop.pump(seconds: 20) {
            publisher.exporter.status.broker == second.url && publisher.exporter.status.state == .connected
        }
        #expect(movedOn, "status \(publisher.exporter.status.summary)")
        #expect(Date().timeIntervalSince(start) < 12, "keepalive 5 s: given up within two intervals and a bit")
        let drained = publisher.loop.pump(seconds: 20) {
            publisher.isDrained
                && MarkerLedger(secondConsumer.messages, device: device).missing(of: 101...200).isEmpty
        }
        #expect(drained, "status \(publisher.exporter.status.summary)")
        first.resume()
        let union = Set(MarkerLedger(firstConsumer.messages, device: device).firstSeen.keys)
            .union(MarkerLedger(secondConsumer.messages, device: device).firstSeen.keys)
        #expect(union == Set(1...200))
    }

    @Test func statusIsOnlineRetainedAndTheWillSaysOffline() throws {
        let broker = try MosquittoBroker()
        let device = "status"
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: broker.url)
            try settings.set("DeviceId", to: device)
            try settings.set("KeepAlive", to: "5")
            try settings.set("Protocol", to: "5")
        }
        #expect(publisher.loop.pump(seconds: 10) { publisher.exporter.status.state == .connected })
        publisher.loop.pump(for: 0.3)
        // A late subscriber sees the retained status.
        let late = try Subscriber(broker: broker, topic: "placed/\(device)/status", clientID: "late")
        #expect(publisher.loop.pump(seconds: 10) { late.messages.contains { $0.payload == "online" } })
        // The publisher's loop stops turning (a hung or powered-off device): no pings, and after one and a
        // half keepalives the broker publishes the will.
        let watcher = try Subscriber(broker: broker, topic: "placed/\(device)/status", clientID: "watcher")
        let deadline = Date().addingTimeInterval(15)
        while !watcher.messages.contains(where: { $0.payload == "offline" }), Date() < deadline { usleep(100_000) }
        #expect(watcher.messages.contains { $0.payload == "offline" }, "no will: \(tail(of: broker.log))")
        _ = late
    }

    @Test func mqtt5ConnectsWithAPersistentSession() throws {
        let broker = try MosquittoBroker()
        let device = "five"
        let subscriber = try consumer(of: broker, device: device)
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: broker.url)
            try settings.set("DeviceId", to: device)
            try settings.set("Protocol", to: "5")
        }
        for _ in 0..<50 { try publisher.select() }
        let drained = publisher.loop.pump(seconds: 20) {
            publisher.isDrained && MarkerLedger(subscriber.messages, device: device).firstSeen.count == 50
        }
        #expect(drained)
        let log = try String(contentsOfFile: broker.log, encoding: .utf8)
        #expect(log.contains("as placed-\(device) (p5, c0, k60)"), "MQTT 5, clean start off, keepalive 60")
    }
}

/// A broker that accepts the connection and answers pings but never acknowledges a message (a cluster
/// node whose storage lost its leader behaves so): the MQTT framing only, in a thread.
final class SilentBroker: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private(set) var publishes = 0
    private let lock = NSLock()

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else { throw FixtureError("silent broker: \(String(cString: strerror(errno)))") }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in serve() }
    }

    var publishCount: Int { lock.withLock { publishes } }

    private func serve() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            Thread.detachNewThread { [self] in talk(client) }
        }
    }

    private func talk(_ client: Int32) {
        defer { close(client) }
        func byte() -> UInt8? {
            var value: UInt8 = 0
            return read(client, &value, 1) == 1 ? value : nil
        }
        while let header = byte() {
            var length = 0
            var shift = 0
            while let digit = byte() {
                length |= Int(digit & 0x7F) << shift
                shift += 7
                if digit & 0x80 == 0 { break }
            }
            for _ in 0..<length { _ = byte() }
            switch header >> 4 {
            case 1: _ = write(client, [0x20, 0x02, 0x00, 0x00] as [UInt8], 4)  // CONNECT → CONNACK accepted
            case 12: _ = write(client, [0xD0, 0x00] as [UInt8], 2)  // PINGREQ → PINGRESP
            case 3: lock.withLock { publishes += 1 }  // PUBLISH: never a PUBACK
            default: break
            }
        }
    }
}

@Suite(.serialized) struct SilentBrokerTests {
    @Test func aBrokerThatNeverAcknowledgesIsLeftForTheNext() throws {
        let silent = try SilentBroker()
        let broker = try MosquittoBroker()
        let device = "unacknowledged"
        let subscriber = try Subscriber(broker: broker, topic: "placed/\(device)/#")
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: "mqtt://127.0.0.1:\(silent.port) \(broker.url)")
            try settings.set("DeviceId", to: device)
            try settings.set("KeepAlive", to: "5")
        }
        #expect(publisher.loop.pump(seconds: 10) { publisher.exporter.status.state == .connected })
        for _ in 0..<20 { try publisher.select() }
        let start = Date()
        let movedOn = publisher.loop.pump(seconds: 30) { publisher.exporter.status.broker == broker.url }
        #expect(movedOn, "status \(publisher.exporter.status.summary)")
        #expect(Date().timeIntervalSince(start) >= 9, "given two keepalives (10 s) to acknowledge")
        #expect(silent.publishCount >= 40, "the 20 markers and their states went to the silent broker first")
        let delivered = publisher.loop.pump(seconds: 20) {
            publisher.isDrained && MarkerLedger(subscriber.messages, device: device).firstSeen.count == 20
        }
        #expect(delivered, "status \(publisher.exporter.status.summary)")
    }
}
