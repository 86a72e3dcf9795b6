import PlacedCore
import PlacedJSON
import PlacedSystem
import PlacedVarlink

/// placed, as placed-web hears it: one connection follows `Watch` and keeps `state`; another carries
/// the calls pages ask for (`Select`, `Map`, `Current`), one after another, each reply going to the
/// oldest call waiting. When placed is unreachable the Watch is retried with capped backoff and
/// calls fail at once with the reason.
public final class Upstream {
    public static let interface = "io.placed.Places"

    /// How a call ended.
    public enum CallError: Error, Equatable {
        case unreachable(String)
        case timedOut
        /// placed replied with the error `name` (`io.placed.Places.NotInRanking`, ...).
        case replied(name: String, parameters: [String: JSON])
    }

    public private(set) var state = KioskState()

    private let loop: EventLoop
    private let socketPath: String
    private let onChange: (KioskState) -> Void
    private let callTimeout: UInt64
    private var backoff: Backoff

    private var watch: UpstreamConnection?
    private var watchReplies = 0
    private var reconnectTimer: EventSource?

    private var calls: UpstreamConnection?
    private var pending: [(deadline: UInt64, completion: (Result<[String: JSON], CallError>) -> Void)] = []
    private var callTimer: EventSource?
    private var stopped = false

    /// `onChange` hears every change of `state`; `callTimeout` and the backoff are microseconds.
    public init(
        loop: EventLoop, socketPath: String, callTimeout: UInt64 = 5_000_000,
        backoff: Backoff = Backoff(initial: 250_000, maximum: 4_000_000),
        onChange: @escaping (KioskState) -> Void
    ) {
        self.loop = loop
        self.socketPath = socketPath
        self.callTimeout = callTimeout
        self.backoff = backoff
        self.onChange = onChange
    }

    public func start() { connectWatch() }

    public func stop() {
        stopped = true
        reconnectTimer?.cancel()
        callTimer?.cancel()
        watch?.close()
        calls?.close()
        failPending(.unreachable("placed-web is stopping"))
    }

    // MARK: Watch

    private func connectWatch() {
        guard !stopped else { return }
        watchReplies = 0
        do {
            let connection = try UpstreamConnection(
                path: socketPath, loop: loop,
                onReply: { [unowned self] reply in self.watchReplied(reply) },
                onClose: { [unowned self] reason in self.watchLost(reason) })
            watch = connection
            connection.call("\(Self.interface).Watch", [:], more: true)
        } catch {
            watchLost(error.description)
        }
    }

    private func watchReplied(_ reply: VarlinkWire.Reply) {
        if let name = reply.error {
            // PermissionDenied and the like: placed is there but will not serve us; keep asking.
            watch?.close()
            return watchLost("placed answered \(name)")
        }
        state.apply(watchReply: reply.parameters, first: watchReplies == 0)
        watchReplies += 1
        backoff.reset()
        if watchReplies == 1 { Log.info("following placed on \(socketPath)") }
        onChange(state)
        if !reply.continues {
            watch?.close()
            watchLost("placed ended the Watch")
        }
    }

    private func watchLost(_ reason: String) {
        watch = nil
        guard !stopped else { return }
        let delay = backoff.next()
        let wasReachable = state.upstream == .connected || state.upstream == .connecting
        state.lose(reason)
        if wasReachable {
            Log.warning("placed unreachable: \(reason); retrying")
            onChange(state)
        }
        Log.debug("placed: \(reason); retrying in \(Double(delay) / 1e6) s")
        do {
            if let reconnectTimer {
                try reconnectTimer.schedule(after: delay)
            } else {
                reconnectTimer = try loop.after(delay) { [unowned self] in self.connectWatch() }
            }
        } catch {
            Log.error("cannot schedule a reconnect to placed: \(error)")
        }
    }

    // MARK: Calls

    /// Calls `io.placed.Places.METHOD`; `completion` runs once with the reply's parameters or why
    /// there are none: before this returns when placed cannot be reached, else when it answers.
    public func call(
        _ method: String, _ parameters: [String: JSON],
        completion: @escaping (Result<[String: JSON], CallError>) -> Void
    ) {
        if calls == nil || calls!.isClosed {
            do {
                calls = try UpstreamConnection(
                    path: socketPath, loop: loop,
                    onReply: { [unowned self] reply in self.callReplied(reply) },
                    onClose: { [unowned self] reason in self.callsLost(reason) })
            } catch {
                calls = nil
                return completion(.failure(.unreachable(error.description)))
            }
        }
        pending.append((loop.now + callTimeout, completion))
        calls!.call("\(Self.interface).\(method)", parameters)
        armCallTimer()
    }

    private func callReplied(_ reply: VarlinkWire.Reply) {
        guard !pending.isEmpty else {
            calls?.close()
            return callsLost("a reply to no call")
        }
        let (_, completion) = pending.removeFirst()
        armCallTimer()
        if let name = reply.error {
            completion(.failure(.replied(name: name, parameters: reply.parameters)))
        } else {
            completion(.success(reply.parameters))
        }
    }

    private func callsLost(_ reason: String) {
        calls = nil
        failPending(.unreachable(reason))
    }

    private func failPending(_ error: CallError) {
        let waiting = pending
        pending.removeAll()
        callTimer?.cancel()
        callTimer = nil
        for (_, completion) in waiting { completion(.failure(error)) }
    }

    private func armCallTimer() {
        guard let oldest = pending.first?.deadline else {
            try? callTimer?.setEnabled(false)
            return
        }
        let delay = oldest > loop.now ? oldest - loop.now : 0
        do {
            if let callTimer {
                try callTimer.schedule(after: delay)
            } else {
                callTimer = try loop.after(delay) { [unowned self] in self.callsTimedOut() }
            }
        } catch {
            Log.error("cannot time placed's replies: \(error)")
        }
    }

    /// placed took too long: the replies still to come would be out of step, so the connection goes.
    private func callsTimedOut() {
        guard let oldest = pending.first?.deadline, oldest <= loop.now else { return armCallTimer() }
        Log.warning("placed did not answer a call in \(Double(callTimeout) / 1e6) s")
        calls?.close()
        calls = nil
        failPending(.timedOut)
    }
}
