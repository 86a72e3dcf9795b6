import PlacedCore
import PlacedTestSupport
import Testing

@testable import PlacedFleet

@Suite struct BrokerAddressTests {
    @Test func parsesSchemesHostsAndPorts() throws {
        #expect(
            try BrokerAddress(parsing: "mqtt://broker.example")
                == BrokerAddress(host: "broker.example", port: 1883, tls: false))
        #expect(
            try BrokerAddress(parsing: "mqtts://10.0.0.5") == BrokerAddress(host: "10.0.0.5", port: 8883, tls: true))
        #expect(
            try BrokerAddress(parsing: "mqtt://127.0.0.1:18830/")
                == BrokerAddress(host: "127.0.0.1", port: 18830, tls: false))
        #expect(
            try BrokerAddress(parsing: "mqtts://[fd00::1]:9883")
                == BrokerAddress(host: "fd00::1", port: 9883, tls: true))
        #expect(try BrokerAddress(parsing: "mqtts://[fd00::1]:9883").description == "mqtts://[fd00::1]:9883")
        #expect(try BrokerAddress(parsing: "mqtt://a").description == "mqtt://a:1883")
    }

    @Test func refusesWhatIsNotABrokerURL() {
        #expect(throws: BrokerAddressError.unsupportedScheme("http://a")) { try BrokerAddress(parsing: "http://a") }
        #expect(throws: BrokerAddressError.unsupportedScheme("a:1883")) { try BrokerAddress(parsing: "a:1883") }
        #expect(throws: BrokerAddressError.credentialsInURL("mqtt://u:p@a")) {
            try BrokerAddress(parsing: "mqtt://u:p@a")
        }
        #expect(throws: BrokerAddressError.pathInURL("mqtt://a/b")) { try BrokerAddress(parsing: "mqtt://a/b") }
        #expect(throws: BrokerAddressError.invalidPort("mqtt://a:0")) { try BrokerAddress(parsing: "mqtt://a:0") }
        #expect(throws: BrokerAddressError.invalidPort("mqtt://a:65536")) {
            try BrokerAddress(parsing: "mqtt://a:65536")
        }
        #expect(throws: BrokerAddressError.invalidPort("mqtt://a:")) { try BrokerAddress(parsing: "mqtt://a:") }
        #expect(throws: BrokerAddressError.invalidHost("mqtt://")) { try BrokerAddress(parsing: "mqtt://") }
        #expect(throws: BrokerAddressError.invalidHost("mqtt://[::1")) { try BrokerAddress(parsing: "mqtt://[::1") }
    }
}

@Suite struct DeliveryWindowTests {
    @Test func theCursorMovesOnlyOverAnUnbrokenRunOfAcknowledgements() {
        var window = DeliveryWindow(capacity: 4, after: 10)
        for sequence: Int64 in [11, 12, 14, 15] { window.sent(sequence) }  // 13 was dropped from the outbox
        #expect(window.room == 0 && window.lastSent == 15)
        #expect(window.acknowledge(12) == nil, "11 is still out")
        #expect(window.acknowledge(15) == nil)
        #expect(window.acknowledge(11) == 12)
        #expect(window.unacknowledged == [14])
        #expect(window.acknowledge(14) == 15)
        #expect(window.isEmpty && window.acknowledgedThrough == 15)
        #expect(window.acknowledge(99) == nil, "an id of no message in flight changes nothing")
    }

    @Test func aLostConnectionSendsAgainFromTheCursor() {
        var window = DeliveryWindow(capacity: 8, after: 0)
        for sequence: Int64 in 1...6 { window.sent(sequence) }
        _ = window.acknowledge(1)
        _ = window.acknowledge(2)
        _ = window.acknowledge(4)
        window.restart()
        #expect(window.isEmpty && window.lastSent == 2 && window.acknowledgedThrough == 2)
        window.giveUp(on: 3)
        #expect(window.acknowledgedThrough == 3 && window.lastSent == 3)
    }

    @Test func manyMessagesKeepTheWindowSmall() {
        var window = DeliveryWindow(capacity: 64, after: 0)
        var next: Int64 = 1
        for _ in 0..<10_000 {
            while window.room > 0 {
                window.sent(next)
                next += 1
            }
            _ = window.acknowledge(window.unacknowledged[0])
        }
        #expect(window.acknowledgedThrough == 10_000 && window.count == 63)
    }
}

@Suite struct PublishAcknowledgementTests {
    @Test func onlyARefusalAboutTheMessageIsForGood() {
        #expect(PublishAcknowledgement(reasonCode: 0x00) == .accepted)
        #expect(PublishAcknowledgement(reasonCode: 0x10) == .accepted, "no matching subscribers")
        for code in [0x87, 0x90, 0x95, 0x99] {
            #expect(PublishAcknowledgement(reasonCode: code) == .refusedForGood, "0x\(String(code, radix: 16))")
        }
        for code in [0x80, 0x83, 0x91, 0x97, 0x9F, 0xFF] {
            #expect(PublishAcknowledgement(reasonCode: code) == .refusedForNow, "0x\(String(code, radix: 16))")
        }
    }
}

