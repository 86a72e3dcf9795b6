import PlacedCore
import PlacedJSON

/// What the fleet export is doing, for `placectl status`, D-Bus and varlink.
public struct FleetStatus: Sendable, Equatable {
    public enum State: String, Sendable {
        /// Connecting to `broker` (TCP, TLS, waiting for CONNACK).
        case connecting
        /// Connected to `broker`; the backlog drains.
        case connected
        /// Every broker failed in a row: waiting before trying `broker` again.
        case backoff
        /// Not started, or stopped.
        case stopped
    }

    public var state: State = .stopped
    /// The broker connected to or being tried, as its URL.
    public var broker: String?
    /// The device id in topics and message ids.
    public var device: String
    /// Events in the outbox not yet acknowledged by the brokers.
    public var backlog: Int = 0
    /// Messages sent on this connection and not yet acknowledged.
    public var inFlight: Int = 0
    /// The newest sequence number acknowledged, with every one before it.
    public var acknowledged: Int64 = 0
    /// Location and state updates dropped past `Backlog=`, and events the outbox could not store (a full
    /// or read-only disk).
    public var dropped: Int64 = 0
    /// Messages a broker refused (an MQTT 5 PUBACK reason code of 0x80 or more, such as an ACL's "not
    /// authorized"): they are not sent again.
    public var rejected: Int64 = 0
    /// The last failure, until the next successful connection.
    public var lastError: String?

    public init(device: String) { self.device = device }

    /// The varlink `Status` reply's `fleet` object (D-Bus: the same keys in an a{sv}); absent values are
    /// left out.
    public var json: [String: JSON] {
        var object: [String: JSON] = [
            "state": .string(state.rawValue), "device": .string(device), "backlog": .number(Double(backlog)),
            "inFlight": .number(Double(inFlight)), "acknowledged": .number(Double(acknowledged)),
            "dropped": .number(Double(dropped)), "rejected": .number(Double(rejected)),
        ]
        if let broker { object["broker"] = .string(broker) }
        if let lastError { object["lastError"] = .string(lastError) }
        return object
    }

    /// One line for `placectl status`.
    public var summary: String {
        var text = "\(state.rawValue)"
        if let broker { text += state == .connected ? " to \(broker)" : " (\(broker))" }
        text += ", backlog \(backlog)"
        if dropped > 0 { text += ", \(dropped) dropped" }
        if rejected > 0 { text += ", \(rejected) refused by the broker" }
        if let lastError, state != .connected { text += "; last error: \(lastError)" }
        return text
    }
}
