import CMosquitto
import CSystemd
import PlacedCore
import PlacedSystem
import PlacedWire

#if canImport(Glibc)
    import Glibc
#endif

/// One MQTT connection to one broker through libmosquitto, driven by the daemon's event loop: the
/// library's socket is an I/O source (EPOLLOUT only while libmosquitto has output queued), and a timer runs
/// `mosquitto_loop_misc` for pings when `KeepAliveSchedule` says it is due. No libmosquitto thread, and
/// while idle no wake-up but that timer and the broker's ping reply, once a keepalive.
///
/// A connection is used once: when it fails it reports `disconnected` and the owner makes a new one
/// (so nothing libmosquitto kept for the old one is sent twice). libmosquitto's callbacks only record
/// what happened; the owner hears of it after the library call returns, never from inside it.
final class MQTTConnection {
    struct Options {
        var clientID: String
        var keepAlive: Int
        var protocolVersion: MQTTProtocolVersion
        var username: String?
        var password: String?
        var caFile: String?
        var certFile: String?
        var keyFile: String?
        var will: (topic: String, payload: [UInt8])?
        /// Most QoS 1 messages libmosquitto keeps unacknowledged before it queues more.
        var maximumInFlight: Int
        /// How long the broker has to accept the connection (TCP, TLS, CONNACK), microseconds.
        var connectTimeout: UInt64
    }

    enum Event {
        /// The broker accepted the connection (CONNACK success).
        case connected
        /// PUBACK for message `mid`; `reason` is the MQTT 5 reason code (0 with MQTT 3.1.1).
        case acknowledged(mid: Int32, reason: Int32)
        /// The broker granted subscription `mid` (SUBACK); `granted`: the QoS of each topic, 0x80 refused.
        case subscribed(mid: Int32, granted: [Int32])
        /// A message on a subscribed topic, its QoS flow complete (for QoS 1, PUBACK sent).
        case message(topic: String, payload: [UInt8])
        /// The connection is over; `reason` says why, for the log and the status. `tls`: the TLS handshake
        /// failed (the broker's certificate is not trusted, say).
        case disconnected(reason: String, tls: Bool)
    }

    let broker: BrokerAddress
    /// What libmosquitto connects to: an address, or for TLS the broker's name.
    let host: String
    private let library: MosquittoLibrary
    private let loop: EventLoop
    private let options: Options
    private var handle: OpaquePointer?
    private var io: EventSource?
    private var interest: IOEvents = []
    private var keepAliveTimer: EventSource?
    /// From CONNACK on: when libmosquitto's keepalive check is due.
    private var keepAlive: KeepAliveSchedule?
    private var connectTimer: EventSource?
    private var deferredDelivery: EventSource?
    /// What libmosquitto's callbacks recorded during the current library call.
    private var events: [Event] = []
    /// The last error libmosquitto logged (an OpenSSL verification failure, say), for the reason.
    private var lastLibraryError: String?
    private var tlsFailed = false
    private(set) var isConnected = false
    private(set) var isClosed = false
    /// Hears every event, after the libmosquitto call that caused it has returned.
    var onEvent: (Event) -> Void = { _ in }

    /// Starts connecting to `host` (the broker's address, or its name for TLS, whose certificate check
    /// needs it); failures to even start are thrown (bad TLS files, no socket). libmosquitto resolves a
    /// name with a blocking getaddrinfo(): the exporter looks it up first without blocking
    /// (`HostLookup`), so a name given here has just been resolved.
    init(loop: EventLoop, broker: BrokerAddress, host: String, options: Options) throws(FleetError) {
        self.loop = loop
        self.broker = broker
        self.host = host
        self.options = options
        library = try MosquittoLibrary.shared()
        guard let handle = library.new(options.clientID, false, nil) else {
            throw .client(SystemError("mosquitto_new").description)
        }
        self.handle = handle
        library.userDataSet(handle, Unmanaged.passUnretained(self).toOpaque())
        do throws(FleetError) {
            try configure(handle)
            try startConnecting(handle)
        } catch {
            destroy()
            throw error
        }
    }

    deinit { destroy() }

    // MARK: Set-up

