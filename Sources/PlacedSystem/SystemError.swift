#if canImport(Glibc)
    import Glibc
#endif

/// The one error funnel for libsystemd and POSIX calls: which call failed and its errno.
public struct SystemError: Error, Equatable, CustomStringConvertible {
    public let call: String
    public let errno: Int32

    public init(_ call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// libsystemd returns a negative errno on failure.
@discardableResult @inline(__always)
func checkSD(_ result: Int32, _ call: @autoclosure () -> String) throws(SystemError) -> Int32 {
    if result < 0 { throw SystemError(call(), errno: -result) }
    return result
}

/// POSIX calls return -1 and set errno.
@discardableResult @inline(__always)
public func checkPOSIX(_ result: Int32, _ call: @autoclosure () -> String) throws(SystemError) -> Int32 {
    if result == -1 { throw SystemError(call(), errno: Glibc.errno) }
    return result
}
