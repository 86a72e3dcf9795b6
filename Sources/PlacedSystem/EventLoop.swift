import CSystemd
import PlacedThreads

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's single event loop: a thin wrapper over sd-event. Every adapter (gpsd, D-Bus,
/// varlink, timers, signals) plugs a source into it; nothing polls, and with no sources ready the
/// process sleeps in epoll_wait.
///
/// The thread that creates the loop runs it and holds `lock` from then on, except while it waits for
/// events: every callback runs with the lock held.
public final class EventLoop {
    /// The underlying `sd_event *`, for libraries that attach themselves (sd-bus).
    public let handle: OpaquePointer

    /// The lock on everything the loop's callbacks touch (the daemon's state), held by the loop's thread
    /// except inside `sd_event_wait`. Another thread that takes it (a varlink request thread) then runs
    /// alone with that state, and while the loop sleeps it takes it without a system call. Such a
    /// thread must leave sd-event itself alone (sources, timers, `now`): `sd_event_wait` works on them
    /// without the lock once its epoll_wait returns. It asks the loop for such work through a `waker`.
    public let lock = ThreadLock()

    public init() throws(SystemError) {
        var event: OpaquePointer?
        try checkSD(sd_event_new(&event), "sd_event_new")
        handle = event!
        lock.lock()
    }

    deinit {
        sd_event_unref(handle)
        lock.unlock()
    }

    /// Runs until `exit(_:)`; returns the exit code.
    @discardableResult
    public func run() throws(SystemError) -> Int32 {
        while !hasExited { _ = try iterate(timeout: .max) }
        var code: Int32 = 0
        try checkSD(sd_event_get_exit_code(handle, &code), "sd_event_get_exit_code")
        return code
    }

    /// Runs one iteration, waiting at most `timeout` microseconds (`UInt64.max`: forever).
    /// Returns false once the loop has exited.
    @discardableResult
    public func runOnce(timeout: UInt64 = .max) throws(SystemError) -> Bool {
        try iterate(timeout: timeout) || !hasExited
    }

    /// `sd_event_run`'s three steps, the lock released around the wait alone; whether anything was
    /// dispatched.
    private func iterate(timeout: UInt64) throws(SystemError) -> Bool {
        var ready = try checkSD(sd_event_prepare(handle), "sd_event_prepare")
        if ready == 0 {
            lock.unlock()
            let waited = sd_event_wait(handle, timeout)
            lock.lock()
            ready = try checkSD(waited, "sd_event_wait")
        }
        guard ready > 0 else { return false }
        try checkSD(sd_event_dispatch(handle), "sd_event_dispatch")
        return true
    }

    /// CLOCK_MONOTONIC read now, in microseconds (through the vDSO: no system call), for code that may
    /// run off the loop's thread, where `now` is not to be read.
    public static var monotonicNow: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000 + UInt64(time.tv_nsec) / 1_000
    }

    public var hasExited: Bool { sd_event_get_state(handle) == Int32(SD_EVENT_FINISHED) }

    public func exit(_ code: Int32 = 0) { sd_event_exit(handle, code) }

    /// CLOCK_MONOTONIC now, in microseconds, as cached by the loop for this iteration.
    public var now: UInt64 {
        var usec: UInt64 = 0
        sd_event_now(handle, CLOCK_MONOTONIC, &usec)
        return usec
    }

    /// Sends WATCHDOG=1 automatically at half of $WATCHDOG_USEC. Returns whether a watchdog is on.
    @discardableResult
    public func enableWatchdog() throws(SystemError) -> Bool {
        try checkSD(sd_event_set_watchdog(handle, 1), "sd_event_set_watchdog") > 0
    }

    // MARK: Sources

    /// Calls `handler` with the ready events whenever `fd` is ready for `events`.
    public func onIO(
        fd: Int32, events: IOEvents = .readable, _ handler: @escaping (IOEvents) -> Void
    ) throws(SystemError) -> EventSource {
        let box = EventSource.Box(.io(handler))
        var source: OpaquePointer?
        try checkSD(
            sd_event_add_io(
                handle, &source, fd, events.rawValue,
                { _, _, revents, userdata in
                    EventSource.Box.from(userdata).fireIO(IOEvents(rawValue: revents))
                    return 0
                }, box.opaque), "sd_event_add_io")
        return EventSource(source!, box)
    }

    /// A one-shot monotonic timer `microseconds` from now. Re-arm it with `EventSource.schedule(after:)`.
    ///
    /// It may fire late by `slack(forDelay:)`.
    public func after(_ microseconds: UInt64, _ handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        let box = EventSource.Box(.plain(handler))
        var source: OpaquePointer?
        try checkSD(
            sd_event_add_time_relative(
                handle, &source, CLOCK_MONOTONIC, microseconds, Self.slack(forDelay: microseconds),
                { _, _, userdata in
                    EventSource.Box.from(userdata).fire()
                    return 0
                }, box.opaque), "sd_event_add_time_relative")
        return EventSource(source!, box)
    }

    /// A tenth of the delay, at most 250 ms: sd-event's default (accuracy 0) is 250 ms whatever the
    /// delay, which would double a 0.25 s reconnect backoff, while some slack lets the kernel batch
    /// the wake-ups of long timers.
    static func slack(forDelay microseconds: UInt64) -> UInt64 { min(max(microseconds / 10, 1), 250_000) }

    /// Delivers `signal` through a signalfd; the signal is blocked for normal delivery first.
    public func onSignal(_ signal: Int32, _ handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, signal)
        try checkPOSIX(sigprocmask(SIG_BLOCK, &mask, nil), "sigprocmask")
        let box = EventSource.Box(.plain(handler))
        var source: OpaquePointer?
        try checkSD(
            sd_event_add_signal(
                handle, &source, signal,
                { _, _, userdata in
                    EventSource.Box.from(userdata).fire()
                    return 0
                }, box.opaque), "sd_event_add_signal")
        return EventSource(source!, box)
    }

    /// A way for another thread to have `handler` run on the loop (with the lock held, as every
    /// callback): `LoopWaker.wake()`.
    public func waker(_ handler: @escaping () -> Void) throws(SystemError) -> LoopWaker {
        let fd = try checkPOSIX(eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)), "eventfd")
        do {
            let source = try onIO(fd: fd) { _ in
                var count: UInt64 = 0
                _ = read(fd, &count, MemoryLayout<UInt64>.size)
                handler()
            }
            return LoopWaker(fd: fd, source: source)
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// Runs `handler` once, on the next iteration, before waiting for I/O.
    public func onNextIteration(_ handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        let box = EventSource.Box(.plain(handler))
        var source: OpaquePointer?
        try checkSD(
            sd_event_add_defer(
                handle, &source,
                { _, userdata in
                    EventSource.Box.from(userdata).fire()
                    return 0
                }, box.opaque), "sd_event_add_defer")
        try checkSD(sd_event_source_set_enabled(source, Int32(SD_EVENT_ONESHOT)), "sd_event_source_set_enabled")
        return EventSource(source!, box)
    }
}

