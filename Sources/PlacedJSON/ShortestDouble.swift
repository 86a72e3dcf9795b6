/// Writes a `Double` as Swift's `description` does (the shortest digits that read back as the same
/// value, the nearest of them when several are as short; `1e-05`, `0.0001`, `9.007199254740994e+15`), straight into a
/// byte buffer: `description` builds a `String` per number, and a ranking's reply has 80 of them.
///
/// A number of eight decimals or fewer below 10^7 (a coordinate) has its digits found directly
/// (`fewDecimals`); the others' come from Grisu3 (Loitsch, "Printing Floating-Point Numbers Quickly and Accurately with
/// Integers", PLDI 2010; the cached powers of ten are double-conversion's): 64-bit integer arithmetic
/// that either proves its digits the shortest and the nearest or gives up, as it does for about one
/// double in 200; those are written by `description` itself. So the text is `description`'s for every
/// value (ShortestDoubleTests compare the two over millions of doubles).
enum ShortestDouble {
    /// Appends `value` (finite) as `value.description` reads.
    static func append(_ value: Double, to output: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { text in
            let count = format(value, into: text.baseAddress!)
            if count > 0 {
                output.append(contentsOf: UnsafeBufferPointer(rebasing: text[..<count]))
            } else {
                var fallback = value.description
                fallback.withUTF8 { output.append(contentsOf: $0) }
            }
        }
    }

    /// Writes `value` (finite) into `text` (32 bytes at least) as `description` reads; 0 when Grisu3
    /// gave up.
    static func format(_ value: Double, into text: UnsafeMutablePointer<UInt8>) -> Int {
        var length = 0
        if value.sign == .minus {
            text[0] = UInt8(ascii: "-")
            length = 1
        }
        if value == 0 {
            text[length] = UInt8(ascii: "0")
            text[length + 1] = UInt8(ascii: ".")
            text[length + 2] = UInt8(ascii: "0")
            return length + 3
        }
        // The digits go after the sign; formatting moves them into place.
        let digits = text + length
        guard
            let (count, exponent) = fewDecimals(of: value.magnitude, into: digits)
                ?? shortestDigits(of: value.magnitude, into: digits)
        else { return 0 }
        // The value is 0.d1d2...dn × 10^point.
        let point = exponent + count
        if point < -3 || value.magnitude > 0x1.0p53 {
            return length + exponential(digits, count: count, point: point)
        }
        return length + decimal(digits, count: count, point: point)
    }

    /// d1.d2...dn e±XX (at least two exponent digits), in place from `digits`.
    private static func exponential(_ digits: UnsafeMutablePointer<UInt8>, count: Int, point: Int) -> Int {
        var length = 1
        if count > 1 {
            (digits + 2).update(from: digits + 1, count: count - 1)  // memmove: the ranges overlap
            digits[1] = UInt8(ascii: ".")
            length = count + 1
        }
        digits[length] = UInt8(ascii: "e")
        var power = point - 1
        digits[length + 1] = power < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+")
        power = abs(power)
        length += 2
        if power >= 100 {
            digits[length] = UInt8(ascii: "0") + UInt8(power / 100)
            length += 1
            power %= 100
        }
        digits[length] = UInt8(ascii: "0") + UInt8(power / 10)
        digits[length + 1] = UInt8(ascii: "0") + UInt8(power % 10)
        return length + 2
    }

    /// 0.000ddd, ddd.ddd or ddd000.0, in place from `digits`.
    private static func decimal(_ digits: UnsafeMutablePointer<UInt8>, count: Int, point: Int) -> Int {
        if point <= 0 {
            let lead = 2 - point  // "0." and the zeros after the point
            (digits + lead).update(from: digits, count: count)
            digits[0] = UInt8(ascii: "0")
            digits[1] = UInt8(ascii: ".")
            for index in 2..<lead { digits[index] = UInt8(ascii: "0") }
            return lead + count
        }
        if point < count {
            (digits + point + 1).update(from: digits + point, count: count - point)
            digits[point] = UInt8(ascii: ".")
            return count + 1
        }
        for index in count..<point { digits[index] = UInt8(ascii: "0") }
        digits[point] = UInt8(ascii: ".")
        digits[point + 1] = UInt8(ascii: "0")
        return point + 2
    }

    // MARK: Few decimals

