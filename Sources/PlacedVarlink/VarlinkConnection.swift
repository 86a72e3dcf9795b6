import PlacedJSON
import PlacedSystem
import PlacedThreads

#if canImport(Glibc)
    import Glibc
#endif

/// One client of a `VarlinkServer`: its protocol state, its input framer and its bounded output
/// queue. All I/O is non-blocking on the server's loop.
///
/// Flow control: while a call is in progress the connection stops reading, so a client that
/// pipelines requests is held back by its own socket buffer, never by our memory. Output is written
/// at once when the socket takes it; the rest waits in a queue of at most `maxQueuedBytes`, and
/// EPOLLOUT is requested only while that queue is non-empty. A client whose queue would overflow
/// is dropped.
///
/// A connection whose calls are all to the server's off-loop methods leaves the loop for a request
/// thread (`RequestThreads`) and comes back when it needs the loop; while away (`onThread`) its source
/// is off and nothing here touches the loop. Every property is used with the loop's lock held.
final class VarlinkConnection {
    /// Where the connection is in the protocol, as sd-varlink keeps it: one value, not a set of flags.
    enum State {
        /// Waiting for the client's next call (reading).
        case idle
        /// A call's replies are owed; nothing more is read until it finishes.
        case serving(VarlinkCall)
        /// The client shut down its sending side: answer the call in progress (if any) and what is
        /// queued, then close.
        case draining(VarlinkCall?)
        case closed(CloseReason)
    }

    enum CloseReason: Equatable {
        case peerClosed, queueFull, protocolError, ioError, serverClosed
    }

    let fd: Int32
    let credentials: Credentials
    private unowned let server: VarlinkServer
    private var source: EventSource?
    private(set) var state: State = .idle

    private var framer: VarlinkWire.Framer
    /// Chunks waiting for the socket; the first is written from `headOffset`. Broadcasts share one
    /// array among all clients (copy-on-write), so a queued broadcast costs no copy per client.
    private var output: [[UInt8]] = []
    private var outputHead = 0
    private var headOffset = 0
    private(set) var queuedBytes = 0
    /// Set while framing and dispatching input: a call that finishes inside its handler lets the
    /// framing loop go on instead of re-entering it.
    private var dispatching = false
    /// The epoll events asked for now, so they are changed only when they must be.
    private var ioEvents: IOEvents
    /// With a request thread: the source is off, replies are queued for the thread to send.
    private(set) var onThread = false
    /// The last call dispatched was to an off-loop method (made without `more` or `oneway`).
    private var lastCallOffLoop = false
    /// O_NONBLOCK cleared for the thread's blocking `recv` (the loop's calls say MSG_DONTWAIT each).
    private var isBlocking = false

