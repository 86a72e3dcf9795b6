import Glibc

/// Files a long command removes should it be ended by SIGINT, SIGTERM or SIGHUP (Ctrl-C during an
/// import of an hour): the signal's handler unlinks them, which is async-signal-safe, then ends the
/// process as the signal would have. Add a file before creating it; remove it once it is renamed
/// into place or removed. Spills made with O_TMPFILE need none of this.
public enum RemoveOnInterrupt {
    private static let capacity = 4
    /// Each slot a `strdup`ed path or nil; written whole, so the handler reads either.
    nonisolated(unsafe) private static let paths: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = {
        let slots = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: capacity)
        slots.initialize(repeating: nil, count: capacity)
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signal in
                for slot in 0..<RemoveOnInterrupt.capacity {
                    if let path = RemoveOnInterrupt.paths[slot] { unlink(path) }
                }
                Glibc.signal(signal, SIG_DFL)
                raise(signal)
            }
            sigemptyset(&action.sa_mask)
            sigaction(signal, &action, nil)
        }
        return slots
    }()

    /// Removes `path` if a terminating signal comes before `remove(_:)`. At most four at once: a
    /// fifth is not watched (a programming error that `assert`s).
    public static func add(_ path: String) {
        guard let slot = (0..<capacity).first(where: { paths[$0] == nil }) else {
            assertionFailure("RemoveOnInterrupt holds \(capacity) paths already")
            return
        }
        paths[slot] = strdup(path)
    }

    /// No longer removes `path` on a signal.
    public static func remove(_ path: String) {
        for slot in 0..<capacity {
            guard let held = paths[slot], strcmp(held, path) == 0 else { continue }
            paths[slot] = nil
            free(held)
        }
    }
}