    /// The digits of a number with at most eight decimals (a stored coordinate: 60.1699, 24.9384123),
    /// found without Grisu3: n, the integer nearest value × 10^8, when it reads back as the value:
    /// n / 10^8 == value, both exact doubles, so the division is correctly rounded, the double nearest
    /// the decimal n × 10^-8, which is what reading it gives. Below 10^15 that decimal, its trailing zeros
    /// dropped, is the shortest and the nearest, as `description` chooses: any decimal of eight digits or
    /// fewer that reads back lies within half an ulp of the value, so within 0.12 of value × 10^8, whose
    /// product is off by less than that again, so it is n (none shorter is missed); and two decimals
    /// 10^-8 apart, 10^-15 of the value or more, cannot both lie within half an ulp of it. Nil for
    /// anything else (the 17 digits of a distance or a likelihood): Grisu3 then.
    private static func fewDecimals(of value: Double, into buffer: UnsafeMutablePointer<UInt8>) -> (Int, Int)? {
        let scale = 1e8
        let scaled = value * scale
        guard scaled < 1e15 else { return nil }
        // Nearest by truncating scaled + 0.5 (no libm call): n lies within 0.25 of scaled when it reads
        // back, whatever the addition rounds; a wrong n just fails the test below.
        let nearest = Double(UInt64(scaled + 0.5))
        guard nearest > 0, nearest / scale == value else { return nil }
        var integer = UInt64(nearest)
        var exponent = -8
        while integer % 10 == 0 {
            integer /= 10
            exponent += 1
        }
        var count = 0
        var rest = integer
        repeat {
            count += 1
            rest /= 10
        } while rest > 0
        for index in stride(from: count - 1, through: 0, by: -1) {
            buffer[index] = UInt8(ascii: "0") + UInt8(integer % 10)
            integer /= 10
        }
        return (count, exponent)
    }

    // MARK: Grisu3

    /// f × 2^e.
    private struct DiyFp {
        var f: UInt64
        var e: Int

        /// The product rounded to 64 bits (within half a unit of the last place, as Grisu assumes).
        static func * (a: DiyFp, b: DiyFp) -> DiyFp {
            let (high, low) = a.f.multipliedFullWidth(by: b.f)
            return DiyFp(f: high &+ (low >> 63), e: a.e + b.e + 64)
        }

        var normalized: DiyFp {
            let shift = f.leadingZeroBitCount
            return DiyFp(f: f << shift, e: e - shift)
        }
    }

    /// The shortest digits of `value` (positive, finite) into `buffer` (18 bytes) and their decimal
    /// exponent (value ≈ digits × 10^exponent); nil when Grisu3 cannot prove them shortest and nearest.
    private static func shortestDigits(of value: Double, into buffer: UnsafeMutablePointer<UInt8>) -> (Int, Int)? {
        let bits = value.bitPattern
        let fraction = bits & (1 << 52 - 1)
        let biased = Int(bits >> 52)
        // v = f × 2^e, with the hidden bit for normal numbers.
        let v = biased == 0 ? DiyFp(f: fraction, e: -1074) : DiyFp(f: fraction | 1 << 52, e: biased - 1075)
        // The boundaries halfway to the neighbouring doubles; the lower one is closer at a power of two.
        let plus = DiyFp(f: v.f << 1 + 1, e: v.e - 1).normalized
        let lowerIsCloser = fraction == 0 && biased > 1
        let unaligned = lowerIsCloser ? DiyFp(f: v.f << 2 - 1, e: v.e - 2) : DiyFp(f: v.f << 1 - 1, e: v.e - 1)
        let minus = DiyFp(f: unaligned.f << (unaligned.e - plus.e), e: plus.e)
        let w = v.normalized
        // A cached power 10^-k that brings w's binary exponent into [-60, -32].
        let minimumExponent = -60 - (w.e + 64)
        let estimate = Double(minimumExponent + 63) * 0.30102999566398114
        var k = Int(estimate)  // its ceiling, without libm
        if Double(k) < estimate { k += 1 }
        let index = (348 + k - 1) / 8 + 1
        let power = DiyFp(f: cachedSignificands[index], e: Int(cachedBinaryExponents[index]))
        guard
            let (length, kappa) = digitGen(low: minus * power, w: w * power, high: plus * power, into: buffer)
        else { return nil }
        return (length, kappa - Int(cachedDecimalExponents[index]))
    }

