import Testing

@testable import PlacedThreads

#if canImport(Glibc)
    import Glibc
#endif

/// A box the test and the worker share; the worker's hand-over orders their accesses.
private final class Log: @unchecked Sendable {
    var values: [Int] = []
    var threads: Set<UInt> = []
    var mostWaiting = 0
}

struct OrderedWorkerTests {
    @Test func runsEveryJobInOrderOnAnotherThread() {
        let worker = OrderedWorker(depth: 3)
        let log = Log()
        for value in 0..<10_000 {
            worker.submit {
                log.values.append(value)
                log.threads.insert(UInt(pthread_self()))
            }
        }
        worker.wait()
        #expect(log.values == Array(0..<10_000))
        #expect(log.threads.count == 1)
        #expect(!log.threads.contains(UInt(pthread_self())))
        worker.stop()
    }

    @Test func submitWaitsWhileDepthJobsWait() {
        let worker = OrderedWorker(depth: 2)
        let log = Log()
        var submitted = 0
        // Each job sees how many were submitted but not yet run: never more than depth waiting + itself.
        for value in 0..<200 {
            submitted += 1
            let count = submitted
            worker.submit {
                usleep(200)
                log.values.append(value)
                log.mostWaiting = max(log.mostWaiting, count - log.values.count)
            }
        }
        worker.wait()
        #expect(log.values.count == 200)
        #expect(log.mostWaiting <= 2)
        worker.stop()
    }

    @Test func waitReturnsOnlyWhenTheLastJobHasRun() {
        let worker = OrderedWorker()
        let log = Log()
        for round in 0..<50 {
            worker.submit {
                usleep(1_000)
                log.values.append(round)
            }
            worker.wait()
            #expect(log.values.count == round + 1)
        }
        worker.stop()
    }

    @Test func stopRunsWhatIsQueuedThenJobsRunInSubmit() {
        let worker = OrderedWorker(depth: 8)
        let log = Log()
        for value in 0..<8 { worker.submit { log.values.append(value) } }
        worker.stop()
        #expect(log.values == Array(0..<8))
        worker.submit { log.values.append(8) }
        #expect(log.values == Array(0..<9))
    }
}

extension OrderedWorkerTests {
    @Test func waitForJobReturnsWhenThatJobHasRun() {
        let worker = OrderedWorker(depth: 4)
        // One slot a job, so that reading a finished job's slot never races with a later job's write.
        let ran = UnsafeMutablePointer<Int>.allocate(capacity: 4)
        ran.initialize(repeating: 0, count: 4)
        defer { ran.deallocate() }
        let slots = Slots(ran)
        var numbers: [Int] = []
        for job in 0..<4 {
            numbers.append(
                worker.submit {
                    usleep(job < 2 ? 2_000 : 20_000)
                    slots.pointer[job] = 1
                })
        }
        #expect(numbers == [0, 1, 2, 3])
        worker.wait(forJob: 1)
        #expect(ran[0] == 1 && ran[1] == 1)
        worker.wait(forJob: 3)
        #expect((0..<4).allSatisfy { ran[$0] == 1 })
        worker.stop()
    }
}

private struct Slots: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<Int>
    init(_ pointer: UnsafeMutablePointer<Int>) { self.pointer = pointer }
}

/// Counts the instances alive, under a lock (made on one thread, freed on the other).
private final class Tracked: @unchecked Sendable {
    nonisolated(unsafe) static var lock = pthread_mutex_t()
    nonisolated(unsafe) static var live = 0
    nonisolated(unsafe) static var mostLive = 0

    init() {
        pthread_mutex_lock(&Self.lock)
        Self.live += 1
        Self.mostLive = max(Self.mostLive, Self.live)
        pthread_mutex_unlock(&Self.lock)
    }

    deinit {
        pthread_mutex_lock(&Self.lock)
        Self.live -= 1
        pthread_mutex_unlock(&Self.lock)
    }
}

extension OrderedWorkerTests {
    /// A job's captures are freed once it has run, though the queue never empties meanwhile.
    @Test func aJobsCapturesAreFreedWhenItHasRun() {
        let worker = OrderedWorker(depth: 4)
        for _ in 0..<5_000 {
            let tracked = Tracked()
            worker.submit {
                usleep(20)  // slower than the submitting: the queue stays full
                withExtendedLifetime(tracked) {}
            }
        }
        worker.wait()
        worker.stop()
        pthread_mutex_lock(&Tracked.lock)
        let (live, most) = (Tracked.live, Tracked.mostLive)
        pthread_mutex_unlock(&Tracked.lock)
        #expect(live == 0)
        // Queued (4), running (1), being made (1), one just run whose closure is being let go.
        #expect(most <= 7)
    }
}
