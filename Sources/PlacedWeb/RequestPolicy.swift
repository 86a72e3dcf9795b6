/// Who may use placed-web, decided from the request's headers alone (pure, no I/O).
///
/// - Every request must name, in `Host`, an address placed-web serves: a page on another site that
///   rebinds its DNS name to 127.0.0.1 sends its own name and is refused, so it cannot read the
///   location or the rankings. On a wildcard address (0.0.0.0, ::) any Host is taken.
/// - A `POST` must carry an `Origin` equal to `http://` and that Host: only the kiosk page itself,
///   never a form or script on another origin, may select.
public struct RequestPolicy: Sendable {
    public let address: ListenAddress
    /// The Host values taken, lowercased; nil: any (wildcard address).
    public let hosts: Set<String>?

    public init(address: ListenAddress) {
        self.address = address
        if address.isWildcard {
            hosts = nil
        } else {
            var names = [address.host]
            if address.isLoopback { names += ["localhost", "127.0.0.1", "::1"] }
            var hosts = Set<String>()
            for name in names {
                let written = name.contains(":") ? "[\(name)]" : name
                hosts.insert("\(written):\(address.port)")
                if address.port == 80 { hosts.insert(written) }
            }
            self.hosts = hosts
        }
    }

    /// Refuses a request whose Host names no address placed-web serves.
    public func checkHost(_ host: String?) throws(HTTPFailure) {
        guard let hosts else { return }
        guard let host, hosts.contains(host.lowercased()) else { throw .forbiddenHost }
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
