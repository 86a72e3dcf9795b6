import PlacedCore

/// One MQTT broker of the fleet export's `Broker=` list: `mqtt://host[:port]` or `mqtts://host[:port]`.
public struct BrokerAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// `mqtts://`: TLS, verified against the configured CA.
    public var tls: Bool

    public init(host: String, port: Int, tls: Bool) {
        self.host = host
        self.port = port
        self.tls = tls
    }

    /// The URL as written back: scheme, host (IPv6 in brackets), port.
    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(tls ? "mqtts" : "mqtt")://\(shownHost):\(port)"
    }

    /// Parses one URL. Credentials in the URL are refused: a password belongs in a systemd credential,
    /// never in the configuration file.
    public init(parsing text: String) throws(BrokerAddressError) {
        let scheme: String
        var rest: Substring
        if text.hasPrefix("mqtts://") {
            scheme = "mqtts"
            rest = text.dropFirst(8)
        } else if text.hasPrefix("mqtt://") {
            scheme = "mqtt"
            rest = text.dropFirst(7)
        } else {
            throw .unsupportedScheme(text)
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("@") else { throw .credentialsInURL(text) }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else { throw .pathInURL(text) }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw .invalidHost(text) }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .invalidHost(text) }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty, !host.contains(" ") else { throw .invalidHost(text) }
        var port = scheme == "mqtts" ? 8883 : 1883
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else { throw .invalidPort(text) }
            port = value
        }
        self.init(host: String(host), port: port, tls: scheme == "mqtts")
    }
}

public enum BrokerAddressError: Error, Equatable, CustomStringConvertible {
    case unsupportedScheme(String)
    case credentialsInURL(String)
    case pathInURL(String)
    case invalidHost(String)
    case invalidPort(String)

    public var description: String {
        switch self {
        case let .unsupportedScheme(url): "broker '\(url)': the URL must start with mqtt:// or mqtts://"
        case let .credentialsInURL(url):
            "broker '\(url)': no user or password in the URL (Username= and PasswordCredential= instead)"
        case let .pathInURL(url): "broker '\(url)': a broker URL has no path, query or fragment"
        case let .invalidHost(url): "broker '\(url)': no valid host"
        case let .invalidPort(url): "broker '\(url)': the port must be 1-65535"
        }
    }
}

/// The messages handed to a broker on one connection and not yet acknowledged, in the order they were
/// sent. The outbox cursor may move to a message only once it and every message before it are
/// acknowledged, whatever order the acknowledgements come in.
struct DeliveryWindow: Sendable, Equatable {
    /// Most messages in flight at once.
    let capacity: Int
    /// Sequence numbers sent, oldest first, with whether each is acknowledged.
    private var inFlight: [(sequence: Int64, acknowledged: Bool)] = []
    private var head = 0
    /// The newest sequence number handed out: the next read of the outbox starts after it.
    private(set) var lastSent: Int64
    /// Every message up to this one is acknowledged.
    private(set) var acknowledgedThrough: Int64

    init(capacity: Int, after acknowledged: Int64) {
        self.capacity = max(1, capacity)
        lastSent = acknowledged
        acknowledgedThrough = acknowledged
    }

    static func == (a: DeliveryWindow, b: DeliveryWindow) -> Bool {
        a.capacity == b.capacity && a.lastSent == b.lastSent && a.acknowledgedThrough == b.acknowledgedThrough
            && a.inFlight[a.head...].elementsEqual(b.inFlight[b.head...]) { $0 == $1 }
    }

    var count: Int { inFlight.count - head }
    var room: Int { capacity - count }
    var isEmpty: Bool { count == 0 }

    /// Records that `sequence` (greater than every one before) was handed to the broker.
    mutating func sent(_ sequence: Int64) {
        precondition(sequence > lastSent, "messages are sent in order")
        inFlight.append((sequence, false))
        lastSent = sequence
    }

    /// Marks `sequence` acknowledged; returns the new `acknowledgedThrough` when it moved.
    mutating func acknowledge(_ sequence: Int64) -> Int64? {
        guard let index = inFlight[head...].firstIndex(where: { $0.sequence == sequence }) else { return nil }
        inFlight[index].acknowledged = true
        let before = acknowledgedThrough
        while head < inFlight.count, inFlight[head].acknowledged {
            acknowledgedThrough = inFlight[head].sequence
            head += 1
        }
        if head > 64, head * 2 > inFlight.count {
            inFlight.removeFirst(head)
            head = 0
        }
        return acknowledgedThrough == before ? nil : acknowledgedThrough
    }

