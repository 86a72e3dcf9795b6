#if canImport(Glibc)
    import Glibc
#endif

/// A secret systemd passes to the service (`LoadCredential=NAME:PATH`, `SetCredentialEncrypted=`): a file
/// `$CREDENTIALS_DIRECTORY/NAME` only the service can read. Secrets come from there, never from the
/// configuration file, and never go to the log.
public enum ServiceCredential {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// `$CREDENTIALS_DIRECTORY` is unset: the unit passes no credentials.
        case noCredentials(name: String)
        case unreadable(name: String, reason: String)

        public var description: String {
            switch self {
            case let .noCredentials(name):
                "credential \(name): $CREDENTIALS_DIRECTORY is not set (add LoadCredential=\(name):PATH to the unit)"
            case let .unreadable(name, reason): "credential \(name): \(reason)"
            }
        }
    }

    /// The credential's text, without one trailing newline. At most 64 KiB.
    public static func read(_ name: String) throws(Failure) -> String {
        guard let directory = getenv("CREDENTIALS_DIRECTORY").map({ String(cString: $0) }), !directory.isEmpty
        else { throw .noCredentials(name: name) }
        guard !name.isEmpty, !name.contains("/") else { throw .unreadable(name: name, reason: "not a credential name") }
        let path = directory + "/" + name
        let fd: Int32
        do {
            fd = try checkPOSIX(open(path, O_RDONLY | O_CLOEXEC), path)
        } catch {
            throw .unreadable(name: name, reason: error.description)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count: Int
            do {
                count = try retryingOnInterrupt("read") { Glibc.read(fd, &buffer, buffer.count) }
            } catch {
                throw .unreadable(name: name, reason: error.reason)
            }
            if count == 0 { break }
            bytes += buffer.prefix(count)
            guard bytes.count <= 65536 else { throw .unreadable(name: name, reason: "larger than 64 KiB") }
        }
        // Zero the copy left in the read buffer: a secret should not outlive its use.
        for index in buffer.indices { buffer[index] = 0 }
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
