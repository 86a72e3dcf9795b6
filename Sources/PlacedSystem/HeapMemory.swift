import CSystemd

/// The process's heap, as glibc's allocator keeps it.
public enum HeapMemory {
    /// Returns the free memory of the heap to the kernel (`malloc_trim`): freed blocks otherwise stay
    /// resident until reused. Takes about a millisecond on the daemon's heap.
    public static func releaseFree() { _ = malloc_trim(0) }
}
