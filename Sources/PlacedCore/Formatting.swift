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
