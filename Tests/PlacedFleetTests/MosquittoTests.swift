import Foundation
import PlacedCore
import PlacedStore
import PlacedSystem
import Testing

@testable import PlacedFleet

#if canImport(Glibc)
    import Glibc
#endif

/// PlacedFleet against real mosquitto brokers on loopback, with a persistent QoS 1 subscriber: what the
/// daemon-level tests (Tests/integration/test_fleet.py: restarts, a killed broker, an outage, placed
/// killed, a partition, TLS, a cluster) do not reach: failover from a hung broker, the status and will
/// messages, MQTT 5, a broker that never acknowledges.
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
        // What the hung broker never acknowledged goes to the next one in sequence order (a single broker
        // keeps the order it receives), each copy as the first.
        #expect(MarkerLedger(secondConsumer.messages, device: device).problems == [])
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

    /// libmosquitto pings only when its keepalive check runs: a check at a fixed period let a message sent
    /// just after one check (here 6.3 s after CONNACK, the checks at 5 and 10 s) push the ping to the check
    /// at 15 s: 9 s of silence, past the 1.5 keepalives (7.5 s) after which a broker drops the device and
    /// publishes `offline`. (mosquitto 2.0.11 looks only every 6 s, so it let this one pass; with the
    /// default keepalive of 60 s the silence reaches 2 minutes.) The broker's log, in whole seconds, shows
    /// what it heard and when.
    @Test func anIdleDeviceIsHeardFromWithinAKeepaliveAfterAMessage() throws {
        let broker = try MosquittoBroker()
        let device = "idle"
        let watcher = try Subscriber(broker: broker, topic: "placed/\(device)/status", clientID: "watcher")
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: broker.url)
            try settings.set("DeviceId", to: device)
            try settings.set("KeepAlive", to: "5")
        }
        #expect(publisher.loop.pump(seconds: 10) { publisher.exporter.status.state == .connected })
        publisher.loop.pump(for: 6.3)
        try publisher.select()
        #expect(publisher.loop.pump(seconds: 5) { publisher.isDrained && publisher.exporter.status.acknowledged == 2 })
        publisher.loop.pump(for: 10)  // idle, two keepalives after the message
        let log = try String(contentsOfFile: broker.log, encoding: .utf8)
        // "T: New client connected from ... as placed-idle (...)", "T: Received PINGREQ from placed-idle", ...
        let heard = log.split(separator: "\n")
            .filter { $0.contains(" from placed-\(device)") || $0.contains(" as placed-\(device) ") }
            .compactMap { Int($0.prefix { $0 != ":" }) }
        let gaps = zip(heard, heard.dropFirst()).map { $1 - $0 }
        #expect(heard.count >= 6, "CONNECT, status, marker, state and pings: \(tail(of: broker.log))")
        #expect(gaps.allSatisfy { $0 <= 6 }, "seconds between packets \(gaps): a keepalive of 5 s, whole seconds")
        #expect(!log.contains("exceeded timeout"), "the broker dropped the device: \(tail(of: broker.log))")
        #expect(!watcher.messages.contains { $0.payload == "offline" }, "the will was published")
        #expect(publisher.exporter.status.state == .connected)
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
        (listener, port) = try listenOnLoopback("silent broker")
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
        while let (type, _) = readMQTTPacket(client) {
            switch type {
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

/// An MQTT 5 broker that answers each PUBLISH with the PUBACK reason code `reason(topic, payload)` gives
/// (the framing only, in a thread): what mosquitto never says, such as "quota exceeded".
final class ScriptedBroker: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let reason: @Sendable (String, String) -> UInt8
    private var received: [(topic: String, payload: String)] = []
    private var connections = 0
    private let lock = NSLock()

    init(reason: @escaping @Sendable (_ topic: String, _ payload: String) -> UInt8) throws {
        self.reason = reason
        (listener, port) = try listenOnLoopback("scripted broker")
        Thread.detachNewThread { [self] in serve() }
    }

    /// Every PUBLISH received, in order, on every connection.
    var publishes: [(topic: String, payload: String)] { lock.withLock { received } }
    var connectionCount: Int { lock.withLock { connections } }

    private func serve() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            lock.withLock { connections += 1 }
            Thread.detachNewThread { [self] in talk(client) }
        }
    }

    private func talk(_ client: Int32) {
        defer { close(client) }
        func variableInteger(_ bytes: [UInt8], _ at: inout Int) -> Int {
            var value = 0
            var shift = 0
            while at < bytes.count {
                let digit = bytes[at]
                at += 1
                value |= Int(digit & 0x7F) << shift
                shift += 7
                if digit & 0x80 == 0 { break }
            }
            return value
        }
        while let (type, body) = readMQTTPacket(client) {
            switch type {
            case 1: _ = write(client, [0x20, 0x03, 0x00, 0x00, 0x00] as [UInt8], 5)  // CONNACK, no properties
            case 12: _ = write(client, [0xD0, 0x00] as [UInt8], 2)  // PINGREQ → PINGRESP
            case 3:
                // Topic, packet id (QoS 1), properties, payload.
                let topicLength = Int(body[0]) << 8 | Int(body[1])
                let topic = String(decoding: body[2..<2 + topicLength], as: UTF8.self)
                let id = Array(body[2 + topicLength..<4 + topicLength])
                var at = 4 + topicLength
                at += variableInteger(body, &at)
                let payload = String(decoding: body[at...], as: UTF8.self)
                lock.withLock { received.append((topic, payload)) }
                let code = reason(topic, payload)
                _ = write(client, [0x40, 0x03] + id + [code], 5)
            default: break
            }
        }
    }
}

