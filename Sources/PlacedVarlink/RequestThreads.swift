import PlacedSystem
import PlacedThreads

#if canImport(Glibc)
    import Glibc
#endif

/// A few threads that serve request connections off the event loop, each blocked in `recv` on one
/// connection: a call costs the socket's read and write, not the loop's `epoll_wait` as well.
///
/// The loop hands a connection over once it has served a call to one of the server's off-loop methods
/// and nothing else is open on it (`VarlinkConnection.mayLeaveLoop`); beyond `limit` threads busy, a
/// connection simply stays on the loop. The thread answers calls to those methods through the same
/// handler, with the loop's lock held (so it runs alone with the daemon's state, as a callback would);
/// anything else it leaves for the loop, where the connection goes back with the bytes not yet taken:
/// another method, a `more` or `oneway` call, a message too large or malformed, end of input, an error,
/// a reply the socket does not take whole (a client that stops reading: the loop's queue bound then
/// drops it), two seconds without a call (`idleTimeout`). The loop then goes on exactly as if it had
/// read them itself.
///
/// Every property is read and written with the loop's lock held; that lock orders the threads' accesses,
/// which is why the class may be `@unchecked Sendable`. The connections it passes between threads are
/// only ever touched with the lock held, except the descriptor's own `recv` and `send`.
final class RequestThreads: @unchecked Sendable {
    /// What the thread tells the loop when it gives a connection back.
    enum Return: Equatable {
        /// Go on as the loop does with what is there (input taken into the framer, output queued).
        case resume
        /// Close it, as the loop would have on this error.
        case close(VarlinkConnection.CloseReason)
    }

    static let stackSize = 256 * 1024
    /// A connection whose client sends nothing for this long (microseconds) goes back to the loop, and
    /// its thread to the next client.
    static let idleTimeout: UInt64 = 2_000_000
    let limit: Int
    private let lock: ThreadLock
    private var waker: LoopWaker?
    private var threads: [pthread_t] = []
    /// Threads started and not yet ended; threads waiting for a connection.
    private var alive = 0
    private var idle = 0
    /// Handed over, not yet taken by a thread; with a thread now; given back, not yet resumed by the loop.
    private var waiting: [VarlinkConnection] = []
    private var serving: [VarlinkConnection] = []
    private var returned: [(VarlinkConnection, Return)] = []
    private var stopping = false

    init(limit: Int, loop: EventLoop) {
        self.limit = limit
        self.lock = loop.lock
        waker = try? loop.waker { [unowned self] in resumeReturned() }
    }

    /// Whether a thread can take one more connection now (loop thread).
    var canTakeConnection: Bool {
        !stopping && waker != nil && (idle > waiting.count || threads.count < limit)
    }

    /// Loop thread: gives `connection` (its source already off) to a thread, starting one if none is
    /// idle; false when there is none to be had, and the connection stays on the loop.
    func handOver(_ connection: VarlinkConnection) -> Bool {
        guard canTakeConnection else { return false }
        if idle <= waiting.count {
            guard let thread = startThread(stackSize: Self.stackSize, { [self] in serve() }) else { return false }
            threads.append(thread)
            alive += 1
        }
        waiting.append(connection)
        lock.broadcast()
        return true
    }

    /// Loop thread, before the server closes its connections: ends every thread. A connection a thread
    /// holds is shut down, so its blocked `recv` returns; then the threads give theirs back and end. What
    /// was handed over or given back stays the server's to close.
    func stop() {
        guard !stopping else { return }
        stopping = true
        for connection in serving { shutdown(connection.fd, Int32(SHUT_RDWR)) }
        lock.broadcast()
        while alive > 0 { lock.wait() }
        for thread in threads { pthread_join(thread, nil) }
        threads = []
        waker = nil
    }

    /// A thread's life, with the lock held except inside the connection's `recv` and `send`.
    private func serve() {
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        defer { scratch.deallocate() }
        lock.lock()
        while !stopping {
            guard !waiting.isEmpty else {
                idle += 1
                lock.wait()
                idle -= 1
                continue
            }
            let connection = waiting.removeFirst()
            serving.append(connection)
            let outcome = connection.serveOffLoop(scratch: scratch, lock: lock) { self.stopping }
            serving.removeAll { $0 === connection }
            returned.append((connection, outcome))
            waker?.wake()
        }
        alive -= 1
        lock.broadcast()
        lock.unlock()
    }

    /// Loop thread (the waker's handler): the connections given back go on on the loop.
    private func resumeReturned() {
        let all = returned
        returned = []
        for (connection, outcome) in all { connection.resumeOnLoop(outcome) }
    }
}
