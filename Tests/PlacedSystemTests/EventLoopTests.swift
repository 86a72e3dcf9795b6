import PlacedTestSupport
import Testing
#if canImport(Glibc)
    import Glibc
#endif
import PlacedThreads

@testable import PlacedSystem

@Suite struct EventLoopTests {
    @Test func timerFiresAndLoopExitsWithCode() throws {
        let loop = try EventLoop()
        let start = loop.now
        var fired = 0
        let timer = try loop.after(20_000) {
            fired += 1
            loop.exit(7)
        }
        #expect(try loop.run() == 7)
        #expect(fired == 1)
        #expect(loop.now - start >= 20_000)
        _ = timer
    }

    @Test func timerSlackIsATenthOfTheDelayAtMost250ms() {
        #expect(EventLoop.slack(forDelay: 250_000) == 25_000)
        #expect(EventLoop.slack(forDelay: 30_000_000) == 250_000)
        #expect(EventLoop.slack(forDelay: 5) == 1, "0 would mean sd-event's default, 250 ms")
    }

    @Test func timerCanBeRearmed() throws {
        let loop = try EventLoop()
        var count = 0
        var timer: EventSource?
        timer = try loop.after(1_000) {
            count += 1
            if count == 3 { loop.exit() } else { try? timer?.schedule(after: 1_000) }
        }
        try loop.run()
        timer = nil  // its handler holds the variable that holds it: a cycle LeakSanitizer reports
        #expect(count == 3)
    }

    @Test func ioSourceReportsReadableData() throws {
        let loop = try EventLoop()
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        var received: [UInt8] = []
        let reader = try loop.onIO(fd: fds[0]) { _ in
            var buffer = [UInt8](repeating: 0, count: 16)
            let n = read(fds[0], &buffer, 16)
            received += buffer.prefix(max(0, n))
            loop.exit()
        }
        let writer = try loop.onNextIteration { _ = write(fds[1], "hi", 2) }
        try loop.run()
        #expect(received == Array("hi".utf8))
        _ = (reader, writer)
    }

    @Test func cancelledSourceNeverFires() throws {
        let loop = try EventLoop()
        var fired = false
        let doomed = try loop.after(1_000) { fired = true }
        doomed.cancel()
        let stop = try loop.after(5_000) { loop.exit() }
        try loop.run()
        #expect(!fired)
        _ = stop
    }

    // Tests run on several threads and the mask is per thread, so the signal goes to this thread only.
    @Test func signalIsDeliveredThroughTheLoop() throws {
        let loop = try EventLoop()
        var got = false
        let source = try loop.onSignal(SIGUSR2) {
            got = true
            loop.exit()
        }
        let sender = try loop.onNextIteration { pthread_kill(pthread_self(), SIGUSR2) }
        try loop.run()
        #expect(got)
        _ = (source, sender)
    }

    @Test func monotonicNowIsTheLoopsClock() throws {
        let loop = try EventLoop()
        let before = EventLoop.monotonicNow
        let timer = try loop.after(1_000) {}
        try loop.runOnce(timeout: 1_000_000)
        #expect(loop.now >= before && loop.now <= EventLoop.monotonicNow)
        _ = timer
    }

    // An assertion: a debug build stops, a release build checks nothing.
    #if DEBUG
        @Test func theLoopsStateIsTouchedOnItsThreadAlone() async {
            await #expect(processExitsWith: .success) {
                let loop = try EventLoop()
                loop.preconditionInLoop()
            }
            let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                let loop = try EventLoop()
                guard let other = startThread({ loop.preconditionInLoop() }) else { return }
                pthread_join(other, nil)
            }
            let said = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
            #expect(said.contains("not on the event loop's thread"))
        }
    #endif
}
