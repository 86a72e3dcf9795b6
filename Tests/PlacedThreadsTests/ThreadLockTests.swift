import Testing

@testable import PlacedThreads

#if canImport(Glibc)
    import Glibc
#endif

/// What the threads share; every access is made with the lock under test held.
private final class Shared: @unchecked Sendable {
    var count = 0
}

struct ThreadLockTests {
    @Test func excludesEveryOtherThread() {
        let lock = ThreadLock()
        let shared = Shared()
        let threads = (0..<4).compactMap { _ in
            startThread(stackSize: 64 * 1024) {
                for _ in 0..<50_000 {
                    lock.withLock {
                        // Read, yield now and then, write: lost updates if two threads were inside at once.
                        let value = shared.count
                        if value % 5_000 == 0 { sched_yield() }
                        shared.count = value + 1
                    }
                }
            }
        }
        #expect(threads.count == 4)
        for thread in threads { pthread_join(thread, nil) }
        #expect(shared.count == 200_000)
    }
}

struct RunConcurrentlyTests {
    /// Both closures run, the other one on a thread of its own, and neither is left running on return.
    @Test func runsTheOtherOnAThreadOfItsOwnAndWaitsForBoth() {
        final class Seen: @unchecked Sendable {
            var otherThread: pthread_t?
            var otherDone = false
        }
        let seen = Seen()
        let lock = ThreadLock()
        var thisThread: pthread_t?
        runConcurrently(
            {
                usleep(50_000)  // still running when `this` is done: the call must wait for it
                lock.withLock {
                    seen.otherThread = pthread_self()
                    seen.otherDone = true
                }
            },
            { thisThread = pthread_self() })
        lock.withLock {
            #expect(seen.otherDone)
            #expect(seen.otherThread.map { pthread_equal($0, pthread_self()) == 0 } == true)
        }
        #expect(thisThread.map { pthread_equal($0, pthread_self()) != 0 } == true)
    }
}