    /// The messages in flight and not acknowledged, oldest first.
    var unacknowledged: [Int64] { inFlight[head...].filter { !$0.acknowledged }.map(\.sequence) }

    /// Gives up on `sequence`, the next message after the cursor, with nothing in flight: the cursor moves
    /// over it as if it were acknowledged (a message the broker will never take).
    mutating func giveUp(on sequence: Int64) {
        precondition(isEmpty && sequence > acknowledgedThrough, "only the next message, with nothing in flight")
        acknowledgedThrough = sequence
        lastSent = sequence
    }

    /// The connection is gone: whatever was not acknowledged is sent again, in order, from the cursor.
    mutating func restart() {
        inFlight.removeAll(keepingCapacity: true)
        head = 0
        lastSent = acknowledgedThrough
    }
}

/// What a PUBACK says of the message it answers, from its MQTT 5 reason code (MQTT 3.1.1 has none: 0).
/// Only a refusal about the message itself is for good; a refusal the broker may not repeat (quota
/// exceeded, an unspecified or implementation-specific error, or a code unknown here) is for now: the
/// message goes again later, since skipping it would lose an event placed acknowledged.
enum PublishAcknowledgement: Sendable, Equatable {
    /// 0x00 success, 0x10 no matching subscribers: the broker has it.
    case accepted
    /// 0x87 not authorized, 0x90 topic name invalid, 0x95 packet too large, 0x99 payload format invalid.
    case refusedForGood
    /// 0x80 unspecified error, 0x83 implementation specific error, 0x91 packet identifier in use, 0x97
    /// quota exceeded, and anything else of 0x80 or more.
    case refusedForNow

    init(reasonCode: Int) {
        switch reasonCode {
        case ..<0x80: self = .accepted
        case 0x87, 0x90, 0x95, 0x99: self = .refusedForGood
        default: self = .refusedForNow
        }
    }
}

/// Which broker of the list to try next, and after how long: a broker that fails hands over to the next
/// one at once, and only once every broker failed in a row does the capped backoff apply.
///
/// A broker accepting the connection proves little: one that accepts and then drops it (a second device
/// with the same client id, a rate limit) would be tried again at once, forever. The failures in a row and
/// the backoff start over only when a connection proved the link works: a message acknowledged on it, or
/// the connection up for `stablePeriod`.
struct BrokerRotation: Sendable, Equatable {
    let count: Int
    /// Microseconds a connection must stay up to count as working when nothing was acknowledged on it.
    let stablePeriod: UInt64
    private(set) var index = 0
    private var failuresInRow = 0
    private var backoff: Backoff
    /// When the current connection was accepted (nil: none is, or it proves nothing), and whether a message
    /// was acknowledged on it.
    private var connectedAt: UInt64?
    private var delivered = false

    init(
        count: Int, stablePeriod: UInt64 = 60_000_000, backoff: Backoff = Backoff(initial: 500_000, maximum: 60_000_000)
    ) {
        self.count = max(1, count)
        self.stablePeriod = stablePeriod
        self.backoff = backoff
    }

    /// The broker at `index` accepted the connection at `time` (microseconds, monotonic): stay with it.
    mutating func connected(at time: UInt64) {
        connectedAt = time
        delivered = false
    }

    /// A message was acknowledged on the current connection: the link works.
    mutating func acknowledged() {
        if connectedAt != nil { delivered = true }
    }

    /// The broker turned a message away for now (quota exceeded, say) at `time` and the connection is given
    /// up for it: what the connection proved before counts, what it delivered after does not, so refusals
    /// in a row back off further each time.
    mutating func refusedForNow(at time: UInt64) {
        if provedItself(at: time) { startOver() }
        connectedAt = nil
        delivered = false
    }

    /// The broker at `index` failed (or its connection ended) at `time`: the next one to try and the delay
    /// in microseconds before trying it.
    mutating func failed(at time: UInt64) -> (index: Int, delay: UInt64) {
        if provedItself(at: time) { startOver() }
        connectedAt = nil
        delivered = false
        failuresInRow += 1
        index = (index + 1) % count
        if failuresInRow < count { return (index, 0) }
        return (index, backoff.next())
    }

