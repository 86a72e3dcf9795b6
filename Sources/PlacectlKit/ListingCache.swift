import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// The place ids of the last `placectl places` listing, in row order, so that `placectl select 2`
/// picks the place the user saw on row 2 even if a newer ranking has arrived since.
///
/// Kept in `$XDG_RUNTIME_DIR/placectl/last-places` (per user, gone at logout), else
/// `$XDG_CACHE_HOME/placectl/last-places` or `~/.cache/placectl/last-places`.
public struct ListingCache: Sendable, Equatable {
    public let path: String

    /// `path`: absolute.
    public init(path: String) { self.path = path }

    /// Nil when the environment names no directory at all.
    public init?(environment: [String: String]) {
        let directory: String
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            directory = runtime
        } else if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") {
            directory = cache
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            directory = home + "/.cache"
        } else {
            return nil
        }
        path = directory + "/placectl/last-places"
    }

    /// The process environment as a dictionary.
    public static var processEnvironment: [String: String] {
        var result: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return result
    }

    /// The ids of the last listing; nil when there is none (or it cannot be read).
    public func load() -> [String]? {
        guard let file = fopen(path, "re") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            if n == 0 { break }
            bytes += chunk[..<n]
        }
        guard ferror(file) == 0 else { return nil }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    public enum SaveError: Error, Equatable, CustomStringConvertible {
        case cannotWrite(path: String, errno: Int32)
        public var description: String {
            guard case let .cannotWrite(path, code) = self else { return "" }
            return "cannot remember the listing in \(path): \(String(cString: strerror(code)))"
        }
    }

    /// Replaces the listing atomically (a temporary file renamed over it), creating missing
    /// directories (mode 0700).
    public func save(_ ids: [String]) throws(SaveError) {
        // Like mkdir -p: ~/.cache itself may not exist yet.
        var directory = ""
        for component in path.split(separator: "/").dropLast() {
            directory += "/" + component
            do {
                try checkPOSIX(mkdir(directory, 0o700), "mkdir")
            } catch {
                guard error.errno == EEXIST else { throw .cannotWrite(path: path, errno: error.errno) }
            }
        }
        let temporary = "\(path).\(getpid())"
        let fd: Int32
        do {
            fd = try checkPOSIX(open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600), "open")
        } catch {
            throw .cannotWrite(path: path, errno: error.errno)
        }
        let bytes = Array(ids.filter { !$0.contains("\n") }.map { $0 + "\n" }.joined().utf8)
        do throws(SystemError) {
            do {
                defer { close(fd) }
                let written = try checkPOSIX(write(fd, bytes, bytes.count), "write")
                guard written == bytes.count else { throw SystemError("write", errno: EIO) }
            }
            try checkPOSIX(rename(temporary, path), "rename")
        } catch {
            unlink(temporary)
            throw .cannotWrite(path: path, errno: error.errno)
        }
    }

    /// What `select ARGUMENT` means: a row of the last listing when the argument is a plain number
    /// from 1 to the number of rows listed, otherwise a place id.
    public enum Target: Equatable, Sendable {
        case id(String)
        case row(Int, id: String)

        public var id: String {
            switch self {
            case .id(let id), .row(_, let id): id
            }
        }
    }

    public static func target(of argument: String, listing: [String]?) -> Target {
        guard let listing, !argument.isEmpty, argument.allSatisfy({ $0.isASCII && $0.isNumber }),
            let row = Int(argument), row >= 1, row <= listing.count
        else { return .id(argument) }
        return .row(row, id: listing[row - 1])
    }
}