    /// Generates digits of `high` until they lie within (low, high), then rounds them towards `w`.
    private static func digitGen(low: DiyFp, w: DiyFp, high: DiyFp, into buffer: UnsafeMutablePointer<UInt8>)
        -> (Int, Int)?
    {
        var unit: UInt64 = 1
        let tooLow = low.f &- unit
        let tooHigh = high.f &+ unit
        var unsafeInterval = tooHigh &- tooLow
        let shift = UInt64(-w.e)
        let one: UInt64 = 1 << shift
        var integrals = UInt32(truncatingIfNeeded: tooHigh >> shift)
        var fractionals = tooHigh & (one - 1)
        var (divisor, kappa) = biggestPowerOfTen(notAbove: integrals)
        var length = 0
        while kappa > 0 {
            let digit = integrals / divisor
            buffer[length] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: digit)
            length += 1
            integrals %= divisor
            kappa -= 1
            let rest = UInt64(integrals) << shift + fractionals
            if rest < unsafeInterval {
                let nearest = roundWeed(
                    buffer, length: length, distanceTooHighW: tooHigh &- w.f, unsafeInterval: unsafeInterval,
                    rest: rest, tenKappa: UInt64(divisor) << shift, unit: unit)
                return nearest ? (length, kappa) : nil
            }
            divisor /= 10
        }
        while length < 18 {
            fractionals &*= 10
            unit &*= 10
            unsafeInterval &*= 10
            buffer[length] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: fractionals >> shift)
            length += 1
            fractionals &= one - 1
            kappa -= 1
            if fractionals < unsafeInterval {
                let nearest = roundWeed(
                    buffer, length: length, distanceTooHighW: (tooHigh &- w.f) &* unit,
                    unsafeInterval: unsafeInterval, rest: fractionals, tenKappa: one, unit: unit)
                return nearest ? (length, kappa) : nil
            }
        }
        return nil  // not reached for a double; bounds the buffer all the same
    }

    /// Moves the last digit down while that brings the number closer to w, then says whether the result
    /// is provably the nearest and inside the interval.
    private static func roundWeed(
        _ buffer: UnsafeMutablePointer<UInt8>, length: Int, distanceTooHighW: UInt64, unsafeInterval: UInt64,
        rest: UInt64, tenKappa: UInt64, unit: UInt64
    ) -> Bool {
        let smallDistance = distanceTooHighW &- unit
        let bigDistance = distanceTooHighW &+ unit
        var rest = rest
        while rest < smallDistance, unsafeInterval &- rest >= tenKappa,
            rest &+ tenKappa < smallDistance || smallDistance &- rest >= rest &+ tenKappa &- smallDistance
        {
            buffer[length - 1] -= 1
            rest &+= tenKappa
        }
        if rest < bigDistance, unsafeInterval &- rest >= tenKappa,
            rest &+ tenKappa < bigDistance || bigDistance &- rest > rest &+ tenKappa &- bigDistance
        {
            return false
        }
        return 2 &* unit <= rest && rest <= unsafeInterval &- 4 &* unit
    }

    /// The largest power of ten not above `number` and its count of digits (1 and 0 for 0).
    private static func biggestPowerOfTen(notAbove number: UInt32) -> (UInt32, Int) {
        var power: UInt32 = 1_000_000_000
        var digits = 10
        while digits > 1, power > number {
            power /= 10
            digits -= 1
        }
        return number == 0 ? (1, 0) : (power, digits)
    }

    /// 10^k for k = -348, -340, ... 340: the significand rounded to 64 bits, its binary and decimal
    /// exponents.
    private static let cachedSignificands: [UInt64] = [
        0xfa8fd5a0081c0288, 0xbaaee17fa23ebf76, 0x8b16fb203055ac76, 0xcf42894a5dce35ea,
        0x9a6bb0aa55653b2d, 0xe61acf033d1a45df, 0xab70fe17c79ac6ca, 0xff77b1fcbebcdc4f,
        0xbe5691ef416bd60c, 0x8dd01fad907ffc3c, 0xd3515c2831559a83, 0x9d71ac8fada6c9b5,
        0xea9c227723ee8bcb, 0xaecc49914078536d, 0x823c12795db6ce57, 0xc21094364dfb5637,
        0x9096ea6f3848984f, 0xd77485cb25823ac7, 0xa086cfcd97bf97f4, 0xef340a98172aace5,
        0xb23867fb2a35b28e, 0x84c8d4dfd2c63f3b, 0xc5dd44271ad3cdba, 0x936b9fcebb25c996,
        0xdbac6c247d62a584, 0xa3ab66580d5fdaf6, 0xf3e2f893dec3f126, 0xb5b5ada8aaff80b8,
        0x87625f056c7c4a8b, 0xc9bcff6034c13053, 0x964e858c91ba2655, 0xdff9772470297ebd,
        0xa6dfbd9fb8e5b88f, 0xf8a95fcf88747d94, 0xb94470938fa89bcf, 0x8a08f0f8bf0f156b,
        0xcdb02555653131b6, 0x993fe2c6d07b7fac, 0xe45c10c42a2b3b06, 0xaa242499697392d3,
        0xfd87b5f28300ca0e, 0xbce5086492111aeb, 0x8cbccc096f5088cc, 0xd1b71758e219652c,
        0x9c40000000000000, 0xe8d4a51000000000, 0xad78ebc5ac620000, 0x813f3978f8940984,
        0xc097ce7bc90715b3, 0x8f7e32ce7bea5c70, 0xd5d238a4abe98068, 0x9f4f2726179a2245,
        0xed63a231d4c4fb27, 0xb0de65388cc8ada8, 0x83c7088e1aab65db, 0xc45d1df942711d9a,
        0x924d692ca61be758, 0xda01ee641a708dea, 0xa26da3999aef774a, 0xf209787bb47d6b85,
        0xb454e4a179dd1877, 0x865b86925b9bc5c2, 0xc83553c5c8965d3d, 0x952ab45cfa97a0b3,
        0xde469fbd99a05fe3, 0xa59bc234db398c25, 0xf6c69a72a3989f5c, 0xb7dcbf5354e9bece,
        0x88fcf317f22241e2, 0xcc20ce9bd35c78a5, 0x98165af37b2153df, 0xe2a0b5dc971f303a,
        0xa8d9d1535ce3b396, 0xfb9b7cd9a4a7443c, 0xbb764c4ca7a44410, 0x8bab8eefb6409c1a,
        0xd01fef10a657842c, 0x9b10a4e5e9913129, 0xe7109bfba19c0c9d, 0xac2820d9623bf429,
        0x80444b5e7aa7cf85, 0xbf21e44003acdd2d, 0x8e679c2f5e44ff8f, 0xd433179d9c8cb841,
        0x9e19db92b4e31ba9, 0xeb96bf6ebadf77d9, 0xaf87023b9bf0ee6b,
    ]
    private static let cachedBinaryExponents: [Int16] = [
        -1220, -1193, -1166, -1140, -1113, -1087, -1060, -1034, -1007, -980, -954, -927,
        -901, -874, -847, -821, -794, -768, -741, -715, -688, -661, -635, -608,
        -582, -555, -529, -502, -475, -449, -422, -396, -369, -343, -316, -289,
        -263, -236, -210, -183, -157, -130, -103, -77, -50, -24, 3, 30,
        56, 83, 109, 136, 162, 189, 216, 242, 269, 295, 322, 348,
        375, 402, 428, 455, 481, 508, 534, 561, 588, 614, 641, 667,
        694, 720, 747, 774, 800, 827, 853, 880, 907, 933, 960, 986,
        1013, 1039, 1066,
    ]
    private static let cachedDecimalExponents: [Int16] = [
        -348, -340, -332, -324, -316, -308, -300, -292, -284, -276, -268, -260,
        -252, -244, -236, -228, -220, -212, -204, -196, -188, -180, -172, -164,
        -156, -148, -140, -132, -124, -116, -108, -100, -92, -84, -76, -68,
        -60, -52, -44, -36, -28, -20, -12, -4, 4, 12, 20, 28,
        36, 44, 52, 60, 68, 76, 84, 92, 100, 108, 116, 124,
        132, 140, 148, 156, 164, 172, 180, 188, 196, 204, 212, 220,
        228, 236, 244, 252, 260, 268, 276, 284, 292, 300, 308, 316,
        324, 332, 340,
    ]
}
