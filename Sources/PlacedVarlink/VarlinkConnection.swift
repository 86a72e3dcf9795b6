import PlacedJSON
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// One client of a `VarlinkServer`: its protocol state, its input framer and its bounded output
/// queue. All I/O is non-blocking on the server's loop, and the connection is the loop's thread's alone.
///
/// Flow control: while a call is in progress the connection stops reading, so a client that
/// pipelines requests is held back by its own socket buffer, never by our memory. Output is written
/// at once when the socket takes it; the rest waits in a queue of at most `maxQueuedBytes`, and
/// EPOLLOUT is requested only while that queue is non-empty. A client whose queue would overflow
/// is dropped.
final class VarlinkConnection {
    /// Where the connection is in the protocol, as sd-varlink keeps it: one value, changed only by
    /// `setState(_:)`.
    ///
    /// A call joins the state only when its handler returns without finishing it: a handler that
    /// replies at once (most do) leaves the state as it was, and the framing loop goes on to the next
    /// message.
    enum State {
        /// Reading: between calls, or inside the handler of the call just read.
        case idle
        /// A call's replies are owed; nothing more is read until it finishes.
        case serving(VarlinkCall)
        /// The client shut down its sending side: answer the call in progress (if any), the calls it
        /// sent before and what is queued, then close.
        case draining(VarlinkCall?)
        case closed(CloseReason)
    }

    enum CloseReason: Equatable {
        case peerClosed, queueFull, protocolError, ioError, serverClosed
    }

    let fd: Int32
    let credentials: Credentials
    private unowned let server: VarlinkServer
    private let loop: EventLoop
    private var source: EventSource?
    private(set) var state: State = .idle

    private var framer: VarlinkWire.Framer
    /// Chunks waiting for the socket; the first is written from `headOffset`. Broadcasts share one
    /// array among all clients (copy-on-write), so a queued broadcast costs no copy per client.
    private var output: [[UInt8]] = []
    private var outputHead = 0
    private var headOffset = 0
    private(set) var queuedBytes = 0
    private let maxQueuedBytes: Int
    /// The epoll events asked for now, so they are changed only when they must be.
    private var ioEvents: IOEvents