@Suite struct BrokerRotationTests {
    @Test func failsOverAtOnceAndBacksOffOnlyWhenEveryBrokerFailed() {
        var rotation = BrokerRotation(count: 3, stablePeriod: 1_000, backoff: Backoff(initial: 100, maximum: 250))
        #expect(rotation.index == 0)
        #expect(rotation.failed(at: 0) == (1, 0))
        #expect(rotation.failed(at: 0) == (2, 0))
        #expect(rotation.failed(at: 0) == (0, 100), "all three failed: back off")
        #expect(rotation.failed(at: 0) == (1, 200))
        #expect(rotation.failed(at: 0) == (2, 250), "capped")
        rotation.connected(at: 10)
        rotation.acknowledged()
        #expect(rotation.failed(at: 20) == (0, 0), "the one we were on worked and failed: the next one at once")
    }

    @Test func aSingleBrokerBacksOffEachTime() {
        var rotation = BrokerRotation(count: 1, backoff: Backoff(initial: 100, maximum: 1000))
        #expect(rotation.failed(at: 0) == (0, 100))
        #expect(rotation.failed(at: 0) == (0, 200))
    }

    /// A second device with the same client id, or a rate limit: each CONNACK is followed by a close.
    @Test func brokersThatAcceptAndDropAreBackedOffMoreEachRound() {
        var rotation = BrokerRotation(count: 2, stablePeriod: 5_000, backoff: Backoff(initial: 100, maximum: 10_000))
        var now: UInt64 = 0
        var delays: [UInt64] = []
        for _ in 0..<8 {
            rotation.connected(at: now)
            now += 1_000  // up for less than the stable period, nothing acknowledged
            let (_, delay) = rotation.failed(at: now)
            delays.append(delay)
            now += delay
        }
        #expect(delays == [0, 100, 200, 400, 800, 1_600, 3_200, 6_400])
    }

    @Test func aConnectionThatStayedUpOrDeliveredStartsTheBackoffOver() {
        var rotation = BrokerRotation(count: 1, stablePeriod: 5_000, backoff: Backoff(initial: 100, maximum: 10_000))
        for _ in 0..<3 { _ = rotation.failed(at: 0) }  // 100, 200, 400
        rotation.connected(at: 0)
        #expect(rotation.failed(at: 5_000) == (0, 100), "up for the stable period")
        _ = rotation.failed(at: 5_000)  // 200
        rotation.connected(at: 6_000)
        rotation.acknowledged()
        #expect(rotation.failed(at: 6_001) == (0, 100), "a message acknowledged")
        rotation.acknowledged()  // no connection: proves nothing
        #expect(rotation.failed(at: 6_002) == (0, 200))
    }

    /// Quota exceeded: the connection is given up for a message the broker will take later.
    @Test func refusalsForNowBackOffFurtherEachTime() {
        var rotation = BrokerRotation(count: 1, stablePeriod: 5_000, backoff: Backoff(initial: 100, maximum: 10_000))
        for _ in 0..<4 { _ = rotation.failed(at: 0) }  // an outage: 100, 200, 400, 800
        rotation.connected(at: 0)
        rotation.acknowledged()  // hours of delivery
        rotation.refusedForNow(at: 9_000)
        rotation.acknowledged()  // what was in flight after the refused one
        var delays = [rotation.failed(at: 9_000).delay]
        for time: UInt64 in [10_000, 20_000, 30_000] {
            rotation.connected(at: time)
            rotation.refusedForNow(at: time + 10)  // the same message, refused first again
            rotation.acknowledged()
            delays.append(rotation.failed(at: time + 10).delay)
        }
        #expect(delays == [100, 200, 400, 800], "from the start after a good connection, then doubling")
    }
}

@Suite struct PoisonMessageDetectorTests {
    /// Probing from the first stalled connection on, for the tests that start there.
    static func probing(strikes: Int = 4, probeLength: Int64 = 64) -> PoisonMessageDetector {
        var detector = PoisonMessageDetector(
            suspicionThreshold: 1, strikes: strikes, quickClose: 1_000, firstQuiet: 2_000, probeLength: probeLength)
        _ = detector.connectionEnded(
            progressed: false, inFlight: [5, 6], sinceLastSend: 10, upBeforeSend: 0, cursor: 4)
        return detector
    }

