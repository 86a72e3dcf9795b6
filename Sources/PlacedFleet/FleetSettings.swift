import PlacedCore

/// MQTT protocol level (`Protocol=`).
public enum MQTTProtocolVersion: String, Sendable, Equatable, CaseIterable {
    case v311 = "3.1.1"
    case v5 = "5"
}

/// The `[Fleet]` section: where and how the fleet export publishes. Each key has a parser (`set(_:to:)`)
/// that names what is wrong; `validate()` checks the keys against each other.
public struct FleetSettings: Sendable, Equatable {
    /// `Broker=`: tried in turn, the next one when a broker fails (failover across a cluster). Empty: the
    /// fleet export is off.
    public var brokers: [BrokerAddress] = []
    /// `DeviceId=`: the device's name in topics and message ids. Nil: `DeviceIdentity.machineSpecific()`.
    public var deviceID: String?
    /// `CAFile=`: the CA certificates that may sign the brokers' certificates (mqtts://). Nil: the system's.
    public var caFile: String?
    /// `CertFile=`, `KeyFile=`: a client certificate and its key (PEM), both or neither.
    public var certFile: String?
    public var keyFile: String?
    /// `Username=`.
    public var username: String?
    /// `PasswordCredential=`: the name of a systemd credential (`LoadCredential=NAME:/path` in the unit)
    /// holding the password. The password itself is never in the configuration and never logged.
    public var passwordCredential: String?
    /// `KeepAlive=`: seconds between pings on an idle connection, 5-65535; a broker silent for one more
    /// interval is given up and the next one tried.
    public var keepAlive = 60
    /// `Protocol=`: 3.1.1 (default: every broker speaks it, NATS and RabbitMQ only it) or 5.
    public var protocolVersion = MQTTProtocolVersion.v311
    /// `OwnTracks=`: also publish OwnTracks `location` and `transition` messages.
    public var ownTracks = false
    /// `OwnTracksUser=`: the user part of `owntracks/<user>/<device>`.
    public var ownTracksUser = "placed"
    /// `Backlog=`: most outbox rows kept while the brokers are out of reach; past it the oldest location
    /// and state updates are dropped (never a marker or a visit).
    public var backlog = 100_000
    /// `AcceptCommands=`: subscribe to `placed/<device>/cmd` (and with `OwnTracks=yes` to
    /// `owntracks/<user>/<device>/cmd`) and apply the own places the fleet sends (`FleetCommand`).
    public var acceptCommands = false
    /// Messages in flight (sent, not yet acknowledged) on a connection.
    public var inFlight = 64

    public static let keys = [
        "Broker", "DeviceId", "CAFile", "CertFile", "KeyFile", "Username", "PasswordCredential", "KeepAlive",
        "Protocol", "OwnTracks", "OwnTracksUser", "Backlog", "AcceptCommands",
    ]

    public init() {}

    public var isEnabled: Bool { !brokers.isEmpty }