    private func provedItself(at time: UInt64) -> Bool {
        guard let connectedAt else { return false }
        return delivered || time &- connectedAt >= stablePeriod
    }

    private mutating func startOver() {
        failuresInRow = 0
        backoff.reset()
    }
}

/// Finds a message the broker will never take: some brokers close the connection instead of refusing a
/// message (mosquitto over TLS when its ACL denies a topic, AWS IoT on any unauthorized publish), and
/// sending it again on every reconnect would hold up everything behind it forever.
///
/// After `suspicionThreshold` connections in a row that ended with messages in flight and nothing
/// acknowledged, messages go one at a time (probing). A message is skipped only on evidence about it, not
/// because the link keeps dropping: each connection first stays quiet for `quietPeriod` (`firstQuiet`,
/// doubled with each strike against the suspect), then the message goes alone. A strike is a close within
/// `quickClose` of that send; `strikes` strikes in a row skip it. Any other end (a close while quiet, a
/// close long after the send) clears the suspect. A connection cut at a fixed age cannot strike at every
/// one of the doubling quiet periods, and one cut at random would have to be cut in a short window after
/// the send, past a longer quiet each time, `strikes` times in a row. Probing ends with the skip, or once
/// `probeLength` messages past its start are acknowledged.
struct PoisonMessageDetector: Sendable, Equatable {
    let suspicionThreshold: Int
    let strikes: Int
    let quickClose: UInt64
    let firstQuiet: UInt64
    let probeLength: Int64
    private var stalledConnections = 0
    private(set) var isProbing = false
    private var probeStart: Int64 = 0
    private var suspect: Int64?
    private var suspectStrikes = 0

    init(
        suspicionThreshold: Int = 2, strikes: Int = 4, quickClose: UInt64 = 2_000_000, firstQuiet: UInt64 = 5_000_000,
        probeLength: Int64 = 64
    ) {
        self.suspicionThreshold = suspicionThreshold
        self.strikes = strikes
        self.quickClose = quickClose
        self.firstQuiet = firstQuiet
        self.probeLength = probeLength
    }

    /// While probing: microseconds a new connection stays quiet before its message goes out (nil when not
    /// probing: send at once).
    var quietPeriod: UInt64? {
        guard isProbing else { return nil }
        return quietPeriod(before: suspect)
    }

    private func quietPeriod(before sequence: Int64?) -> UInt64 {
        let doublings = sequence != nil && sequence == suspect ? min(suspectStrikes, 8) : 0
        return firstQuiet << UInt64(doublings)
    }

    /// Everything up to `sequence` is acknowledged.
    mutating func acknowledged(through sequence: Int64) {
        if let suspect, suspect <= sequence { clearSuspect() }
        if isProbing, sequence - probeStart >= probeLength, suspect == nil {
            isProbing = false
            stalledConnections = 0
        }
    }

    /// A connection ended. `progressed`: something was acknowledged on it. `inFlight`: the messages
    /// unacknowledged at the end, oldest first. `sinceLastSend`: microseconds from the newest send to the
    /// end. `upBeforeSend`: microseconds the connection had been up when the newest message was sent.
    /// `cursor`: everything up to it is acknowledged. Returns the sequence number to skip, if found.
    mutating func connectionEnded(
        progressed: Bool, inFlight: [Int64], sinceLastSend: UInt64, upBeforeSend: UInt64, cursor: Int64
    ) -> Int64? {
        guard isProbing else {
            if progressed || inFlight.isEmpty {
                stalledConnections = 0
            } else {
                stalledConnections += 1
                if stalledConnections >= suspicionThreshold {
                    isProbing = true
                    probeStart = cursor
                }
            }
            return nil
        }
        guard inFlight.count == 1, sinceLastSend <= quickClose, upBeforeSend >= quietPeriod(before: inFlight[0])
        else {
            // Closed while quiet, long after the send, or with no message alone: nothing against a message.
            clearSuspect()
            return nil
        }
        let sequence = inFlight[0]
        suspectStrikes = suspect == sequence ? suspectStrikes + 1 : 1
        suspect = sequence
        guard suspectStrikes >= strikes else { return nil }
        clearSuspect()
        isProbing = false
        stalledConnections = 0
        return sequence
    }

    private mutating func clearSuspect() {
        suspect = nil
        suspectStrikes = 0
    }
}
