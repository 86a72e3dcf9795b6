import Testing

@testable import PlacedFleet

@Suite struct KeepAliveScheduleTests {
    /// libmosquitto's rule, at whole seconds as its clock reads: a ping once a keepalive has passed since
    /// the last write or read. The broker's: a client silent for 1.5 keepalives is dropped.
    @Test func aPingGoesOutBeforeTheBrokerGivesUpWhenEverTheMessageWasSent() {
        let keepAlive: UInt64 = 5_000_000
        for sentAfter in stride(from: UInt64(0), through: 20_000_000, by: 50_000) {
            var schedule = KeepAliveSchedule(interval: keepAlive, start: 0)
            // The status right after CONNACK, a message `sentAfter` later, its PUBACK a millisecond on.
            var checks: [UInt64] = []
            var lastPing: UInt64 = 0
            var pings: [UInt64] = []
            var lastSent: UInt64 = 0
            var lastReceived: UInt64 = 0
            var sent = false
            while checks.count < 10 {
                if !sent, sentAfter < schedule.due {
                    sent = true
                    schedule.wrote(at: sentAfter)
                    schedule.read(at: sentAfter + 1_000)
                    lastSent = sentAfter
                    lastReceived = sentAfter + 1_000
                    continue
                }
                let now = schedule.due
                checks.append(now)
                if now / 1_000_000 >= (max(lastSent, lastPing)) / 1_000_000 + 5
                    || now / 1_000_000 >= lastReceived / 1_000_000 + 5
                {
                    pings.append(now)
                    lastPing = now
                    lastReceived = now  // PINGRESP
                }
                schedule.checked(at: now)
            }
            // What the broker hears: the message, then each ping; never 1.5 keepalives of silence.
            var heard = [UInt64(0)] + pings
            if sent { heard.append(sentAfter) }
            heard.sort()
            let longestSilence = zip(heard, heard.dropFirst()).map { $1 - $0 }.max() ?? 0
            #expect(longestSilence < keepAlive * 3 / 2, "message at \(sentAfter) µs: pings \(pings)")
            #expect(pings.count >= checks.count - 1, "no check without a ping but the one the message moved")
        }
    }

    @Test func anIdleConnectionIsCheckedOnceAKeepalive() {
        var schedule = KeepAliveSchedule(interval: 60, start: 1_000)
        var dues: [UInt64] = []
        for _ in 0..<3 {
            dues.append(schedule.due)
            schedule.checked(at: schedule.due)
            schedule.read(at: schedule.due - 59)  // the PINGRESP
        }
        #expect(dues == [1_060, 1_120, 1_180])
    }

    @Test func nothingReadForAKeepaliveIsDueThoughWritesGoOn() {
        var schedule = KeepAliveSchedule(interval: 60, start: 0)
        for time in stride(from: UInt64(10), through: 100, by: 10) { schedule.wrote(at: time) }
        #expect(schedule.due == 60, "a broker that answers nothing is found out")
    }
}
