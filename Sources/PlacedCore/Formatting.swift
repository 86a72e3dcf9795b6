#if canImport(Glibc)
    import Glibc  // gmtime_r
#endif

/// Text for numbers without Foundation (the daemon links FoundationEssentials at most).
extension Double {
    /// Fixed-point text without Foundation (the daemon links FoundationEssentials at most).
    public func formatted(decimals: Int) -> String {
        guard isFinite else { return description }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(self) * scale).rounded()
        guard scaled < 9e15 else { return description }
        let whole = Int(scaled)
        let intPart = whole / Int(scale)
        let fracPart = whole % Int(scale)
        var frac = String(fracPart)
        while frac.count < decimals { frac = "0" + frac }
        let sign = (self < 0 && whole != 0) ? "-" : ""
        return decimals > 0 ? "\(sign)\(intPart).\(frac)" : "\(sign)\(intPart)"
    }
}

extension BinaryInteger {
    /// Digits in groups of three: 1636 → "1,636".
    public var grouped: String {
        let digits = String(self.magnitude)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return self < 0 ? "-" + result : result
    }
}

/// ISO 8601 in UTC, as the interfaces and the place file state times.
public enum ISO8601 {
    /// `2026-11-29T12:08:46Z`, or with `milliseconds` `2026-11-29T12:08:46.123Z`.
    public static func utc(_ seconds: Double, milliseconds: Bool = false) -> String {
        var whole = time_t(seconds.rounded(.down))
        var parts = tm()
        gmtime_r(&whole, &parts)
        func pad(_ n: Int32, _ width: Int) -> String {
            let digits = String(n)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        var text =
            "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
            + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
        if milliseconds {
            text += ".\(pad(Int32(((seconds - seconds.rounded(.down)) * 1000).rounded(.down)), 3))"
        }
        return text + "Z"
    }
}
