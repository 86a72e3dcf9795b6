import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// SVG to PNG through librsvg's `rsvg-convert` (Debian `librsvg2-bin`), fed on stdin. A separate
/// program rather than linking librsvg: placectl's other commands then load none of librsvg's
/// cairo, pango and glib stack, and a missing renderer is a clear error for `.png` only.
public enum MapPNG {
    public static let program = "rsvg-convert"

    /// Why a PNG could not be written.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case rendererMissing
        case rendererFailed(status: Int32, message: String)
        case system(String)

        public var description: String {
            switch self {
            case .rendererMissing:
                "PNG needs \(MapPNG.program) (Debian package librsvg2-bin); SVG needs nothing"
            case let .rendererFailed(status, message):
                "\(MapPNG.program) failed (exit status \(status))" + (message.isEmpty ? "" : ": \(message)")
            case .system(let what): what
            }
        }
    }

    /// Renders `svg` to a `width`×`height` PNG at `path`.
    public static func write(svg: String, width: Int, height: Int, to path: String) throws(Failure) {
        let arguments = [program, "--format", "png", "--width", "\(width)", "--height", "\(height)", "--output", path]
        var input: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        do {
            try checkPOSIX(pipe(&input), "pipe")
            try checkPOSIX(pipe(&errors), "pipe")
        } catch {
            throw .system(error.description)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        for fd in [input[0], input[1], errors[0], errors[1]] { posix_spawn_file_actions_addclose(&actions, fd) }
        var cArguments = arguments.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawnp(&pid, program, &actions, nil, &cArguments, environ)
        close(input[0])
        close(errors[1])
        guard spawned == 0 else {
            close(input[1])
            close(errors[0])
            throw spawned == ENOENT ? .rendererMissing : .system("\(program): \(String(cString: strerror(spawned)))")
        }
        // Writing all of the SVG before reading stderr is safe: rsvg-convert reads its input whole first.
        let previous = signal(SIGPIPE, SIG_IGN)
        var bytes = Array(svg.utf8)
        var written = 0
        while written < bytes.count {
            let n = try? retryingOnInterrupt("write") {
                bytes.withUnsafeMutableBytes { Glibc.write(input[1], $0.baseAddress! + written, $0.count - written) }
            }
            guard let n, n > 0 else { break }
            written += n
        }
        close(input[1])
        signal(SIGPIPE, previous)
        bytes = []
        var message: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = try? retryingOnInterrupt("read") {
                chunk.withUnsafeMutableBytes { read(errors[0], $0.baseAddress, $0.count) }
            }
            guard let n, n > 0 else { break }
            message += chunk[..<n]
        }
        close(errors[0])
        var status: Int32 = 0
        _ = try? retryingOnInterrupt("waitpid") { waitpid(pid, &status, 0) }
        let exitStatus = (status >> 8) & 0xFF
        guard status & 0x7F == 0, exitStatus == 0 else {
            throw .rendererFailed(
                status: status & 0x7F == 0 ? exitStatus : 128 + (status & 0x7F),
                message: String(decoding: message, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? "")
        }
    }

    /// Width and height from a PNG's IHDR chunk; nil when `bytes` are not a PNG.
    public static func size(ofPNG bytes: [UInt8]) -> (width: Int, height: Int)? {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        guard bytes.count >= 24, Array(bytes[0..<8]) == signature, bytes[12..<16].elementsEqual("IHDR".utf8) else {
            return nil
        }
        func big(_ offset: Int) -> Int { bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) } }
        return (big(16), big(20))
    }
}
