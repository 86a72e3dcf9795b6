#if canImport(Glibc)
    import Glibc
#endif

/// Starts a POSIX thread that runs `body`; nil when the system gives none, and the caller then does the
/// work itself. The closure (and what it captures) is held until it returns; the thread is joinable.
/// `stackSize`: bytes of stack (nil: the default, 8 MB of address space), for threads whose work is known
/// to be shallow.
public func startThread(stackSize: Int? = nil, _ body: @escaping () -> Void) -> pthread_t? {
    final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    if let stackSize { pthread_attr_setstacksize(&attributes, stackSize) }
    var thread = pthread_t()
    let context = Unmanaged.passRetained(Body(body)).toOpaque()
    let started = pthread_create(
        &thread, &attributes,
        { context in
            Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context)
    guard started == 0 else {
        Unmanaged<Body>.fromOpaque(context).release()
        return nil
    }
    return thread
}

/// Runs `other` on a thread of its own while this one runs `this`, and returns when both have; both here,
/// one after the other, when the system gives no thread.
public func runConcurrently(_ other: @escaping () -> Void, _ this: () -> Void) {
    guard let thread = startThread(other) else {
        this()
        other()
        return
    }
    this()
    pthread_join(thread, nil)
}