    @Test func findsTheMessageABrokerAnswersByClosing() {
        var detector = PoisonMessageDetector(suspicionThreshold: 2, strikes: 3, quickClose: 1_000, firstQuiet: 2_000)
        // Two connections close with a window in flight and nothing acknowledged: send one at a time.
        let stalled = detector.connectionEnded(
            progressed: false, inFlight: [5, 6, 7], sinceLastSend: 10, upBeforeSend: 0, cursor: 4)
        #expect(stalled == nil && !detector.isProbing && detector.quietPeriod == nil)
        _ = detector.connectionEnded(
            progressed: false, inFlight: [5, 6, 7], sinceLastSend: 10, upBeforeSend: 0, cursor: 4)
        #expect(detector.isProbing)
        // Each connection stays quiet first, longer after each strike; the broker closes right after the send.
        var skipped: Int64?
        var quiets: [UInt64] = []
        while skipped == nil, quiets.count < 10 {
            let quiet = detector.quietPeriod!
            quiets.append(quiet)
            skipped = detector.connectionEnded(
                progressed: false, inFlight: [5], sinceLastSend: 10, upBeforeSend: quiet, cursor: 4)
        }
        #expect(skipped == 5 && quiets == [2_000, 4_000, 8_000])
        #expect(!detector.isProbing && detector.quietPeriod == nil)
    }

    @Test func aLinkThatDiesSlowlyConvictsNothing() {
        var detector = Self.probing(strikes: 2)
        for _ in 0..<5 {
            // The keepalive ended these: long after the send.
            let skipped = detector.connectionEnded(
                progressed: false, inFlight: [5], sinceLastSend: 60_000, upBeforeSend: 2_000, cursor: 4)
            #expect(skipped == nil)
        }
    }

    /// A second device with the same client id, a rate limit, a flaky link: connections that end by
    /// themselves, at a fixed age or at random ages, never get a message skipped.
    @Test func aLinkThatKeepsDroppingNeverConvictsAMessage() {
        var convictions: [String] = []
        for age in stride(from: UInt64(0), through: 50_000, by: 100) {
            var detector = Self.probing()
            for _ in 0..<50 where Self.connection(of: &detector, closingAt: age) != nil {
                convictions.append("cut at \(age) µs each time")
            }
        }
        var random = SplitMix64(seed: 7)
        for longest: UInt64 in [3_000, 5_000, 10_000, 20_000, 40_000] {
            var detector = Self.probing()
            for _ in 0..<2_000 {
                let age = random.next() % longest
                if Self.connection(of: &detector, closingAt: age) != nil {
                    convictions.append("cut at random under \(longest) µs")
                }
            }
        }
        #expect(convictions == [])
    }

    /// One connection as the exporter makes it while probing: quiet for the detector's period, then the
    /// next message (5) alone; the link is cut `age` after the connection was accepted. Nothing once a
    /// message was skipped (probing is over).
    static func connection(of detector: inout PoisonMessageDetector, closingAt age: UInt64) -> Int64? {
        guard let quiet = detector.quietPeriod else { return nil }
        if age < quiet {
            return detector.connectionEnded(
                progressed: false, inFlight: [], sinceLastSend: 0, upBeforeSend: 0, cursor: 4)
        }
        return detector.connectionEnded(
            progressed: false, inFlight: [5], sinceLastSend: age - quiet, upBeforeSend: quiet, cursor: 4)
    }

    @Test func aSendTooSoonAfterTheConnectionIsNoEvidence() {
        var detector = Self.probing(strikes: 1)
        let skipped = detector.connectionEnded(
            progressed: false, inFlight: [5], sinceLastSend: 10, upBeforeSend: 1_999, cursor: 4)
        #expect(skipped == nil)
    }

    @Test func anAcknowledgedSuspectIsCleared() {
        var detector = Self.probing(strikes: 2, probeLength: 3)
        let first = detector.connectionEnded(
            progressed: false, inFlight: [5], sinceLastSend: 10, upBeforeSend: 2_000, cursor: 4)
        #expect(first == nil && detector.quietPeriod == 4_000, "strike one of 5")
        detector.acknowledged(through: 5)
        #expect(detector.quietPeriod == 2_000, "no suspect left: the first quiet period again")
        let second = detector.connectionEnded(
            progressed: true, inFlight: [6], sinceLastSend: 10, upBeforeSend: 2_000, cursor: 5)
        #expect(second == nil, "strike one of 6")
        detector.acknowledged(through: 7)
        #expect(!detector.isProbing, "three past the start of probing, with no suspect left")
    }

    @Test func progressOrAnEmptyWindowResetsTheSuspicion() {
        var detector = PoisonMessageDetector(suspicionThreshold: 2, strikes: 3, quickClose: 1_000)
        _ = detector.connectionEnded(progressed: false, inFlight: [5], sinceLastSend: 10, upBeforeSend: 0, cursor: 4)
        _ = detector.connectionEnded(progressed: true, inFlight: [9], sinceLastSend: 10, upBeforeSend: 0, cursor: 8)
        _ = detector.connectionEnded(progressed: false, inFlight: [9], sinceLastSend: 10, upBeforeSend: 0, cursor: 8)
        #expect(!detector.isProbing)
    }
}
