import CSystemd

/// The process's heap, as glibc's allocator keeps it.
public enum HeapMemory {
    /// Returns the free memory of the heap to the kernel (`malloc_trim`): freed blocks otherwise stay
    /// resident until reused. Takes about a millisecond on the daemon's heap.
    public static func releaseFree() { _ = malloc_trim(0) }
}

/// Gives the heap's free memory back a second after the last of a burst of calls that build megabytes
/// of short-lived values (a large Map reply: resident size 11 to 17 MB; a batch of own places), which
/// the allocator would otherwise keep. About a millisecond, so once a burst, not after each call.
public final class IdleHeapRelease {
    private let loop: EventLoop
    private var timer: EventSource?

    public init(loop: EventLoop) { self.loop = loop }

    public func schedule() {
        let delay: UInt64 = 1_000_000
        if let timer {
            try? timer.schedule(after: delay)
        } else {
            timer = try? loop.after(delay) { HeapMemory.releaseFree() }
        }
    }
}
