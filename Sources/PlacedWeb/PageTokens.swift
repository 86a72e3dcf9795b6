/// The tokens issued with pages: each page load gets a fresh random token in its HTML, and a
/// `POST /select` must send one back. Another origin cannot read the page (same-origin policy), so
/// it cannot learn a token. The newest `capacity` tokens are kept, a used token counting as new:
/// a kiosk page open for days keeps its token while reloads elsewhere come and go.
public struct PageTokens: Sendable {
    public let capacity: Int
    /// Oldest first.
    private var tokens: [String] = []

    public init(capacity: Int = 64) { self.capacity = max(1, capacity) }

    /// A new token from 16 random bytes, as 32 lowercase hex digits.
    public mutating func issue(randomBytes: [UInt8]) -> String {
        precondition(randomBytes.count >= 16, "a token needs 16 random bytes")
        let digits = Array("0123456789abcdef")
        let token = String(randomBytes.prefix(16).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
        tokens.append(token)
        if tokens.count > capacity { tokens.removeFirst(tokens.count - capacity) }
        return token
    }

    /// Whether `token` was issued and is still kept; a valid token is refreshed.
    public mutating func accept(_ token: String?) -> Bool {
        guard let token, token.utf8.count == 32, let index = tokens.firstIndex(of: token) else { return false }
        tokens.append(tokens.remove(at: index))
        return true
    }

    public var count: Int { tokens.count }
}
