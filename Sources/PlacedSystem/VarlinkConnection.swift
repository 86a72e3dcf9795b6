import CSystemd
import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

/// One client of a `VarlinkServer`: its socket, input buffer, bounded output queue and the call in
/// progress. All I/O is non-blocking on the server's loop.
///
/// Flow control: while a call is in progress the connection stops reading, so a client that
/// pipelines requests is held back by its own socket buffer, never by our memory. Output is written
/// at once when the socket takes it; the rest waits in a queue of at most `maxQueuedBytes`, and
/// EPOLLOUT is requested only while that queue is non-empty. A client whose queue would overflow
/// is dropped.
final class VarlinkConnection {
    let fd: Int32
    let credentials: Credentials
    private unowned let server: VarlinkServer
    private var source: EventSource?

    /// Bytes read but not yet framed into messages; `input[consumed...]` is pending.
    private var input: [UInt8] = []
    private var consumed = 0
    /// Where the search for the next NUL resumes, so a message arriving in pieces is scanned once.
    private var scanned = 0

    /// Chunks waiting for the socket; the first is written from `headOffset`. Broadcasts share one
    /// array among all clients (copy-on-write), so a queued broadcast costs no copy per client.
    private var output: [[UInt8]] = []
    private var outputHead = 0
    private var headOffset = 0
    private(set) var queuedBytes = 0

    /// The call whose replies the client waits for; nil between calls. Oneway calls never occupy it.
    private(set) var currentCall: VarlinkCall?
    private var readClosed = false
    private var processing = false
    private var ioEvents: UInt32 = 0
    private(set) var isClosed = false

    init(fd: Int32, credentials: Credentials, server: VarlinkServer, loop: EventLoop)
        throws(SystemError)
    {
        self.fd = fd
        self.credentials = credentials
        self.server = server
        ioEvents = EPOLLIN.rawValue
        source = try loop.onIO(fd: fd, events: ioEvents) { [weak self] events in
            self?.handle(events: events)
        }
    }

    deinit {
        if !isClosed {
            source?.cancel()
            Glibc.close(fd)
        }
    }

    enum CloseReason { case peerClosed, queueFull, protocolError, ioError, serverClosed }

    // MARK: Events

    private func handle(events: UInt32) {
        if events & EPOLLERR.rawValue != 0 { return close(reason: .ioError) }
        if events & EPOLLOUT.rawValue != 0 { flush() }
        guard !isClosed else { return }
        if events & EPOLLHUP.rawValue != 0 { return hangUp() }
        if events & EPOLLIN.rawValue != 0 {
            readOnce()
            processInput()
        }
    }

    /// The peer closed its socket (EPOLLHUP is reported even while we do not ask for input): serve
    /// what it sent before leaving (a oneway call still runs), then close. With a call in progress
    /// nobody is left to read its replies.
    private func hangUp() {
        while !isClosed, !readClosed, currentCall == nil, readOnce() {
            processInput()
        }
        close(reason: .peerClosed)
    }

    /// Reads what the socket has (up to the scratch size); false when nothing came.
    @discardableResult
    private func readOnce() -> Bool {
        let count = server.scratch.withUnsafeMutableBytes { buffer in
            recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
        }
        if count > 0 {
            if consumed == input.count {
                input.removeAll(keepingCapacity: true)
                consumed = 0
                scanned = 0
            }
            input.append(contentsOf: server.scratch[..<count])
            return true
        }
        if count == 0 {
            readClosed = true
            updateEvents()
        } else if errno != EAGAIN && errno != EINTR {
            close(reason: .ioError)
        }
        return false
    }

    /// Frames and dispatches complete messages until a call stays open or the input runs out.
    /// Re-entrant calls (a handler finishing synchronously) fall through to the running loop.
    func processInput() {
        guard !processing else { return }
        processing = true
        defer { processing = false }
        let limit = server.configuration.maxMessageSize
        while !isClosed, currentCall == nil, consumed < input.count {
            guard let end = input[scanned...].firstIndex(of: 0) else {
                scanned = input.count
                if input.count - consumed > limit { return tooLarge() }
                break
            }
            if end - consumed > limit { return tooLarge() }
            let message = input[consumed..<end]
            consumed = end + 1
            scanned = consumed
            handleMessage(message)
        }
        guard !isClosed else { return }
        if consumed == input.count {
            // Idle clients keep no buffer: a thousand of them cost a thousand sockets, nothing more.
            input = []
            consumed = 0
            scanned = 0
        } else if consumed > 0 {
            // Keep only the unprocessed tail, so a client that pipelines without pause cannot grow it.
            input.removeSubrange(..<consumed)
            scanned -= consumed
            consumed = 0
        }
        updateEvents()
        closeIfDone()
    }

    private func tooLarge() {
        let limit = server.configuration.maxMessageSize
        terminate(
            VarlinkError(server.configuration.messageTooLargeError, ["limit": .number(Double(limit))]))
    }