@Suite(.serialized) struct PublishRefusalTests {
    /// Quota exceeded (0x97) for the first marker's first two copies, not authorized (0x87) for the state
    /// that follows the second marker, success for the rest.
    @Test func aMessageRefusedForNowIsSentAgainAndOneRefusedForGoodIsNot() throws {
        let refusals = NSLock()
        nonisolated(unsafe) var quotaLeft = 2
        let broker = try ScriptedBroker { topic, payload in
            if topic.hasSuffix("/state"), payload.contains("\"selection\":2") { return 0x87 }
            guard topic.hasSuffix("/marker"), payload.contains("\"selection\":1") else { return 0 }
            return refusals.withLock {
                guard quotaLeft > 0 else { return 0 }
                quotaLeft -= 1
                return 0x97
            }
        }
        let device = "refusals"
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: "mqtt://127.0.0.1:\(broker.port)")
            try settings.set("DeviceId", to: device)
            try settings.set("Protocol", to: "5")
        }
        #expect(publisher.loop.pump(seconds: 10) { publisher.exporter.status.state == .connected })
        try publisher.select()
        #expect(
            publisher.loop.pump(seconds: 20) { publisher.isDrained && publisher.exporter.status.acknowledged == 2 },
            "\(publisher.exporter.status.summary)")
        let markers = broker.publishes.filter { $0.topic == "placed/\(device)/marker" }.map(\.payload)
        #expect(markers.count == 3, "refused twice for now, then taken")
        #expect(broker.connectionCount == 3, "a new connection after each refusal for now")
        #expect(publisher.exporter.status.rejected == 0 && publisher.exporter.status.acknowledged == 2)

        try publisher.select()
        #expect(
            publisher.loop.pump(seconds: 20) { publisher.isDrained && publisher.exporter.status.acknowledged == 4 },
            "\(publisher.exporter.status.summary)")
        let states = broker.publishes.filter { $0.topic == "placed/\(device)/state" }.map(\.payload)
        #expect(states.filter { $0.contains("\"selection\":2") }.count == 1, "refused for good: not sent again")
        #expect(publisher.exporter.status.rejected == 1 && publisher.exporter.status.acknowledged == 4)
        #expect(broker.connectionCount == 3)
    }
}
