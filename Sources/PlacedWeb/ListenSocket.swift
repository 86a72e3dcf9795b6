import CSystemd
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The TCP socket placed-web serves on: one systemd passed (placed-web.socket), or its own.
public enum ListenSocket {
    /// The one listening TCP socket passed in `LISTEN_FDS`, or nil. The variables are taken out of
    /// the environment either way. Anything else passed is an error: placed-web would serve on
    /// something nobody meant.
    public static func passed() throws(SystemError) -> Int32? {
        let count = try checkSD(sd_listen_fds(1), "sd_listen_fds")
        guard count > 0 else { return nil }
        let fd = SD_LISTEN_FDS_START
        guard count == 1 else {
            for extra in fd..<(fd + count) { close(extra) }
            throw SystemError("socket activation: \(count) sockets passed, placed-web takes one", errno: EINVAL)
        }
        guard sd_is_socket_inet(fd, AF_UNSPEC, Int32(SOCK_STREAM.rawValue), 1, 0) > 0 else {
            close(fd)
            throw SystemError("socket activation: fd \(fd) is not a listening TCP socket", errno: ENOTSOCK)
        }
        try checkPOSIX(fcntl(fd, F_SETFD, FD_CLOEXEC), "fcntl(FD_CLOEXEC)")
        return fd
    }

    /// A non-blocking, close-on-exec TCP socket listening on `address`.
    public static func listen(on address: ListenAddress, backlog: Int32 = 64) throws(SystemError) -> Int32 {
        let family = address.family == .ipv6 ? AF_INET6 : AF_INET
        let fd = try checkPOSIX(
            socket(family, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0),
            "socket")
        do throws(SystemError) {
            var on: Int32 = 1
            try checkPOSIX(
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size)),
                "setsockopt(SO_REUSEADDR)")
            let result: Int32
            switch address.family {
            case .ipv4:
                var sin = sockaddr_in()
                sin.sin_family = sa_family_t(AF_INET)
                sin.sin_port = address.port.bigEndian
                guard inet_pton(AF_INET, address.host, &sin.sin_addr) == 1 else {
                    throw SystemError("inet_pton(\(address.host))", errno: EINVAL)
                }
                result = withUnsafePointer(to: &sin) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            case .ipv6:
                try checkPOSIX(
                    setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &on, socklen_t(MemoryLayout<Int32>.size)),
                    "setsockopt(IPV6_V6ONLY)")
                var sin6 = sockaddr_in6()
                sin6.sin6_family = sa_family_t(AF_INET6)
                sin6.sin6_port = address.port.bigEndian
                guard inet_pton(AF_INET6, address.host, &sin6.sin6_addr) == 1 else {
                    throw SystemError("inet_pton(\(address.host))", errno: EINVAL)
                }
                result = withUnsafePointer(to: &sin6) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                    }
                }
            }
            try checkPOSIX(result, "bind(\(address))")
            try checkPOSIX(Glibc.listen(fd, backlog), "listen(\(address))")
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

    /// The address a TCP socket is bound to (what a passed socket listens on).
    public static func boundAddress(of fd: Int32) -> ListenAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard got == 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var address = sin.pointee.sin_addr
                    guard inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil else { return nil }
                    return ListenAddress(
                        host: text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) },
                        port: UInt16(bigEndian: sin.pointee.sin_port), family: .ipv4)
                }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    var address = sin6.pointee.sin6_addr
                    guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { return nil }
                    return ListenAddress(
                        host: text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) },
                        port: UInt16(bigEndian: sin6.pointee.sin6_port), family: .ipv6)
                }
            }
        default:
            return nil
        }
    }
}
