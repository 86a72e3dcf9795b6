#if canImport(Glibc)
    import Glibc
#endif

/// Listening Unix stream sockets for the daemon's control interfaces.
public enum UnixSocket {
    /// Creates a non-blocking, close-on-exec socket listening at `path` with permissions `mode`.
    ///
    /// A stale socket file left by a crashed instance is replaced; a socket some live process still
    /// accepts on is not (`EADDRINUSE`), and neither is anything that is not a socket (`EEXIST`).
    /// The mode is set between bind and listen, so no client can connect while it is still wrong.
    public static func listen(path: String, mode: mode_t = 0o660, backlog: Int32 = 4096)
        throws(SystemError) -> Int32
    {
        var address = try socketAddress(path)
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else {
                throw SystemError("\(path): not a socket", errno: EEXIST)
            }
            if isAccepting(&address) { throw SystemError("\(path): in use", errno: EADDRINUSE) }
            try checkPOSIX(unlink(path), "unlink(\(path))")
        }
        let fd = try checkPOSIX(
            socket(
                AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0),
            "socket(AF_UNIX)")
        do throws(SystemError) {
            _ = try withUnsafePointer(to: &address) { pointer throws(SystemError) in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(SystemError) in
                    try checkPOSIX(bind(fd, sa, socklen_t(MemoryLayout<sockaddr_un>.size)), "bind(\(path))")
                }
            }
            try checkPOSIX(chmod(path, mode), "chmod(\(path))")
            try checkPOSIX(Glibc.listen(fd, backlog), "listen(\(path))")
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// The socket file a listener was bound to, remembered so that it is removed only while it is still
    /// that file: by the time placed stops, systemd (placed.socket) may have bound a new socket at the
    /// same path, and removing that one would leave its listener unreachable.
    public struct BoundFile: Equatable {
        public let path: String
        let device: UInt64
        let inode: UInt64

        /// The socket file at `path` now; nil when there is none.
        public init?(path: String) {
            var status = stat()
            guard lstat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else { return nil }
            self.path = path
            device = UInt64(status.st_dev)
            inode = UInt64(status.st_ino)
        }

        /// Removes the file if it is still this one.
        public func remove() {
            guard BoundFile(path: path) == self else { return }
            unlink(path)
        }
    }

    /// Whether `fd` is a Unix stream socket that listens (what `sd_is_socket_unix` checks).
    public static func isListeningStream(_ fd: Int32) -> Bool {
        func option(_ name: Int32) -> Int32? {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        return option(SO_DOMAIN) == AF_UNIX && option(SO_TYPE) == Int32(SOCK_STREAM.rawValue)
            && option(SO_ACCEPTCONN) == 1
    }

    /// The filesystem path a Unix socket is bound to, or nil (unbound, abstract, or not Unix).
    public static func boundPath(of fd: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard result == 0, address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let pathLength = Int(length) - MemoryLayout.offset(of: \sockaddr_un.sun_path)!
        guard pathLength > 1 else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { raw in
            guard raw[0] != 0 else { return nil }  // abstract namespace
            let bytes = raw.prefix(pathLength).prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Opens a blocking connection to the socket at `path` (clients and tests).
    public static func connect(path: String) throws(SystemError) -> Int32 {
        var address = try socketAddress(path)
        let fd = try checkPOSIX(
            socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0), "socket")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        do {
            try checkPOSIX(result, "connect(\(path))")
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// Makes `fd` non-blocking and close-on-exec (accept4 is hidden from Swift without _GNU_SOURCE).
    public static func configureAccepted(_ fd: Int32) throws(SystemError) {
        try setNonBlocking(fd)
        try checkPOSIX(fcntl(fd, F_SETFD, FD_CLOEXEC), "fcntl(FD_CLOEXEC)")
    }

    /// Reads and writes on `fd` return EAGAIN instead of waiting: the event loop says when to.
    public static func setNonBlocking(_ fd: Int32) throws(SystemError) {
        let flags = try checkPOSIX(fcntl(fd, F_GETFL), "fcntl(F_GETFL)")
        try checkPOSIX(fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl(O_NONBLOCK)")
    }

    /// What a non-blocking read or write on a connected socket came to.
    public enum Transfer: Equatable, Sendable {
        /// This many bytes (more than 0).
        case bytes(Int)
        /// Nothing now: the socket would block (or the call was interrupted); wait for readiness.
        case wouldBlock
        /// The peer closed its sending side (reads only).
        case endOfStream
    }

    /// Reads what `fd` has, up to `buffer.count` bytes, without waiting.
    public static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError)
        -> Transfer
    {
        do {
            let count = try checkPOSIX(recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT)), "recv")
            return count > 0 ? .bytes(count) : .endOfStream
        } catch {
            switch error.errno {
            case EAGAIN, EWOULDBLOCK, EINTR: return .wouldBlock
            default: throw error
            }
        }
    }

    /// Writes what `fd` takes of `bytes` now, without waiting and without SIGPIPE.
    public static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Transfer {
        do {
            let count = try checkPOSIX(
                Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)), "send")
            return count > 0 ? .bytes(count) : .wouldBlock
        } catch {
            switch error.errno {
            case EAGAIN, EWOULDBLOCK, EINTR: return .wouldBlock
            default: throw error
            }
        }
    }

    private static func socketAddress(_ path: String) throws(SystemError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity, !bytes.contains(0) else {
            throw SystemError("socket path \(path)", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        return address
    }

    /// Whether a live process listens on `address`. Non-blocking, so a listener with a full backlog
    /// (EAGAIN) counts as live instead of stalling us.
    private static func isAccepting(_ address: inout sockaddr_un) -> Bool {
        let probe = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { close(probe) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        do {
            try checkPOSIX(result, "connect")
        } catch {
            return error.errno == EAGAIN
        }
        return true
    }
}

/// Process resource limits.
public enum ProcessLimits {
    /// Raises the soft limit on open files to the hard limit, so the daemon can hold thousands of
    /// clients (systemd's default soft limit is 1024; sd-event uses epoll, so no select() ceiling
    /// applies to our own descriptors). Returns the new soft limit.
    @discardableResult
    public static func raiseOpenFileLimit() throws(SystemError) -> UInt64 {
        let resource = Int32(RLIMIT_NOFILE.rawValue)
        var limit = rlimit()
        try checkPOSIX(getrlimit(resource, &limit), "getrlimit(RLIMIT_NOFILE)")
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            try checkPOSIX(setrlimit(resource, &limit), "setrlimit(RLIMIT_NOFILE)")
        }
        return UInt64(limit.rlim_cur)
    }
}
