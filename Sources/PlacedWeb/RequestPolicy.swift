/// Who may use placed-web, decided from the request's headers alone (pure, no I/O).
///
/// - Every request must name, in `Host`, an address placed-web serves, with its port (which may be left
///   out when it is 80): a page on another site that rebinds its DNS name to this machine sends its own
///   name and is refused, so it cannot read the location or the rankings. On a wildcard address (0.0.0.0,
///   ::) that is any IP address (`192.0.2.7:8080`, `[fd00::7]:8080`), `localhost` or the machine's own
///   host name: never a name someone else's DNS answers for.
/// - A `POST` must carry an `Origin` equal to `http://` and that Host: only the kiosk page itself,
///   never a form or script on another origin, may select.
public struct RequestPolicy: Sendable {
    public let address: ListenAddress
    /// The Host values taken as they are, lowercased.
    public let hosts: Set<String>
    /// A wildcard address: any IP address literal with the port is taken too.
    public let takesAnyAddress: Bool

    /// `machineName`: the machine's host name (gethostname), taken on a wildcard address.
    public init(address: ListenAddress, machineName: String? = nil) {
        self.address = address
        var names = [address.host]
        if address.isLoopback { names += ["localhost", "127.0.0.1", "::1"] }
        if address.isWildcard { names = ["localhost"] + (machineName.map { [$0.lowercased()] } ?? []) }
        var hosts = Set<String>()
        for name in names {
            let written = name.contains(":") ? "[\(name)]" : name
            hosts.insert("\(written):\(address.port)")
            if address.port == 80 { hosts.insert(written) }
        }
        self.hosts = hosts
        takesAnyAddress = address.isWildcard
    }

    /// Refuses a request whose Host names no address placed-web serves.
    public func checkHost(_ host: String?) throws(HTTPFailure) {
        guard let host = host?.lowercased() else { throw .forbiddenHost }
        if hosts.contains(host) || (takesAnyAddress && isAddressWithPort(host)) { return }
        throw .forbiddenHost
    }

    /// `ADDRESS:PORT` or `[ADDRESS]:PORT` with this policy's port (or no port when it is 80), the address an
    /// IPv4 or IPv6 literal: what a browser sends for a URL that names no host, which DNS cannot rebind.
    private func isAddressWithPort(_ host: String) -> Bool {
        let name: Substring
        let port: Substring?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            name = host[host.index(after: host.startIndex)..<close]
            let after = host[host.index(after: close)...]
            guard after.isEmpty || after.hasPrefix(":") else { return false }
            port = after.isEmpty ? nil : after.dropFirst()
            guard ListenAddress.isIPv6(name) else { return false }
        } else {
            let parts = host.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            name = parts[0]
            port = parts.count == 2 ? parts[1] : nil
            guard ListenAddress.isIPv4(name) else { return false }
        }
        guard let port else { return address.port == 80 }
        return UInt16(port) == address.port && port.allSatisfy(\.isASCIIDigit)
    }

    /// Refuses a state-changing request that does not come from the page's own origin.
    public func checkOrigin(_ origin: String?, host: String?) throws(HTTPFailure) {
        guard let origin, let host, origin.lowercased() == "http://" + host.lowercased() else {
            throw .forbiddenOrigin
        }
    }

    /// Whether a `Content-Type` header names JSON (`application/json`, parameters allowed). A form on
    /// another site cannot send this type without a CORS preflight, which placed-web never grants.
    public static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let type = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return type.trimmingSpaces.lowercased() == "application/json"
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
