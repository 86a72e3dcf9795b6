/// Where placed-web listens: `ADDRESS:PORT` with a numeric IPv4 address, a bracketed IPv6 address
/// (`[::1]:8080`) or `localhost`, which is 127.0.0.1.
public struct ListenAddress: Equatable, Sendable, CustomStringConvertible {
    public enum Family: Sendable { case ipv4, ipv6 }

    /// The numeric address, without brackets.
    public let host: String
    public let port: UInt16
    public let family: Family

    public init(host: String, port: UInt16, family: Family) {
        self.host = host
        self.port = port
        self.family = family
    }

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    public init(parsing text: String) throws(ParseError) {
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw ParseError(description: "\(text): an IPv6 address is written [ADDRESS]:PORT")
            }
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = text[text.index(close, offsetBy: 2)...]
            family = .ipv6
            guard Self.isIPv6(hostPart) else { throw ParseError(description: "\(text): not an IPv6 address") }
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw ParseError(description: "\(text): expected ADDRESS:PORT, such as 127.0.0.1:8080")
            }
            hostPart = text[..<colon] == "localhost" ? "127.0.0.1" : text[..<colon]
            portPart = text[text.index(after: colon)...]
            family = .ipv4
            guard Self.isIPv4(hostPart) else {
                throw ParseError(description: "\(text): \(text[..<colon]) is not an IPv4 address or localhost")
            }
        }
        guard let port = UInt16(portPart), port > 0 else {
            throw ParseError(description: "\(text): the port must be 1 to 65535")
        }
        host = String(hostPart)
        self.port = port
    }

    /// 127.0.0.0/8 or ::1: reachable from this machine only.
    public var isLoopback: Bool {
        switch family {
        case .ipv4: host.split(separator: ".").first == "127"
        case .ipv6: host == "::1" || host == "0:0:0:0:0:0:0:1"
        }
    }

    /// 0.0.0.0 or ::: every address of the machine.
    public var isWildcard: Bool { host == "0.0.0.0" || host == "::" }

    public var description: String { family == .ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    static func isIPv4(_ text: Substring) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy { $0.count <= 3 && !$0.isEmpty && $0.allSatisfy(\.isASCIIDigit) && Int($0)! <= 255 }
    }

    static func isIPv6(_ text: Substring) -> Bool {
        !text.isEmpty && text.contains(":") && text.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
