/// The drop-in `placectl fleet-dropin` writes: placed.service allows only localhost
/// (`IPAddressDeny=any`, `IPAddressAllow=localhost`), so a remote broker needs its addresses allowed,
/// and a password (or a client key only root may read) comes in as a systemd credential. Pure: the
/// command resolves the names and reads the files; this says what the drop-in holds.
public enum FleetDropIn {
    public static let path = "/etc/systemd/system/placed.service.d/fleet.conf"
    /// Where the drop-in expects the credential files, by name.
    public static let credentialsDirectory = "/etc/placed/credentials"
    /// Where systemd puts placed's credentials at run time (`$CREDENTIALS_DIRECTORY`).
    public static let runtimeCredentials = "/run/credentials/placed.service/"

    /// One broker of `Broker=`, with the addresses its host has now.
    public struct Broker: Equatable, Sendable {
        public var url: String
        public var host: String
        public var addresses: [String]

        public init(url: String, host: String, addresses: [String]) {
            self.url = url
            self.host = host
            self.addresses = addresses
        }

        /// Whether the host is a name (looked up at each connection attempt), not an address.
        public var isName: Bool { !addresses.contains(host) }
    }

    /// The `[Fleet]` keys and values of `placed --check-config`'s output, in order.
    public static func fleetSettings(fromCheckConfig text: String) -> [(key: String, value: String)] {
        var inFleet = false
        var settings: [(key: String, value: String)] = []
        for line in text.split(separator: "\n").map(String.init) {
            if line.hasPrefix("[") {
                inFleet = line == "[Fleet]"
            } else if inFleet, let equals = line.firstIndex(of: "=") {
                settings.append((String(line[..<equals]), String(line[line.index(after: equals)...])))
            }
        }
        return settings
    }

    /// The host of `mqtt://HOST[:PORT]` or `mqtts://[IPV6]:PORT`, as placed writes them back.
    public static func host(ofBroker url: String) -> String? {
        let rest: Substring
        if url.hasPrefix("mqtts://") {
            rest = url.dropFirst(8)
        } else if url.hasPrefix("mqtt://") {
            rest = url.dropFirst(7)
        } else {
            return nil
        }
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            return String(rest[rest.index(after: rest.startIndex)..<close])
        }
        return String(rest.split(separator: ":", maxSplits: 1).first ?? "")
    }

    /// The `nameserver` addresses of resolv.conf.
    public static func nameservers(fromResolvConf text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            return words.count >= 2 && words[0] == "nameserver" ? String(words[1]) : nil
        }
    }

    /// Addresses placed.service allows already (`IPAddressAllow=localhost`).
    public static func isLoopback(_ address: String) -> Bool {
        address == "::1" || address.hasPrefix("127.") || address.hasPrefix("::ffff:127.")
    }

    /// The credentials the drop-in loads: the password's, and a client key placed reads from
    /// `$CREDENTIALS_DIRECTORY` (`KeyFile=/run/credentials/placed.service/NAME`).
    public static func credentials(in settings: [(key: String, value: String)]) -> [String] {
        var names: [String] = []
        for (key, value) in settings {
            if key == "PasswordCredential" { names.append(value) }
            if key == "KeyFile" || key == "CertFile", value.hasPrefix(runtimeCredentials) {
                names.append(String(value.dropFirst(runtimeCredentials.count)))
            }
        }
        return names
    }

    /// The drop-in's text. `nameservers`: resolv.conf's, allowed when a broker is a name (placed looks it
    /// up at each connection attempt); loopback ones need nothing.
    public static func render(
        brokers: [Broker], nameservers: [String], credentials: [String], directory: String = credentialsDirectory
    ) -> String {
        var lines = [
            "# \(path), written by placectl fleet-dropin from [Fleet].",
            "# placed.service allows only localhost (IPAddressDeny=any, IPAddressAllow=localhost): this lets it",
            "# reach the brokers, at the addresses their names have now (run placectl fleet-dropin again when",
            "# they change), and gives it its credentials. Then: systemctl daemon-reload; systemctl restart placed",
            "[Service]",
        ]
        for broker in brokers {
            let remote = broker.addresses.filter { !isLoopback($0) }
            if remote.isEmpty {
                lines.append("# \(broker.url): on this machine, allowed already")
            } else {
                lines.append("# \(broker.url)" + (broker.isName ? " (\(broker.host) now)" : ""))
                lines.append("IPAddressAllow=" + remote.joined(separator: " "))
            }
        }
        let dns = nameservers.filter { !isLoopback($0) }
        // A name that is only loopback comes from /etc/hosts (localhost), not from DNS.
        if brokers.contains(where: { $0.isName && $0.addresses.contains { !isLoopback($0) } }), !dns.isEmpty {
            lines.append("# The DNS servers of /etc/resolv.conf: broker names are looked up at each connection")
            lines.append("IPAddressAllow=" + dns.joined(separator: " "))
        }
        for name in credentials {
            let file = directory.hasSuffix("/") ? directory + name : directory + "/" + name
            lines.append("# Credential \(name), read by placed from $CREDENTIALS_DIRECTORY (\(file): root only)")
            lines.append("LoadCredential=\(name):\(file)")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
