#if canImport(Glibc)
    import Glibc
#endif

/// The one error funnel for libsystemd and POSIX calls: which call failed and its errno.
///
/// errno is read in one place, `init(_:)`, right after a call failed; `checkPOSIX` and `checkSD` turn a
/// call's result into a value or this error, and `retryingOnInterrupt` is the one place EINTR is retried.
/// Code that handles a particular errno (EAGAIN, ENOENT, …) catches this error and looks at `errno`.
public struct SystemError: Error, Equatable, CustomStringConvertible {
    public let call: String
    public let errno: Int32

    public init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// The failure of `call`, which has just failed and set errno.
    public init(_ call: String) {
        self.init(call, errno: Glibc.errno)
    }

    /// What the C library says the errno means (`strerror`).
    public var reason: String { String(cString: strerror(errno)) }

    public var description: String { "\(call): \(reason)" }
}

/// libsystemd returns a negative errno on failure.
@discardableResult @inline(__always)
public func checkSD(_ result: Int32, _ call: @autoclosure () -> String) throws(SystemError) -> Int32 {
    if result < 0 { throw SystemError(call(), errno: -result) }
    return result
}

/// POSIX calls return -1 and set errno (those returning `int`, `ssize_t` or `pid_t` alike).
@discardableResult @inline(__always)
public func checkPOSIX<Result: FixedWidthInteger & SignedInteger>(
    _ result: Result, _ call: @autoclosure () -> String
) throws(SystemError) -> Result {
    if result == -1 { throw SystemError(call()) }
    return result
}

/// mmap returns MAP_FAILED and sets errno.
@inline(__always)
public func checkPOSIX(_ result: UnsafeMutableRawPointer?, _ call: @autoclosure () -> String) throws(SystemError)
    -> UnsafeMutableRawPointer
{
    guard let result, result != MAP_FAILED else { throw SystemError(call()) }
    return result
}

/// `checkPOSIX(body(), call)`, `body` called again each time a signal interrupts it (EINTR): a blocking
/// call's interruption is no failure. The one place EINTR is retried.
@discardableResult @inline(__always)
public func retryingOnInterrupt<Result: FixedWidthInteger & SignedInteger>(
    _ call: @autoclosure () -> String, _ body: () -> Result
) throws(SystemError) -> Result {
    while true {
        let result = body()
        if result != -1 { return result }
        let error = SystemError(call())
        if error.errno != EINTR { throw error }
    }
}