    init(fd: Int32, credentials: Credentials, server: VarlinkServer, loop: EventLoop)
        throws(SystemError)
    {
        self.fd = fd
        self.credentials = credentials
        self.server = server
        self.loop = loop
        let limits = server.limits?(credentials)
        framer = VarlinkWire.Framer(
            maximumMessageSize: limits?.maxMessageSize ?? server.configuration.maxMessageSize)
        maxQueuedBytes = limits?.maxQueuedBytes ?? server.configuration.maxQueuedBytes
        ioEvents = .readable
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

    /// Every change of `state`, made on the loop's thread alone. (Not through `server`: the server's
    /// deinit closes its connections.)
    private func setState(_ new: State) {
        loop.preconditionInLoop()
        state = new
    }

    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    /// The call whose replies the client waits for; nil between calls. Oneway calls never occupy it.
    var currentCall: VarlinkCall? {
        switch state {
        case .serving(let call): call
        case .draining(let call): call
        case .idle, .closed: nil
        }
    }

    private var isReadable: Bool {
        if case .idle = state { return true }
        return false
    }

    // MARK: Events

    private func handle(events: IOEvents) {
        if events.contains(.error) { return close(reason: .ioError) }
        if events.contains(.writable) { flush() }
        guard !isClosed else { return }
        if events.contains(.hangUp) { return hangUp() }
        if events.contains(.readable) {
            readOnce()
            processInput()
        }
    }

    /// The peer closed its socket (EPOLLHUP is reported even while we do not ask for input): serve
    /// what it sent before leaving (a oneway call still runs), then close. With a call in progress
    /// nobody is left to read its replies.
    private func hangUp() {
        while isReadable, readOnce() {
            processInput()
        }
        close(reason: .peerClosed)
    }

    /// Reads what the socket has (up to the scratch size); false when nothing came.
    @discardableResult
    private func readOnce() -> Bool {
        let transfer: UnixSocket.Transfer
        do {
            transfer = try server.scratch.withUnsafeMutableBytes { buffer throws(SystemError) in
                try UnixSocket.receive(fd, into: buffer)
            }
        } catch {
            close(reason: .ioError)
            return false
        }
        switch transfer {
        case .bytes(let count):
            framer.append(server.scratch[..<count])
            return true
        case .endOfStream:
            switch state {
            case .idle: setState(.draining(nil))
            case .serving(let call): setState(.draining(call))
            case .draining, .closed: break
            }
            updateEvents()
            return false
        case .wouldBlock:
            return false
        }
    }

    /// Frames and dispatches complete messages until a call stays open or the input runs out.
    func processInput() {
        while isReadable || isDrainingIdle {
            let message: ArraySlice<UInt8>
            do {
                guard let next = try framer.nextMessage() else { break }
                message = next
            } catch {
                let limit = framer.maximumMessageSize
                return terminate(
                    VarlinkError(server.configuration.messageTooLargeError, ["limit": .number(Double(limit))]))
            }
            handleMessage(message)
        }
        guard !isClosed else { return }
        if isDrainingIdle, framer.pendingCount > 0 {
            // Hung up within a message, which can never end now: say so, then close once it is sent.
            framer = VarlinkWire.Framer(maximumMessageSize: framer.maximumMessageSize)
            let reason = "the connection ended within a message"
            _ = send(VarlinkError(server.configuration.invalidMessageError, ["reason": .string(reason)]).framed)
            guard !isClosed else { return }
        }
        framer.compact()
        updateEvents()
        closeIfDone()
    }

    /// Shut down by the client with no call open: what it sent before is still served.
    private var isDrainingIdle: Bool {
        if case .draining(nil) = state { return true }
        return false
    }

    private func handleMessage(_ bytes: ArraySlice<UInt8>) {
        let invalid = server.configuration.invalidMessageError
        let message: JSON
        do {
            message = try JSON(parsing: bytes)
        } catch {
            return terminate(VarlinkError(invalid, ["reason": .string(error.description)]))
        }
        guard case .object(let fields) = message, let method = fields["method"]?.string else {
            return terminate(VarlinkError(invalid, ["reason": "expected an object with a method"]))
        }
        var parameters: [String: JSON] = [:]
        switch fields["parameters"] {
        case nil, .null?: break
        case .object(let object)?: parameters = object
        default: return terminate(VarlinkError(invalid, ["reason": "parameters must be an object"]))
        }
        func flag(_ name: String) -> Bool? {
            switch fields[name] {
            case nil, .null?: false
            case .bool(let given)?: given
            default: nil
            }
        }
        guard let more = flag("more"), let oneway = flag("oneway"), flag("upgrade") != nil else {
            let name = ["more", "oneway", "upgrade"].first { flag($0) == nil }!
            return terminate(VarlinkError(invalid, ["reason": .string("\(name) must be a boolean")]))
        }
        let call = VarlinkCall(method: method, parameters: parameters, more: more, oneway: oneway, connection: self)
        server.dispatch(call)
        if call.oneway {
            // No reply is owed for a oneway call; whatever the handler does later goes nowhere.
            call.detach()
        } else if !call.isFinished {
            keep(call)
        }
    }

    /// The handler returned with `call` open: its replies are owed, and no further call is read until
    /// it finishes. Closed meanwhile (a reply it sent overflowed the queue or failed), the connection
    /// cancels the call instead.
    private func keep(_ call: VarlinkCall) {
        switch state {
        case .idle: setState(.serving(call))
        case .draining(nil): setState(.draining(call))
        case .closed: call.cancel()
        case .serving, .draining(.some): assertionFailure("a call read while another was open")
        }
    }

    /// Best effort: queue `error` for the client, then disconnect.
    private func terminate(_ error: VarlinkError) {
        _ = send(error.framed)
        close(reason: .protocolError)
    }

    // MARK: Calls

    /// A call finished. Inside its handler it is not the state's yet, and the framing loop simply goes
    /// on; later, reading resumes now and the calls buffered meanwhile are served on the next iteration,
    /// not inside whatever code finished the call.
    func callFinished(_ call: VarlinkCall) {
        switch state {
        case .serving(let current) where current === call: setState(.idle)
        case .draining(let current?) where current === call: setState(.draining(nil))
        default: return
        }
        updateEvents()
        if framer.pendingCount > 0 || isDrainingIdle { server.scheduleProcessing(self) }
    }

    // MARK: Output

    /// Queues `bytes` (one framed message) for the client. Returns false when the client is gone or
    /// was just dropped because its queue is full.
    func send(_ bytes: [UInt8]) -> Bool {
        guard !isClosed else { return false }
        guard output.count == outputHead else {
            enqueue(bytes, offset: 0)
            return !isClosed
        }
        // Fast path: the socket usually takes the whole message now.
        do {
            let transfer = try bytes.withUnsafeBytes { buffer throws(SystemError) in try UnixSocket.send(fd, buffer) }
            switch transfer {
            case .bytes(let written) where written == bytes.count: return true
            case .bytes(let written): enqueue(bytes, offset: written)
            case .wouldBlock, .endOfStream: enqueue(bytes, offset: 0)
            }
        } catch {
            close(reason: .ioError)
            return false
        }
        return !isClosed
    }

    private func enqueue(_ bytes: [UInt8], offset: Int) {
        let remaining = bytes.count - offset
        guard queuedBytes + remaining <= maxQueuedBytes else {
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
            let transfer: UnixSocket.Transfer
            do {
                transfer = try chunk.withUnsafeBytes { buffer throws(SystemError) in
                    try UnixSocket.send(fd, UnsafeRawBufferPointer(rebasing: buffer[headOffset...]))
                }
            } catch {
                return close(reason: .ioError)
            }
            guard case .bytes(let written) = transfer else { break }
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
        if isDrainingIdle, outputHead == output.count, framer.pendingCount == 0 {
            close(reason: .peerClosed)
        }
    }

    private func updateEvents() {
        guard !isClosed else { return }
        var events: IOEvents = []
        if isReadable { events.insert(.readable) }
        if outputHead < output.count { events.insert(.writable) }
        guard events != ioEvents else { return }
        ioEvents = events
        do { try source?.setIOEvents(events) } catch { close(reason: .ioError) }
    }

    // MARK: Closing

    func close(reason: CloseReason) {
        guard !isClosed else { return }
        let call = currentCall
        setState(.closed(reason))
        // Detach from epoll before the descriptor number can be reused.
        source?.cancel()
        Glibc.close(fd)
        output = []
        framer = VarlinkWire.Framer(maximumMessageSize: framer.maximumMessageSize)
        call?.cancel()
        // The server drops its reference itself when it closes everything (possibly from deinit).
        if reason != .serverClosed { server.connectionClosed(self) }
    }
}