    private func configure(_ handle: OpaquePointer) throws(FleetError) {
        let version = options.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        try check(library.intOption(handle, MOSQ_OPT_PROTOCOL_VERSION, version), "protocol version")
        try check(library.intOption(handle, MOSQ_OPT_TCP_NODELAY, 1), "TCP_NODELAY")
        try check(
            library.maxInflightMessagesSet(handle, UInt32(options.maximumInFlight)), "max inflight messages")
        if let will = options.will {
            try check(
                will.payload.withUnsafeBytes {
                    library.willSet(handle, will.topic, Int32($0.count), $0.baseAddress, 1, true)
                }, "last will")
        }
        if let username = options.username {
            try check(library.usernamePasswordSet(handle, username, options.password), "username")
        }
        if broker.tls {
            // Without CAFile=, the system's trusted CAs. An encrypted key file gets no password: the
            // callback answers at once instead of libmosquitto prompting on a terminal.
            let rc = library.tlsSet(
                handle, options.caFile, options.caFile == nil ? "/etc/ssl/certs" : nil, options.certFile,
                options.keyFile, { _, _, _, _ in 0 })
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                throw .configuration(
                    "TLS files (CAFile=\(options.caFile ?? "-"), CertFile=\(options.certFile ?? "-"), "
                        + "KeyFile=\(options.keyFile ?? "-")) cannot be used: \(library.describe(rc))")
            }
            // Verify the broker's certificate chain and its host name; nothing weaker is offered.
            try check(library.tlsOptionsSet(handle, 1, nil, nil), "TLS options")
            try check(library.tlsInsecureSet(handle, false), "TLS host name check")
        }
        library.connectCallbackSet(handle) { _, context, rc, _, _ in
            MQTTConnection.from(context).connectAcknowledged(rc)
        }
        library.publishCallbackSet(handle) { _, context, mid, reason, _ in
            MQTTConnection.from(context).events.append(.acknowledged(mid: mid, reason: reason))
        }
        library.subscribeCallbackSet(handle) { _, context, mid, count, granted in
            let qos = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(count, 0)))) } ?? []
            MQTTConnection.from(context).events.append(.subscribed(mid: mid, granted: qos))
        }
        library.messageCallbackSet(handle) { _, context, message in
            guard let message = message?.pointee, let topic = message.topic else { return }
            // One byte more than a command may have is enough to refuse it: a copy of a broker's 256 MB
            // message beside libmosquitto's own would double what a small device must hold.
            let kept = min(Int(max(message.payloadlen, 0)), FleetCommand.maximumSize + 1)
            let payload = message.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: kept)) } ?? []
            MQTTConnection.from(context).events.append(.message(topic: String(cString: topic), payload: payload))
        }
        library.disconnectCallbackSet(handle) { _, context, rc, _ in
            MQTTConnection.from(context).libraryDisconnected(rc)
        }
        library.logCallbackSet(handle) { _, context, level, message in
            guard level == MOSQ_LOG_ERR || level == MOSQ_LOG_WARNING, let message else { return }
            MQTTConnection.from(context).lastLibraryError = String(cString: message)
        }
        if options.protocolVersion == .v5 { try setSessionExpiry(handle) }
    }

    /// MQTT 5 ends a session at disconnect unless CONNECT carries a session expiry interval: ask for one
    /// that never ends, so the session persists as with MQTT 3.1.1 and clean session off.
    ///
    /// libmosquitto 2.0 takes CONNECT properties only through the blocking `mosquitto_connect_bind_v5`.
    /// Called with port -1 it stores them and fails its argument check before opening any socket; the
    /// non-blocking `mosquitto_connect_async` then sends the stored properties.
    private func setSessionExpiry(_ handle: OpaquePointer) throws(FleetError) {
        var properties: OpaquePointer?
        defer { library.propertyFreeAll(&properties) }
        try check(
            library.propertyAddInt32(&properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), .max),
            "session expiry property")
        let rc = library.connectBindV5(handle, host, -1, Int32(options.keepAlive), nil, properties)
        guard rc == MOSQ_ERR_INVAL.rawValue else { throw .client("storing CONNECT properties: unexpected \(rc)") }
    }

    private func startConnecting(_ handle: OpaquePointer) throws(FleetError) {
        let rc = library.connectAsync(handle, host, Int32(broker.port), Int32(options.keepAlive))
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            throw .connect(broker: broker.description, reason: reason(for: rc, after: "mosquitto_connect_async"))
        }
        let fd = library.socket(handle)
        guard fd >= 0 else { throw .connect(broker: broker.description, reason: "no socket") }
        // libmosquitto opens it without SOCK_CLOEXEC. A child that inherited it would keep the socket open
        // after libmosquitto closes it, and with it sd-event's epoll registration of a source long freed.
        _ = fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC)
        // Data the broker has not acknowledged after one keepalive ends the connection: a link cut while
        // publishing is noticed then, not after the keepalive's ping and its wait for a reply.
        var timeout = UInt32(options.keepAlive * 1000)
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, &timeout, socklen_t(MemoryLayout<UInt32>.size))
        do {
            io = try loop.onIO(fd: fd, events: wantedEvents()) { [unowned self] revents in handleIO(revents) }
            interest = wantedEvents()
            connectTimer = try loop.after(options.connectTimeout) { [unowned self] in
                withExtendedLifetime(self) {
                    fail("no CONNACK within \(options.connectTimeout / 1_000_000) s")
                    deliver()
                }
            }
        } catch {
            throw .client("cannot watch the MQTT socket: \(error)")
        }
    }

    // MARK: Use

    /// Queues a QoS 1 message; returns its message id, whose PUBACK comes as `acknowledged`.
    func publish(topic: String, payload: [UInt8], retain: Bool) throws(FleetError) -> Int32 {
        guard let handle, !isClosed else { throw .notConnected }
        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes {
            library.publish(handle, &mid, topic, Int32($0.count), $0.baseAddress, 1, retain)
        }
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            let reason = reason(for: rc, after: "mosquitto_publish")
            guard PublishFailure(code: rc) == .message else {
                fail(reason)
                deliverSoon()
                throw .notConnected
            }
            throw .publish(topic: topic, reason: reason)
        }
        keepAlive?.wrote(at: EventLoop.monotonicNow)
        updateInterest()
        return mid
    }

    /// Subscribes to `topics` at QoS 1; the SUBACK comes as `subscribed` with the returned message id.
    func subscribe(_ topics: [String]) throws(FleetError) -> [Int32] {
        guard let handle, !isClosed else { throw .notConnected }
        var mids: [Int32] = []
        for topic in topics {
            var mid: Int32 = 0
            let rc = library.subscribe(handle, &mid, topic, 1)
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                throw .client("subscribing to \(topic): \(reason(for: rc, after: "mosquitto_subscribe"))")
            }
            mids.append(mid)
        }
        updateInterest()
        return mids
    }

    /// Gives the connection up (the owner found it useless): reported as `disconnected` on the next loop
    /// iteration, as any failure.
    func abandon(_ reason: String) {
        fail(reason)
        deliverSoon()
    }

    /// Says goodbye: queues DISCONNECT and writes what it can without waiting. A clean disconnect makes the
    /// broker discard the last will, so the owner publishes `offline` itself first.
    func close() {
        guard let handle, !isClosed else { return }
        if isConnected {
            _ = library.disconnect(handle)
            _ = library.loopWrite(handle, 1)
        }
        isClosed = true
        isConnected = false
        destroy()
    }

    // MARK: Driving libmosquitto

    private func handleIO(_ revents: IOEvents) {
        // The owner may drop this connection when it hears of the failure: live until the end of the call.
        withExtendedLifetime(self) { drive(revents) }
    }

    private func drive(_ revents: IOEvents) {
        guard let handle, !isClosed else { return }
        var rc = MOSQ_ERR_SUCCESS.rawValue
        // Until CONNACK the TLS handshake may be going on, which libmosquitto advances from its read
        // call whichever way the socket became ready.
        let readable = !revents.isDisjoint(with: [.readable, .error, .hangUp])
        if readable || !isConnected {
            rc = library.loopRead(handle, 1)
            keepAlive?.read(at: EventLoop.monotonicNow)
        }
        if rc == MOSQ_ERR_SUCCESS.rawValue, !isClosed, library.socket(handle) >= 0,
            revents.contains(.writable)
        {
            rc = library.loopWrite(handle, 1)
            keepAlive?.wrote(at: EventLoop.monotonicNow)
        }
        // After the read that brought CONNACK has returned: libmosquitto writes its queue from inside it.
        if isConnected, keepAlive == nil { startKeepAlive() }
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            fail(reason(for: rc, after: "mosquitto_loop"))
        } else if library.socket(handle) < 0 {
            fail(library.describe(MOSQ_ERR_CONN_LOST.rawValue))
        } else {
            updateInterest()
        }
        deliver()
    }

    private func startKeepAlive() {
        let interval = UInt64(options.keepAlive) * 1_000_000
        keepAlive = KeepAliveSchedule(interval: interval, start: EventLoop.monotonicNow)
        keepAliveTimer = try? loop.after(interval) { [unowned self] in keepAliveTick() }
    }

    /// When the check is due: libmosquitto sends PINGREQ, or gives up on a broker whose PINGRESP has not
    /// come since the last one. Earlier (the connection wrote or read since the timer was set), the timer
    /// waits for the new due time.
    private func keepAliveTick() {
        withExtendedLifetime(self) { ping() }
    }

    private func ping() {
        guard let handle, !isClosed, var schedule = keepAlive else { return }
        let now = EventLoop.monotonicNow
        guard now >= schedule.due else {
            try? keepAliveTimer?.schedule(after: schedule.due - now)
            return
        }
        let rc = library.loopMisc(handle)
        schedule.checked(at: EventLoop.monotonicNow)
        keepAlive = schedule
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            fail(
                rc == MOSQ_ERR_KEEPALIVE.rawValue
                    ? "no reply from the broker within the keepalive" : reason(for: rc, after: "mosquitto_loop_misc"))
        } else {
            updateInterest()
            try? keepAliveTimer?.schedule(after: schedule.interval)
        }
        deliver()
    }

    private func wantedEvents() -> IOEvents {
        guard let handle else { return [] }
        return library.wantWrite(handle) ? [.readable, .writable] : .readable
    }

    private func updateInterest() {
        let wanted = wantedEvents()
        guard wanted != interest else { return }
        interest = wanted
        try? io?.setIOEvents(wanted)
    }

    private func connectAcknowledged(_ rc: Int32) {
        guard rc == 0 else {
            let text =
                options.protocolVersion == .v5
                ? library.text(library.reasonString(rc)) : library.text(library.connackString(rc))
            fail("the broker refused the connection: \(text)")
            return
        }
        isConnected = true
        connectTimer = nil
        events.append(.connected)
    }

    private func libraryDisconnected(_ rc: Int32) {
        fail(rc == 0 ? "disconnected" : reason(for: rc, after: "disconnect"))
    }

    /// Ends the connection once: stops watching the socket and records why. It may run inside a
    /// libmosquitto callback, so the owner hears of it only from `deliver`, and the library object goes
    /// only when the owner drops this connection.
    private func fail(_ reason: String) {
        guard !isClosed else { return }
        isClosed = true
        isConnected = false
        try? io?.setEnabled(false)
        keepAliveTimer = nil
        connectTimer = nil
        events.append(.disconnected(reason: reason, tls: tlsFailed))
    }

    /// Tells the owner what the last library calls recorded; called once they have returned.
    private func deliver() {
        deferredDelivery = nil
        while !events.isEmpty {
            onEvent(events.removeFirst())
        }
    }

    /// For a failure found inside `publish`: the owner hears of it on the next loop iteration, not in the
    /// middle of its own call.
    private func deliverSoon() {
        guard deferredDelivery == nil else { return }
        deferredDelivery = try? loop.onNextIteration { [unowned self] in withExtendedLifetime(self) { deliver() } }
    }

    private func destroy() {
        io = nil
        deferredDelivery = nil
        keepAliveTimer = nil
        connectTimer = nil
        if let handle { library.destroy(handle) }
        handle = nil
    }

    // MARK: Errors

    private func check(_ rc: Int32, _ what: String) throws(FleetError) {
        if rc != MOSQ_ERR_SUCCESS.rawValue { throw .client("\(what): \(library.describe(rc))") }
    }

    /// libmosquitto's error for `call`, which has just returned `rc`: for a system error the errno it
    /// left (read through `SystemError`, as every errno is; `MOSQ_ERR_EAI` leaves getaddrinfo's code
    /// there), and libmosquitto's own last log line (where OpenSSL's verification failure is told) when it
    /// has one.
    private func reason(for rc: Int32, after call: String) -> String {
        let system = SystemError(call)
        var text =
            rc == MOSQ_ERR_ERRNO.rawValue && system.errno != 0
            ? system.reason : library.describe(rc)
        if rc == MOSQ_ERR_EAI.rawValue {
            text = "cannot resolve \(broker.host): \(String(cString: gai_strerror(system.errno)))"
        }
        if rc == MOSQ_ERR_TLS.rawValue || rc == MOSQ_ERR_TLS_HANDSHAKE.rawValue
            || (broker.tls && rc == MOSQ_ERR_ERRNO.rawValue && system.errno == EPROTO)
        {
            tlsFailed = true
            text = "TLS: " + text
            if let detail = lastLibraryError { text += " (\(detail))" }
        }
        return text
    }

    /// Whose fault a failed `mosquitto_publish` is. Only what is wrong with the message itself skips it: a
    /// write error on the link (`MOSQ_ERR_TLS` on a TLS link since libmosquitto 2.0.16, `ERRNO`, `CONN_LOST`),
    /// a broker that offers no QoS 1, memory, or a code unknown here ends the connection instead, and the
    /// message goes again on the next one: skipping it would lose an event placed has acknowledged.
    enum PublishFailure: Equatable {
        /// The message cannot be sent as it is (too large, a topic or payload libmosquitto refuses).
        case message
        /// The connection, or this broker, cannot take it now.
        case connection

        init(code: Int32) {
            switch code {
            case MOSQ_ERR_INVAL.rawValue, MOSQ_ERR_PAYLOAD_SIZE.rawValue, MOSQ_ERR_MALFORMED_UTF8.rawValue,
                MOSQ_ERR_OVERSIZE_PACKET.rawValue, MOSQ_ERR_RETAIN_NOT_SUPPORTED.rawValue:
                self = .message
            default:
                self = .connection
            }
        }
    }

    private static func from(_ context: UnsafeMutableRawPointer?) -> MQTTConnection {
        Unmanaged<MQTTConnection>.fromOpaque(context!).takeUnretainedValue()
    }
}
