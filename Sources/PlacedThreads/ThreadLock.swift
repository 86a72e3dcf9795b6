#if canImport(Glibc)
    import Glibc
#endif

/// A POSIX mutex and one condition variable on it, in memory of their own (a `pthread_mutex_t` must not
/// move). Taking or releasing it uncontended is an atomic instruction in user space, no system call: the
/// daemon's loop thread holds its state's lock all the time except while it waits for events
/// (`EventLoop.lock`), so a request thread takes it while the loop sleeps without entering the kernel.
public final class ThreadLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }

    public func unlock() { pthread_mutex_unlock(mutex) }

    /// Whether the lock was free (and is now held by the caller).
    public func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }

    /// Runs `body` with the lock held.
    public func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body()
    }

    /// With the lock held: releases it until `broadcast()` (or a spurious wake-up: wait in a loop on the
    /// condition waited for), and holds it again on return.
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// Wakes every `wait()`; no system call when nobody waits.
    public func broadcast() { pthread_cond_broadcast(condition) }
}
