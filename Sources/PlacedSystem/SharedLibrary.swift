#if canImport(Glibc)
    import Glibc
#endif

/// A C library opened at run time (`dlopen`) instead of linked, for the ones a start, or a device that
/// never uses them, should not pay for (libgps, libmosquitto). Never closed: its functions stay in use.
public struct SharedLibrary: @unchecked Sendable {
    public let soname: String
    private let handle: UnsafeMutableRawPointer

    /// Opens `soname`; the error is the dynamic loader's reason. Local, so its symbols stay its own.
    public init(_ soname: String) throws(OpenError) {
        guard let handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL) else {
            throw OpenError(reason: dlerror().map { String(cString: $0) } ?? "not found")
        }
        self.soname = soname
        self.handle = handle
    }

    /// The function `name` as the pointer type its header declares; nil when the library has none.
    public func function<Function>(_ name: String, as type: Function.Type) -> Function? {
        dlsym(handle, name).map { unsafeBitCast($0, to: type) }
    }

    public struct OpenError: Error {
        public let reason: String
    }
}
