import PlacedTestSupport
import Testing

@testable import PlacedJSON

/// ShortestDouble must write exactly what `Double.description` writes (the bytes of every reply that
/// carries numbers were made by `description` before), and what it writes must read back as the same
/// double.
@Suite struct ShortestDoubleTests {
    /// What `format` writes.
    private func formatted(_ value: Double) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { text in
            let count = ShortestDouble.format(value, into: text.baseAddress!)
            return String(decoding: UnsafeBufferPointer(rebasing: text[..<count]), as: UTF8.self)
        }
    }

    private func appended(_ value: Double) -> String {
        var output: [UInt8] = [UInt8(ascii: "[")]
        ShortestDouble.append(value, to: &output)
        return String(decoding: output.dropFirst(), as: UTF8.self)
    }

    /// Checks `values` against `description`; returns how many were checked.
    @discardableResult
    private func expectDescription(_ values: some Sequence<Double>) -> Int {
        var checked = 0
        var mismatches = 0
        for value in values where value.isFinite {
            checked += 1
            let text = formatted(value)
            if text != value.description {
                mismatches += 1
                if mismatches <= 10 {
                    Issue.record("\(value.bitPattern): wrote \(text), description \(value.description)")
                }
            }
        }
        #expect(mismatches == 0)
        return checked
    }

    @Test func writesWhatDescriptionWritesForRandomBitPatterns() {
        var rng = SplitMix64(seed: 19)
        #expect(expectDescription((0..<2_000_000).lazy.map { _ in Double(bitPattern: rng.next()) }) > 1_990_000)
        // Random significands at every exponent, doubles near the ends of their binades.
        expectDescription(
            (0..<1_000_000).lazy.map { _ in
                let exponent = UInt64(rng.next() % 2047) << 52
                let significand = rng.next() % 4 == 0 ? rng.next() % 64 : rng.next() & (1 << 52 - 1)
                return Double(bitPattern: exponent | significand)
            })
    }

    @Test func writesWhatDescriptionWritesForTheWiresNumbers() {
        var rng = SplitMix64(seed: 20)
        // Coordinates (stored at 1e-7 degrees and computed), distances and likelihoods, as replies carry.
        expectDescription(
            (0..<200_000).lazy.map { _ in Double(Int64.random(in: -1_800_000_000...1_800_000_000, using: &rng)) / 1e7 })
        expectDescription((0..<200_000).lazy.map { _ in rng.uniform(in: -180...180) })
        expectDescription((0..<200_000).lazy.map { _ in rng.uniform(in: 0...5_000) })
        expectDescription((0..<200_000).lazy.map { _ in rng.uniform(in: 0...1) })
        expectDescription((0..<200_000).lazy.map { _ in rng.uniform(in: 0...1e-3) })
    }

    /// Decimals of one to nine places up to the 10^15 bound of `eightDecimals`, and their neighbours.
    @Test func writesWhatDescriptionWritesForShortDecimals() {
        var rng = SplitMix64(seed: 21)
        let powers = (0...9).map { Double("1e\($0)")! }
        let values = (0..<400_000).lazy.map { _ -> Double in
            let digits = Int(rng.next() % 16) + 1
            let integer = Double(rng.next() % UInt64(Double("1e\(digits)")!))
            let value = integer / powers[Int(rng.next() % 10)]
            switch rng.next() % 4 {
            case 0: return value.nextUp
            case 1: return value.nextDown
            default: return value
            }
        }
        expectDescription(values)
    }

    @Test func writesWhatDescriptionWritesAtTheEdges() {
        var values: [Double] = [
            0, -0.0, 0.1, 0.2, 0.3, 1.5, -2.5e-7, 0.001, 0.0001, 0.00001, 0.000123, 1e-7, 123.456, 60.1699,
            1e15, 1e16, 1e20, 1e300, 1e-300, 2.220446049250313e-16, 9_007_199_254_740_990, 9_007_199_254_740_992,
            9_007_199_254_740_994, 18_014_398_509_481_984, 4_503_599_627_370_497.5, 123_456_789_012_345_678,
            .leastNonzeroMagnitude, .leastNormalMagnitude, .greatestFiniteMagnitude, .pi, .ulpOfOne,
        ]
        // Every power of two with its neighbours (where the lower boundary is closer), denormals included.
        for exponent in -1074...1023 {
            let power = Double(sign: .plus, exponent: exponent, significand: 1)
            values += [power, power.nextUp, power.nextDown, -power]
        }
        // Powers of ten and the doubles next to them, where the decimal layout changes.
        for exponent in -323...308 {
            let power = Double("1e\(exponent)")!
            values += [power, power.nextUp, power.nextDown, Double("9.999999999999999e\(exponent)") ?? 1]
        }
        // Integers and halves about 2^53, where description changes to exponential.
        for offset in -40...40 {
            values += [0x1p53 + Double(offset), 0x1p53 + Double(offset) + 0.5, 0x1p54 + Double(offset) * 4]
        }
        expectDescription(values)
        #expect(formatted(0) == "0.0")
        #expect(formatted(-0.0) == "-0.0")
        #expect(formatted(1e-5) == "1e-05")
        #expect(formatted(0.0001) == "0.0001")
        #expect(formatted(9_007_199_254_740_994) == "9.007199254740994e+15")
        #expect(formatted(1e300) == "1e+300")
        #expect(formatted(.leastNonzeroMagnitude) == "5e-324")
    }

    @Test func appendsWhatReadsBackAsTheSameDouble() {
        var rng = SplitMix64(seed: 21)
        for _ in 0..<200_000 {
            let value = Double(bitPattern: rng.next())
            guard value.isFinite else { continue }
            let text = appended(value)
            #expect(text == value.description)
            #expect(Double(text) == value, "reads back as the same double")
        }
    }

    @Test func jsonNumbersAreDescriptionOrIntegers() throws {
        var rng = SplitMix64(seed: 22)
        for _ in 0..<100_000 {
            let value = Double(bitPattern: rng.next())
            guard value.isFinite else { continue }
            let expected =
                value.rounded(.towardZero) == value && abs(value) <= 0x1p53 ? String(Int64(value)) : value.description
            #expect(try JSON.number(value).serialized() == expected)
        }
        for integer: Int64 in [0, 1, -1, 9, 10, -10, 1234567, -9_007_199_254_740_992, 9_007_199_254_740_992] {
            #expect(try JSON.number(Double(integer)).serialized() == String(integer))
        }
    }
}
