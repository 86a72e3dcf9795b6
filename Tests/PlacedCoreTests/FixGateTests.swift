import Testing

@testable import PlacedCore

@Suite struct FixGateTests {
    private func report(time: Double? = 100, mode: Int = 3, lat: Double = 60.17, lon: Double = 24.94)
        -> TPVReport
    {
        TPVReport(
            time: time, mode: mode, latitude: lat, longitude: lon, eph: 12.24, altitude: .nan, speed: 3,
            track: .nan)
    }

    @Test func admitsA2DOr3DFixAndConvertsUnknownsToNil() throws {
        var gate = FixGate()
        let admitted = gate.admit(report(), receivedAt: 42)
        let fix = try #require(admitted)
        #expect(fix.coordinate == Coordinate(latitude: 60.17, longitude: 24.94))
        #expect(fix.receivedAt == 42)
        #expect(fix.mode == .threeD)
        #expect(abs(fix.accuracy! - 5) < 1e-12)  // eph 12.24 m (95 %) is σ 5 m
        #expect(fix.altitude == nil)
        #expect(fix.heading == nil)
        #expect(fix.speed == 3)
        let twoD = gate.admit(report(time: 101, mode: 2), receivedAt: 43)
        #expect(twoD?.mode == .twoD)
    }

    @Test func rejectsNoFixAndNonFiniteOrOutOfRangePositions() {
        var gate = FixGate()
        #expect(gate.admit(report(mode: 0), receivedAt: 0) == nil)
        #expect(gate.admit(report(time: 2, mode: 1), receivedAt: 0) == nil)
        #expect(gate.admit(report(time: 3, lat: .nan), receivedAt: 0) == nil)
        #expect(gate.admit(report(time: 4, lon: .infinity), receivedAt: 0) == nil)
        #expect(gate.admit(report(time: 5, lat: 95), receivedAt: 0) == nil)
    }

    @Test func handlesEachFixTimeOnce() {
        var gate = FixGate()
        #expect(gate.admit(report(time: 10), receivedAt: 0) != nil)
        #expect(gate.admit(report(time: 10, lat: 60.18), receivedAt: 1) == nil)
        #expect(gate.admit(report(time: 11), receivedAt: 2) != nil)
        // A receiver whose clock steps backwards still produces new epochs.
        #expect(gate.admit(report(time: 5), receivedAt: 3) != nil)
        gate.reset()
        #expect(gate.admit(report(time: 5), receivedAt: 4) != nil)
    }

    @Test func rejectedReportsDoNotConsumeTheEpoch() {
        var gate = FixGate()
        #expect(gate.admit(report(time: 7, mode: 1), receivedAt: 0) == nil)
        #expect(gate.admit(report(time: 7), receivedAt: 1) != nil)
    }

    @Test func backoffDoublesUpToTheCapAndResets() {
        var backoff = Backoff(initial: 250_000, maximum: 2_000_000)
        #expect(
            (0..<6).map { _ in backoff.next() } == [
                250_000, 500_000, 1_000_000, 2_000_000, 2_000_000, 2_000_000,
            ])
        backoff.reset()
        #expect(backoff.next() == 250_000)
    }
}
