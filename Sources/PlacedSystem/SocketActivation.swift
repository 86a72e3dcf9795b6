import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// Sockets the service manager opened for us (`sd_listen_fds`): with `placed.socket` the varlink
/// socket exists before placed starts and outlives its restarts, so no client ever finds it missing.
public enum SocketActivation {
    /// A listening socket systemd passed: the descriptor and the path it is bound to.
    public struct Passed: Equatable {
        public let fd: Int32
        public let path: String
    }

    /// The one listening Unix stream socket passed in `LISTEN_FDS`, or nil when none was passed. The
    /// `LISTEN_*` variables are taken out of the environment either way, as sd_listen_fds(3) advises.
    /// More than one socket, or one that is not a listening Unix stream socket, is an error: placed
    /// would otherwise serve on something nobody meant.
    public static func varlinkSocket() throws(SystemError) -> Passed? {
        let count = try checkSD(sd_listen_fds(1), "sd_listen_fds")
        guard count > 0 else { return nil }
        let fd = SD_LISTEN_FDS_START
        guard count == 1 else {
            for extra in fd..<(fd + count) { close(extra) }
            throw SystemError("socket activation: \(count) sockets passed, placed takes one", errno: EINVAL)
        }
        guard UnixSocket.isListeningStream(fd) else {
            close(fd)
            throw SystemError(
                "socket activation: fd \(fd) is not a listening Unix stream socket", errno: ENOTSOCK)
        }
        return Passed(fd: fd, path: UnixSocket.boundPath(of: fd) ?? "?")
    }
}