    /// Sets one key from its configuration text. `Broker=` takes one or more URLs separated by spaces,
    /// and an empty value clears the list, as systemd's list settings do.
    public mutating func set(_ key: String, to value: String) throws(FleetSettingsError) {
        switch key {
        case "Broker":
            let urls = value.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "," }).map(String.init)
            if urls.isEmpty {
                brokers = []
                return
            }
            for url in urls {
                do {
                    brokers.append(try BrokerAddress(parsing: url))
                } catch {
                    throw .invalid(key: key, reason: error.description)
                }
            }
        case "DeviceId": deviceID = try Self.topicLevel(value, key: key)
        case "CAFile": caFile = try Self.absolutePath(value, key: key)
        case "CertFile": certFile = try Self.absolutePath(value, key: key)
        case "KeyFile": keyFile = try Self.absolutePath(value, key: key)
        case "Username":
            guard !value.isEmpty, value.utf8.count <= 65535 else {
                throw .invalid(key: key, reason: "must be 1-65535 bytes")
            }
            username = value
        case "PasswordCredential":
            guard !value.isEmpty, value.utf8.count <= 255, !value.contains("/"), value != ".", value != ".." else {
                throw .invalid(key: key, reason: "'\(value)' is not a credential name (LoadCredential=NAME:PATH)")
            }
            passwordCredential = value
        case "KeepAlive":
            guard let seconds = Int(value), (5...65535).contains(seconds) else {
                throw .invalid(key: key, reason: "'\(value)' is not a whole number of seconds 5-65535")
            }
            keepAlive = seconds
        case "Protocol":
            guard let version = MQTTProtocolVersion(rawValue: value == "3" ? "3.1.1" : value) else {
                throw .invalid(key: key, reason: "'\(value)' is not 3.1.1 or 5")
            }
            protocolVersion = version
        case "OwnTracks":
            guard let flag = Self.boolean(value) else {
                throw .invalid(key: key, reason: "'\(value)' is not yes or no")
            }
            ownTracks = flag
        case "OwnTracksUser": ownTracksUser = try Self.topicLevel(value, key: key)
        case "AcceptCommands":
            guard let flag = Self.boolean(value) else {
                throw .invalid(key: key, reason: "'\(value)' is not yes or no")
            }
            acceptCommands = flag
        case "Backlog":
            guard let rows = Int(value.replacingUnderscores), (1...10_000_000).contains(rows) else {
                throw .invalid(key: key, reason: "'\(value)' is not a number of events 1-10000000")
            }
            backlog = rows
        default:
            throw .unknownKey(key)
        }
    }

    /// Key `key`'s value as `set(_:to:)` takes it back (`placed --check-config`); nil when unset.
    public func text(of key: String) -> String? {
        switch key {
        case "Broker": brokers.isEmpty ? nil : brokers.map(\.description).joined(separator: " ")
        case "DeviceId": deviceID
        case "CAFile": caFile
        case "CertFile": certFile
        case "KeyFile": keyFile
        case "Username": username
        case "PasswordCredential": passwordCredential
        case "KeepAlive": String(keepAlive)
        case "Protocol": protocolVersion.rawValue
        case "OwnTracks": ownTracks ? "yes" : "no"
        case "OwnTracksUser": ownTracksUser
        case "Backlog": String(backlog)
        case "AcceptCommands": acceptCommands ? "yes" : "no"
        default: nil
        }
    }

    /// Checks the keys together; call after the last `set`.
    public func validate() throws(FleetSettingsError) {
        guard isEnabled else { return }
        if (certFile == nil) != (keyFile == nil) {
            throw .inconsistent("CertFile= and KeyFile= go together: the client certificate needs its key")
        }
        if passwordCredential != nil, username == nil {
            throw .inconsistent("PasswordCredential= needs Username=")
        }
        let tls = brokers.contains { $0.tls }
        if !tls, caFile != nil || certFile != nil {
            throw .inconsistent("CAFile=, CertFile= and KeyFile= apply to mqtts:// brokers, and none is listed")
        }
        if passwordCredential != nil, brokers.contains(where: { !$0.tls && !$0.isLoopback }) {
            throw .inconsistent("a password would cross the network in clear text: use mqtts:// for remote brokers")
        }
    }

    /// The identity of the broker configuration, for the outbox cursor: the device id and the broker list.
    /// A new configuration gets everything still in the outbox.
    public func configurationKey(device: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in ([device] + brokers.map(\.description)).joined(separator: "\n").utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        var hex = String(hash, radix: 16)
        while hex.count < 16 { hex = "0" + hex }
        return "fnv1a64:" + hex
    }

    /// A single MQTT topic level: no separators or wildcards, printable.
    static func topicLevel(_ value: String, key: String) throws(FleetSettingsError) -> String {
        let allowed = value.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
        }
        guard !value.isEmpty, value.utf8.count <= 64, allowed else {
            throw .invalid(key: key, reason: "'\(value)' must be 1-64 letters, digits, '-', '_' or '.'")
        }
        return value
    }

    static func absolutePath(_ value: String, key: String) throws(FleetSettingsError) -> String {
        guard value.hasPrefix("/") else { throw .invalid(key: key, reason: "'\(value)' is not an absolute path") }
        return value
    }

    static func boolean(_ value: String) -> Bool? {
        switch value.lowercased() {
        case "yes", "true", "on", "1": true
        case "no", "false", "off", "0": false
        default: nil
        }
    }
}

extension BrokerAddress {
    /// 127.0.0.0/8, ::1 or localhost: traffic that never leaves the machine.
    public var isLoopback: Bool { host == "localhost" || host == "::1" || host.hasPrefix("127.") }
}

extension String {
    fileprivate var replacingUnderscores: String { String(filter { $0 != "_" }) }
}

public enum FleetSettingsError: Error, Equatable, CustomStringConvertible {
    case unknownKey(String)
    case invalid(key: String, reason: String)
    case inconsistent(String)

    public var description: String {
        switch self {
        case let .unknownKey(key): "[Fleet] has no key \(key)= (known: \(FleetSettings.keys.joined(separator: ", ")))"
        case let .invalid(key, reason): "[Fleet] \(key)=: \(reason)"
        case let .inconsistent(reason): "[Fleet]: \(reason)"
        }
    }
}

/// Why the fleet export could not do something.
public enum FleetError: Error, Equatable, CustomStringConvertible {
    case configuration(String)
    case credential(String)
    case client(String)
    case connect(broker: String, reason: String)
    case publish(topic: String, reason: String)
    case notConnected

    public var description: String {
        switch self {
        case let .configuration(reason): "fleet export: \(reason)"
        case let .credential(reason): "fleet export: \(reason)"
        case let .client(reason): "fleet export: libmosquitto: \(reason)"
        case let .connect(broker, reason): "fleet export: cannot connect to \(broker): \(reason)"
        case let .publish(topic, reason): "fleet export: cannot publish on \(topic): \(reason)"
        case .notConnected: "fleet export: not connected"
        }
    }
}