/// Wakes its loop from any thread: the loop then runs the waker's handler once for one or more `wake()`s
/// (an eventfd counts them). Release it on the loop's thread.
public final class LoopWaker: @unchecked Sendable {
    private let fd: Int32
    private let source: EventSource

    init(fd: Int32, source: EventSource) {
        self.fd = fd
        self.source = source
    }

    deinit {
        source.cancel()
        Glibc.close(fd)
    }

    /// One write to the eventfd; safe from any thread (the descriptor stays open while the waker lives).
    public func wake() {
        var one: UInt64 = 1
        _ = write(fd, &one, MemoryLayout<UInt64>.size)
    }
}

/// An event source attached to an `EventLoop`. It lives as long as this object: release it (or call
/// `cancel()`) to detach. The handler's context travels through `Unmanaged`, so the C callbacks stay
/// capture-free.
public final class EventSource {
    final class Box {
        enum Handler {
            case io((IOEvents) -> Void)
            case plain(() -> Void)
        }
        let handler: Handler
        init(_ handler: Handler) { self.handler = handler }

        var opaque: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
        static func from(_ pointer: UnsafeMutableRawPointer?) -> Box {
            Unmanaged<Box>.fromOpaque(pointer!).takeUnretainedValue()
        }
        func fire() { if case let .plain(h) = handler { h() } }
        func fireIO(_ revents: IOEvents) { if case let .io(h) = handler { h(revents) } }
    }

    private var source: OpaquePointer?
    private let box: Box

    init(_ source: OpaquePointer, _ box: Box) {
        self.source = source
        self.box = box
    }

    deinit { cancel() }

    public func cancel() {
        if let source { sd_event_source_disable_unref(source) }
        source = nil
    }

    /// Re-arms a timer source to fire once, `microseconds` from now.
    public func schedule(after microseconds: UInt64) throws(SystemError) {
        guard let source else { return }
        try checkSD(
            sd_event_source_set_time_accuracy(source, EventLoop.slack(forDelay: microseconds)),
            "sd_event_source_set_time_accuracy")
        try checkSD(sd_event_source_set_time_relative(source, microseconds), "sd_event_source_set_time_relative")
        try checkSD(sd_event_source_set_enabled(source, Int32(SD_EVENT_ONESHOT)), "sd_event_source_set_enabled")
    }

    /// Pauses or resumes the source (an I/O source stays registered while off).
    public func setEnabled(_ on: Bool) throws(SystemError) {
        guard let source else { return }
        let mode = on ? SD_EVENT_ON : SD_EVENT_OFF
        try checkSD(sd_event_source_set_enabled(source, Int32(mode)), "sd_event_source_set_enabled")
    }

    /// For I/O sources: which epoll events to wait for (e.g. add EPOLLOUT while output is queued).
    public func setIOEvents(_ events: IOEvents) throws(SystemError) {
        guard let source else { return }
        try checkSD(sd_event_source_set_io_events(source, events.rawValue), "sd_event_source_set_io_events")
    }
}

/// What a descriptor is ready for (epoll's events), asked for and reported by `EventLoop.onIO`.
public struct IOEvents: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let readable = IOEvents(rawValue: EPOLLIN.rawValue)
    public static let writable = IOEvents(rawValue: EPOLLOUT.rawValue)
    public static let error = IOEvents(rawValue: EPOLLERR.rawValue)
    /// The peer hung up; reported whether asked for or not.
    public static let hangUp = IOEvents(rawValue: EPOLLHUP.rawValue)
}
