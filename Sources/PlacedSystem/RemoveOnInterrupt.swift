import Glibc

/// Files a long command removes should it be ended by SIGINT, SIGTERM or SIGHUP (Ctrl-C during an
/// import of an hour): the signal's handler unlinks them, which is async-signal-safe, then ends the
/// process as the signal would have. A signal the process inherited as ignored (`nohup`, a script's
/// `&` job) stays ignored. Add a file before creating it; remove it once it is renamed into place or
/// removed. Spills made with O_TMPFILE need none of this.
///
/// The table is fixed and lives in static memory, made before the handlers are installed: the handler
/// allocates nothing and takes no lock (as `MappingGuard`'s for SIGBUS).
public enum RemoveOnInterrupt {
    private static let capacity = 4
    private static let signals = [SIGINT, SIGTERM, SIGHUP]
    /// Each slot a `strdup`ed path or nil, written whole so that a handler reads one or the other.
    nonisolated(unsafe) private static var paths: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = {
        let slots = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: capacity)
        slots.initialize(repeating: nil, count: capacity)
        return slots
    }()
    nonisolated(unsafe) private static var installed = false

    /// Removes `path` if a terminating signal comes before `remove(_:)`. At most four at once: a
    /// fifth is not watched (a programming error that `assert`s).
    public static func add(_ path: String) {
        let slots = paths  // made before any handler can read it
        installIfNeeded()
        guard let slot = (0..<capacity).first(where: { slots[$0] == nil }) else {
            assertionFailure("RemoveOnInterrupt holds \(capacity) paths already")
            return
        }
        slots[slot] = strdup(path)
    }

    /// No longer removes `path` on a signal. Its copy is not freed: a handler on another thread may be
    /// reading it, and a few bytes a command are not worth that race.
    public static func remove(_ path: String) {
        for slot in 0..<capacity {
            guard let held = paths[slot], strcmp(held, path) == 0 else { continue }
            paths[slot] = nil
        }
    }

    private static func installIfNeeded() {
        guard !installed else { return }
        installed = true
        for signal in signals {
            var previous = sigaction()
            sigaction(signal, nil, &previous)
            let ignored = unsafeBitCast(SIG_IGN, to: Int.self)
            if unsafeBitCast(previous.__sigaction_handler.sa_handler, to: Int.self) == ignored { continue }
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signal in RemoveOnInterrupt.handle(signal) }
            sigemptyset(&action.sa_mask)
            sigaction(signal, &action, nil)
        }
    }

    private static func handle(_ signal: Int32) {
        for slot in 0..<capacity {
            if let path = paths[slot] { unlink(path) }
        }
        Glibc.signal(signal, SIG_DFL)
        raise(signal)
    }
}
