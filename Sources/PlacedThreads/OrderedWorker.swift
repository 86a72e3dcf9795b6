#if canImport(Glibc)
    import Glibc
#endif

/// One POSIX thread that runs the jobs handed to it one at a time, in the order they were handed over,
/// with at most `depth` waiting: a pipeline stage beside the thread that makes the jobs. The import uses
/// it where one thread's work can go on while another consumes what it made (the places spilled while
/// the next blocks are decoded; the SQLite rows written while the pack is), so the results are those of
/// one thread doing both in turn, and memory is bounded by `depth` jobs.
///
/// A job may use state the submitting thread made, as long as that thread leaves it alone until
/// `wait()` returns: the hand-over through the lock orders the two threads' memory accesses.
public final class OrderedWorker: @unchecked Sendable {
    public let depth: Int
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// Signalled when a job is queued or the worker is to stop (the worker waits on it).
    private let queued = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Signalled when a job is done (`submit` and `wait` wait on it).
    private let done = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Queued jobs from `head` on; a taken job's slot is emptied at once, so that what it holds is freed
    /// when it has run, not when the queue next empties.
    private var jobs: [(() -> Void)?] = []
    private var head = 0
    /// Jobs handed over and jobs run, ever: a job's number is the count before it.
    private var submitted = 0
    private var completed = 0
    private var running = false
    private var stopping = false
    private var thread: pthread_t?

    /// Starts the thread; without one to be had, every job runs in `submit`, on the caller's thread.
    public init(depth: Int = 4) {
        self.depth = max(1, depth)
        pthread_mutex_init(lock, nil)
        pthread_cond_init(queued, nil)
        pthread_cond_init(done, nil)
        // The thread holds the worker until `serve` returns (after `stop`).
        thread = startThread { [self] in serve() }
    }

    deinit {
        pthread_cond_destroy(done)
        pthread_cond_destroy(queued)
        pthread_mutex_destroy(lock)
        done.deallocate()
        queued.deallocate()
        lock.deallocate()
    }

    /// Queues `job` behind the others, first waiting while `depth` jobs wait; returns its number (0, 1, ...).
    @discardableResult
    public func submit(_ job: @escaping () -> Void) -> Int {
        guard thread != nil else {
            job()
            submitted += 1
            completed += 1
            return submitted - 1
        }
        pthread_mutex_lock(lock)
        while jobs.count - head >= depth { pthread_cond_wait(done, lock) }
        jobs.append(job)
        let number = submitted
        submitted += 1
        pthread_cond_signal(queued)
        pthread_mutex_unlock(lock)
        return number
    }

    /// Returns once the job numbered `number` has run (and with it every job before it).
    public func wait(forJob number: Int) {
        guard thread != nil else { return }
        pthread_mutex_lock(lock)
        while completed <= number && number < submitted { pthread_cond_wait(done, lock) }
        pthread_mutex_unlock(lock)
    }

    /// Returns once every job submitted has run.
    public func wait() {
        guard thread != nil else { return }
        pthread_mutex_lock(lock)
        while jobs.count > head || running { pthread_cond_wait(done, lock) }
        pthread_mutex_unlock(lock)
    }

    /// Runs what is queued, then ends the thread (the worker takes no job after this).
    public func stop() {
        guard let thread else { return }
        pthread_mutex_lock(lock)
        stopping = true
        pthread_cond_signal(queued)
        pthread_mutex_unlock(lock)
        pthread_join(thread, nil)
        self.thread = nil
    }

    private func serve() {
        pthread_mutex_lock(lock)
        while true {
            while jobs.count == head && !stopping { pthread_cond_wait(queued, lock) }
            if jobs.count == head { break }
            let job = jobs[head]!
            jobs[head] = nil
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64 && head * 2 >= jobs.count {
                jobs.removeFirst(head)
                head = 0
            }
            running = true
            pthread_mutex_unlock(lock)
            job()
            pthread_mutex_lock(lock)
            running = false
            completed += 1
            pthread_cond_broadcast(done)
        }
        pthread_mutex_unlock(lock)
    }
}
