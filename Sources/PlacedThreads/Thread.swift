#if canImport(Glibc)
    import Glibc
#endif

/// Starts a POSIX thread that runs `body`; nil when the system gives none, and the caller then does the
/// work itself. The closure (and what it captures) is held until it returns; the thread is joinable.
public func startThread(_ body: @escaping () -> Void) -> pthread_t? {
    final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }
    var thread = pthread_t()
    let context = Unmanaged.passRetained(Body(body)).toOpaque()
    let started = pthread_create(
        &thread, nil,
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
