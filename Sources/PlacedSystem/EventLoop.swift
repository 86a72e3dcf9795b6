import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's single event loop: a thin wrapper over sd-event. Every adapter (gpsd, D-Bus,
/// varlink, timers, signals) plugs a source into it; nothing polls, and with no sources ready the
/// process sleeps in epoll_wait.
///
/// One thread, as in sd-varlink's and timedated's daemons: the thread that creates the loop runs it,
/// and every callback, and so all the state they touch, is that thread's alone. No lock guards it; code
/// that changes such state says so with `preconditionInLoop()`.
public final class EventLoop {
    /// The underlying `sd_event *`, for libraries that attach themselves (sd-bus).
    public let handle: OpaquePointer
    /// The thread that created the loop: the only one that may run it or touch what it owns.
    private let thread = pthread_self()

    public init() throws(SystemError) {
        var event: OpaquePointer?
        try checkSD(sd_event_new(&event), "sd_event_new")
        handle = event!
    }

    deinit { sd_event_unref(handle) }

    /// Runs until `exit(_:)`; returns the exit code.
    @discardableResult
    public func run() throws(SystemError) -> Int32 {
        preconditionInLoop()
        return try checkSD(sd_event_loop(handle), "sd_event_loop")
    }

    /// Runs one iteration, waiting at most `timeout` microseconds (`UInt64.max`: forever).
    /// Returns false once the loop has exited.
    @discardableResult
    public func runOnce(timeout: UInt64 = .max) throws(SystemError) -> Bool {
        preconditionInLoop()
        return try checkSD(sd_event_run(handle, timeout), "sd_event_run") > 0 || !hasExited
    }

    /// Stops a debug build when called on any thread but the loop's (as swift-nio's
    /// `preconditionInEventLoop`): the check, where state the loop owns changes, that nothing else
    /// changes it. Nothing in a release build.
    public func preconditionInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(pthread_equal(thread, pthread_self()) != 0, "not on the event loop's thread", file: file, line: line)
    }

    /// CLOCK_MONOTONIC read now, in microseconds (through the vDSO: no system call), where the time the
    /// loop cached for its iteration (`now`) would be earlier than a library's own clock reading
    /// (libmosquitto's, of its last write and read).
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
