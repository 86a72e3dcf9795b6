import CSystemd
import PlacedJSON
import PlacedSystem
import PlacedVarlink

#if canImport(Glibc)
    import Glibc
#endif

/// One non-blocking varlink connection to placed, on the event loop: calls are written as the
/// socket takes them, replies framed by `VarlinkWire.Framer` and handed over one by one. It closes
/// itself on end of stream, a socket error or a protocol violation, and says why once.
final class UpstreamConnection {
    private let fd: Int32
    private var framer = VarlinkWire.Framer()
    private var output: [UInt8] = []
    private var source: EventSource?
    private let onReply: (VarlinkWire.Reply) -> Void
    private let onClose: (String) -> Void
    private(set) var isClosed = false

    /// Connects without waiting: a Unix socket connects at once or not at all (EAGAIN when placed's
    /// backlog is full counts as not at all; the caller retries).
    init(
        path: String, loop: EventLoop, onReply: @escaping (VarlinkWire.Reply) -> Void,
        onClose: @escaping (String) -> Void
    ) throws(SystemError) {
        self.onReply = onReply
        self.onClose = onClose
        fd = try Self.connect(path: path)
        do {
            source = try loop.onIO(fd: fd, events: .readable) { [unowned self] events in self.ready(events) }
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    deinit {
        source?.cancel()
        if !isClosed { Glibc.close(fd) }
    }

    /// Queues a call; written when the socket takes it.
    func call(_ method: String, _ parameters: [String: JSON], more: Bool = false) {
        guard !isClosed else { return }
        guard let bytes = try? VarlinkWire.call(method, parameters: parameters, more: more) else {
            return fail("cannot encode a call to \(method)")
        }
        output += bytes
        flush()
    }

    /// Closes without telling the owner (it asked).
    func close() {
        guard !isClosed else { return }
        isClosed = true
        source?.cancel()
        source = nil
        Glibc.close(fd)
    }

    private func ready(_ events: IOEvents) {
        if events.contains(.writable) { flush() }
        if !isClosed && (events.contains(.readable) || events.contains(.hangUp) || events.contains(.error)) {
            receive()
        }
    }

    private func receive() {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while !isClosed {
            let transfer: UnixSocket.Transfer
            do {
                transfer = try chunk.withUnsafeMutableBytes { buffer throws(SystemError) in
                    try UnixSocket.receive(fd, into: buffer)
                }
            } catch {
                return fail("\(error)")
            }
            switch transfer {
            case .bytes(let count):
                framer.append(chunk[..<count])
                deliver()
            case .wouldBlock:
                framer.compact()
                return
            case .endOfStream:
                return fail("placed closed the connection")
            }
        }
    }

    private func deliver() {
        while !isClosed {
            let reply: VarlinkWire.Reply
            do {
                guard let message = try framer.next() else { return }
                reply = try VarlinkWire.Reply(message)
            } catch {
                return fail("protocol violation: \(error.description)")
            }
            onReply(reply)
        }
    }

    private func flush() {
        while !output.isEmpty && !isClosed {
            let transfer: UnixSocket.Transfer
            do {
                transfer = try output.withUnsafeBytes { bytes throws(SystemError) in try UnixSocket.send(fd, bytes) }
            } catch {
                return fail("\(error)")
            }
            guard case .bytes(let count) = transfer else { break }
            output.removeFirst(count)
        }
        guard !isClosed else { return }
        try? source?.setIOEvents(output.isEmpty ? .readable : [.readable, .writable])
    }

    private func fail(_ reason: String) {
        guard !isClosed else { return }
        close()
        onClose(reason)
    }

    private static func connect(path: String) throws(SystemError) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path), !bytes.contains(0) else {
            throw SystemError("socket path \(path)", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let fd = try checkPOSIX(
            socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0),
            "socket(AF_UNIX)")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        do {
            try checkPOSIX(result, "connect(\(path))")
        } catch {
            Glibc.close(fd)
            throw error
        }
        return fd
    }
}