    init(fd: Int32, credentials: Credentials, server: VarlinkServer, loop: EventLoop)
        throws(SystemError)
    {
        self.fd = fd
        self.credentials = credentials
        self.server = server
        framer = VarlinkWire.Framer(maximumMessageSize: server.configuration.maxMessageSize)
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
        guard !onThread else { return }
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
            processInput(mayLeave: false)
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
            case .idle: state = .draining(nil)
            case .serving(let call): state = .draining(call)
            case .draining, .closed: break
            }
            updateEvents()
            return false
        case .wouldBlock:
            return false
        }
    }

    /// Frames and dispatches complete messages until a call stays open or the input runs out; then
    /// the connection may leave for a request thread (not while the peer is hanging up).
    /// Re-entrant calls (a handler finishing synchronously) fall through to the running loop.
    func processInput(mayLeave: Bool = true) {
        guard !dispatching, !onThread else { return }
        dispatching = true
        defer { dispatching = false }
        while isReadable || isDrainingIdle {
            let message: ArraySlice<UInt8>
            do {
                guard let next = try framer.nextMessage() else { break }
                message = next
            } catch {
                let limit = server.configuration.maxMessageSize
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
        if mayLeave, leaveLoop() { return }
        updateEvents()
        closeIfDone()
    }

    /// Shut down by the client with no call open: what it sent before is still served.
    private var isDrainingIdle: Bool {
        if case .draining(nil) = state { return true }
        return false
    }

    private func handleMessage(_ bytes: ArraySlice<UInt8>) {
        switch Self.parse(bytes, invalidMessageError: server.configuration.invalidMessageError) {
        case .success(let message): start(message)
        case .failure(let error): terminate(error)
        }
    }

    /// A message read as a call: what `VarlinkCall` is made of.
    struct CallMessage {
        var method: String
        var parameters: [String: JSON]
        var more: Bool
        var oneway: Bool
    }

    /// Reads a message as a call, or names why it is not one (`invalidMessageError`, with a `reason`).
    static func parse(_ bytes: ArraySlice<UInt8>, invalidMessageError invalid: String) -> Result<
        CallMessage, VarlinkError
    > {
        let message: JSON
        do {
            message = try JSON(parsing: bytes)
        } catch {
            return .failure(VarlinkError(invalid, ["reason": .string(error.description)]))
        }
        guard case .object(let fields) = message, let method = fields["method"]?.string else {
            return .failure(VarlinkError(invalid, ["reason": "expected an object with a method"]))
        }
        var parameters: [String: JSON] = [:]
        switch fields["parameters"] {
        case nil, .null?: break
        case .object(let object)?: parameters = object
        default: return .failure(VarlinkError(invalid, ["reason": "parameters must be an object"]))
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
            return .failure(VarlinkError(invalid, ["reason": .string("\(name) must be a boolean")]))
        }
        return .success(CallMessage(method: method, parameters: parameters, more: more, oneway: oneway))
    }

    private func start(_ message: CallMessage) {
        let call = VarlinkCall(
            method: message.method, parameters: message.parameters, more: message.more, oneway: message.oneway,
            connection: self)
        if !call.oneway {
            state = isDrainingIdle ? .draining(call) : .serving(call)
        }
        lastCallOffLoop = server.servesOffLoop(message)
        server.dispatch(call)
        // No reply is owed for a oneway call; whatever the handler does later goes nowhere.
        if call.oneway { call.detach() }
    }

    // MARK: Request threads

    /// Whether the loop may give a connection to a request thread after serving its input: its last call
    /// was to an off-loop method and nothing else is open on it — no call (a Watch, a deferred reply),
    /// no queued output, no input not yet taken as a call, and the client has not shut down its side.
    static func mayLeaveLoop(lastCallOffLoop: Bool, idle: Bool, pendingInput: Int, queuedOutput: Int) -> Bool {
        lastCallOffLoop && idle && pendingInput == 0 && queuedOutput == 0
    }

    /// Loop thread: hands the connection to a request thread if it may leave and a thread can take it.
    private func leaveLoop() -> Bool {
        guard
            Self.mayLeaveLoop(
                lastCallOffLoop: lastCallOffLoop, idle: isReadable, pendingInput: framer.pendingCount,
                queuedOutput: queuedBytes),
            let threads = server.requestThreads, threads.canTakeConnection
        else { return false }
        if !isBlocking {
            // Once for the connection's life: the loop's own reads and writes say MSG_DONTWAIT.
            guard (try? UnixSocket.setBlocking(fd, readTimeout: RequestThreads.idleTimeout)) != nil else {
                return false
            }
            isBlocking = true
        }
        do { try source?.setEnabled(false) } catch {
            close(reason: .ioError)
            return true
        }
        onThread = true
        guard threads.handOver(self) else {
            onThread = false
            do { try source?.setEnabled(true) } catch { close(reason: .ioError) }
            return isClosed
        }
        return true
    }

    /// On a request thread, with the loop's lock held (released only around `recv` and `send`, held
    /// again on return): answers the calls to off-loop methods as they come, until the connection
    /// needs the loop; then says what the loop is to do with it.
    func serveOffLoop(
        scratch: UnsafeMutableRawBufferPointer, lock: ThreadLock, stopping: () -> Bool
    ) -> RequestThreads.Return {
        dispatching = true
        defer { dispatching = false }
        while true {
            // One call at a time, each reply sent before the next is read: the queue holds one reply.
            while !stopping() {
                let bytes: ArraySlice<UInt8>
                do {
                    guard let next = try framer.peekMessage() else { break }
                    bytes = next
                } catch {
                    return .resume  // too large: the loop names it and disconnects
                }
                guard case .success(let message) = Self.parse(bytes, invalidMessageError: ""),
                    server.servesOffLoop(message)
                else { return .resume }
                _ = try? framer.nextMessage()
                start(message)
                guard case .idle = state else { return .resume }  // a reply still owed: the loop's to wait for
                if let outcome = sendQueued(lock: lock) { return outcome }
            }
            framer.compact()
            if stopping() { return .resume }
            lock.unlock()
            let count = recv(fd, scratch.baseAddress, scratch.count, 0)
            let failure = errno
            lock.lock()
            if stopping() { return .resume }
            guard count > 0 else {
                if count < 0 && failure == EINTR { continue }
                // End of input or an error: the loop reads it again and goes on as it does. A client quiet
                // for `idleTimeout` (EAGAIN) goes back too, so that idle clients do not keep the threads.
                return .resume
            }
            framer.append(UnsafeRawBufferPointer(rebasing: scratch[..<count]))
        }
    }

    /// On the thread: sends the queued replies without the lock; nil when the socket took them all, else
    /// what the loop is to do (the rest stays queued for the loop to write, under its bound).
    private func sendQueued(lock: ThreadLock) -> RequestThreads.Return? {
        guard outputHead < output.count else { return nil }
        let chunks = output[outputHead...]
        var offset = headOffset
        var sent = 0
        var failed = false
        lock.unlock()
        for chunk in chunks {
            let transfer = try? chunk.withUnsafeBytes { buffer throws(SystemError) in
                try UnixSocket.send(fd, UnsafeRawBufferPointer(rebasing: buffer[offset...]))
            }
            guard case .bytes(let written)? = transfer else {
                failed = transfer == nil
                break
            }
            sent += written
            offset += written
            guard offset == chunk.count else { break }
            offset = 0
        }
        lock.lock()
        queuedBytes -= sent
        while outputHead < output.count, sent > 0 {
            let left = output[outputHead].count - headOffset
            if sent >= left {
                sent -= left
                outputHead += 1
                headOffset = 0
            } else {
                headOffset += sent
                sent = 0
            }
        }
        if outputHead == output.count {
            output = []
            outputHead = 0
            headOffset = 0
            return nil
        }
        return failed ? .close(.ioError) : .resume
    }

    /// Loop thread: the connection is back from its request thread.
    func resumeOnLoop(_ outcome: RequestThreads.Return) {
        guard onThread, !isClosed else { return }
        onThread = false
        // Not straight back: the loop serves what the thread left before the connection may leave again.
        lastCallOffLoop = false
        if case .close(let reason) = outcome { return close(reason: reason) }
        do { try source?.setEnabled(true) } catch { return close(reason: .ioError) }
        updateEvents()
        processInput()
    }

    /// Best effort: queue `error` for the client, then disconnect.
    private func terminate(_ error: VarlinkError) {
        _ = send(error.framed)
        close(reason: .protocolError)
    }

    // MARK: Calls

    func callFinished(_ call: VarlinkCall) {
        switch state {
        case .serving(let current) where current === call: state = .idle
        case .draining(let current?) where current === call: state = .draining(nil)
        default: return
        }
        // Inside processInput the framing loop simply continues; otherwise resume reading now and
        // serve buffered calls on the next iteration.
        guard !dispatching else { return }
        updateEvents()
        if framer.pendingCount > 0 || isDrainingIdle { server.scheduleProcessing(self) }
    }

    // MARK: Output

    /// Queues `bytes` (one framed message) for the client. Returns false when the client is gone or
    /// was just dropped because its queue is full.
    func send(_ bytes: [UInt8]) -> Bool {
        guard !isClosed else { return false }
        guard output.count == outputHead, !onThread else {
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
        // On a thread the queue holds the one reply being answered (sent before the next call is read);
        // a client that does not take it goes back to the loop, where the bound applies.
        guard onThread || queuedBytes + remaining <= server.configuration.maxQueuedBytes else {
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
        guard !isClosed, !onThread else { return }
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
        state = .closed(reason)
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
