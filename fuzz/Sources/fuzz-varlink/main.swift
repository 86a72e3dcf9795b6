import FuzzSupport
import PlacedCore
import PlacedJSON
import PlacedStore
import PlacedSystem
import PlacedVarlink

@testable import PlacedDaemon

#if canImport(Glibc)
    import Glibc
#endif

/// What a local client sends placed's varlink socket: the input is the byte stream itself (calls are
/// NUL-terminated JSON), sent on a fresh connection to the daemon's own `VarlinkAdapter`, which serves
/// it as placed does — framing, JSON, dispatch of every method of io.placed.Places and
/// org.varlink.service, errors included — against a daemon with a static source (Helsinki) and a
/// small places file with a map layer. After the client has sent everything it shuts its sending side,
/// reads replies until placed closes or goes quiet (a Watch stays open), and closes; placed must then
/// drop the connection: a client that has gone is never kept.
private final class Harness {
    let placed: FuzzDaemon
    var loop: EventLoop { placed.loop }

    init() throws { placed = try FuzzDaemon() }

    /// One client's session: `bytes` sent, replies read, connection closed.
    func serve(_ bytes: [UInt8]) throws {
        let fd = try UnixSocket.connect(path: placed.socketPath)
        try UnixSocket.setNonBlocking(fd)
        var sent = 0
        var shut = false
        var quietRounds = 0
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        rounds: for _ in 0..<100_000 {
            if sent < bytes.count {
                let transfer = try? bytes[sent...].withUnsafeBytes { try UnixSocket.send(fd, $0) }
                switch transfer {
                case .bytes(let count)?: sent += count
                case .wouldBlock?: break
                case .endOfStream?, nil: sent = bytes.count  // placed closed: the rest cannot go
                }
            }
            if sent == bytes.count, !shut {
                shutdown(fd, Int32(SHUT_WR))
                shut = true
            }
            try loop.runOnce(timeout: 0)
            var received = false
            reading: while true {
                let transfer = try? scratch.withUnsafeMutableBytes { try UnixSocket.receive(fd, into: $0) }
                switch transfer {
                case .bytes?: received = true
                case .wouldBlock?: break reading
                case .endOfStream?, nil: break rounds
                }
            }
            quietRounds = received ? 0 : quietRounds + 1
            if shut, quietRounds > 20 { break }
        }
        close(fd)
        for _ in 0..<1000 where placed.connectionCount > 0 { try loop.runOnce(timeout: 1_000) }
        if placed.connectionCount > 0 { fatalError("placed keeps the connection of a client that has gone") }
    }
}

nonisolated(unsafe) private let harness = try! Harness()

runFuzzer { input in
    try! harness.serve(input.bytes)
}