    private func handleMessage(_ bytes: ArraySlice<UInt8>) {
        let message: JSON
        do {
            message = try JSON(parsing: bytes)
        } catch {
            return terminate(
                VarlinkError(
                    server.configuration.invalidMessageError, ["reason": .string(error.description)]))
        }
        guard case .object(let fields) = message, let method = fields["method"]?.string else {
            return terminate(
                VarlinkError(
                    server.configuration.invalidMessageError, ["reason": "expected an object with a method"]))
        }
        var parameters: [String: JSON] = [:]
        switch fields["parameters"] {
        case nil, .null?: break
        case .object(let object)?: parameters = object
        default:
            return terminate(
                VarlinkError(
                    server.configuration.invalidMessageError, ["reason": "parameters must be an object"]))
        }
        var flags: [String: Bool] = [:]
        for flag in ["more", "oneway", "upgrade"] {
            switch fields[flag] {
            case nil, .null?: flags[flag] = false
            case .bool(let value)?: flags[flag] = value
            default:
                return terminate(
                    VarlinkError(
                        server.configuration.invalidMessageError,
                        ["reason": .string("\(flag) must be a boolean")]))
            }
        }
        let call = VarlinkCall(
            method: method, parameters: parameters, more: flags["more"]!, oneway: flags["oneway"]!,
            connection: self)
        if !call.oneway { currentCall = call }
        server.dispatch(call)
        // No reply is owed for a oneway call; whatever the handler does later goes nowhere.
        if call.oneway { call.detach() }
    }

    /// Best effort: queue `error` for the client, then disconnect.
    private func terminate(_ error: VarlinkError) {
        _ = send(VarlinkServer.frame(error: error))
        close(reason: .protocolError)
    }

    // MARK: Calls

    func callFinished(_ call: VarlinkCall) {
        guard currentCall === call, !isClosed else { return }
        currentCall = nil
        // Inside processInput the framing loop simply continues; otherwise resume reading now and
        // serve buffered calls on the next iteration.
        guard !processing else { return }
        updateEvents()
        if hasPendingInput || readClosed { server.scheduleProcessing(self) }
    }

    private var hasPendingInput: Bool { consumed < input.count }

    // MARK: Output

    /// Queues `bytes` (one framed message) for the client. Returns false when the client is gone or
    /// was just dropped because its queue is full.
    func send(_ bytes: [UInt8]) -> Bool {
        guard !isClosed else { return false }
        if output.count == outputHead {
            // Fast path: the socket usually takes the whole message now.
            let written = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if written == bytes.count { return true }
            if written < 0 {
                guard errno == EAGAIN || errno == EINTR else {
                    close(reason: .ioError)
                    return false
                }
                enqueue(bytes, offset: 0)
            } else {
                enqueue(bytes, offset: written)
            }
            return !isClosed
        }
        enqueue(bytes, offset: 0)
        return !isClosed
    }

    private func enqueue(_ bytes: [UInt8], offset: Int) {
        let remaining = bytes.count - offset
        guard queuedBytes + remaining <= server.configuration.maxQueuedBytes else {
            return close(reason: .queueFull)
        }
        if output.count == outputHead {
            output.removeAll(keepingCapacity: true)
            outputHead = 0
            headOffset = offset
        }
        output.append(bytes)
        queuedBytes += remaining
        updateEvents()
    }

    private func flush() {
        while outputHead < output.count {
            let chunk = output[outputHead]
            let written = chunk.withUnsafeBytes { buffer in
                Glibc.send(
                    fd, buffer.baseAddress! + headOffset, buffer.count - headOffset,
                    Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if written < 0 {
                if errno == EAGAIN || errno == EINTR { break }
                return close(reason: .ioError)
            }
            queuedBytes -= written
            headOffset += written
            if headOffset == chunk.count {
                outputHead += 1
                headOffset = 0
            }
        }
        if outputHead == output.count {
            output = []
            outputHead = 0
        }
        updateEvents()
        closeIfDone()
    }

    /// After the client shut down its sending side: stay until the call in progress and the queued
    /// output are done, then close.
    private func closeIfDone() {
        if !isClosed, readClosed, currentCall == nil, outputHead == output.count, !hasPendingInput {
            close(reason: .peerClosed)
        }
    }

    private func updateEvents() {
        guard !isClosed else { return }
        var events: UInt32 = 0
        if !readClosed && currentCall == nil { events |= EPOLLIN.rawValue }
        if outputHead < output.count { events |= EPOLLOUT.rawValue }
        guard events != ioEvents else { return }
        ioEvents = events
        do { try source?.setIOEvents(events) } catch { close(reason: .ioError) }
    }

    // MARK: Closing

    func close(reason: CloseReason) {
        guard !isClosed else { return }
        isClosed = true
        // Detach from epoll before the descriptor number can be reused.
        source?.cancel()
        Glibc.close(fd)
        output = []
        input = []
        let call = currentCall
        currentCall = nil
        call?.cancel()
        // The server drops its reference itself when it closes everything (possibly from deinit).
        if reason != .serverClosed { server.connectionClosed(self) }
    }
}
