/// Writes a `Double` as Swift's `description` does (the shortest digits that read back as the same
/// value, the nearest of them when several are as short; `1e-05`, `0.0001`, `9.007199254740994e+15`),
/// straight into a byte buffer: `description` builds a `String` per number, and a ranking's reply has 80
/// of them.
///
/// A number of eight decimals or fewer below 10^7 (a coordinate) is written from those decimals
/// (`eightDecimals`; from 1 on in place by `fixedPoint`); the others' digits come from Ryu
/// (`shortestDigits`), which chooses them as `description` does for every double (ShortestDoubleTests
/// compare the two over millions of doubles).
enum ShortestDouble {
    /// Appends `value` (finite) as `value.description` reads.
    static func append(_ value: Double, to output: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { text in
            let count = format(value, into: text.baseAddress!)
            output.append(contentsOf: UnsafeBufferPointer(rebasing: text[..<count]))
        }
    }

    /// Writes `value` (finite) into `text` (32 bytes at least) as `description` reads; returns its
    /// length.
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
        let magnitude = value.magnitude
        let count: Int
        let exponent: Int
        if let decimals = eightDecimals(magnitude) {
            // A coordinate, from 1 on written in place.
            if magnitude >= 1 { return length + fixedPoint(decimals, into: digits) }
            (count, exponent) = decimalDigits(of: decimals, into: digits)
        } else {
            (count, exponent) = shortestDigits(of: magnitude, into: digits)
        }
        // The value is 0.d1d2...dn × 10^point.
        let point = exponent + count
        if point < -3 || magnitude > 0x1.0p53 {
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

    // MARK: Eight decimals

    /// n, the integer nearest value (positive) × 10^8, when it reads back as the value: a number with at
    /// most eight decimals below 10^7 (a stored coordinate: 60.1699, 24.9384123), whose digits are then
    /// found without Ryu. n / 10^8 == value, both exact doubles, so the division is correctly rounded, the
    /// double nearest the decimal n × 10^-8, which is what reading it gives. Below 10^15 that decimal, its
    /// trailing zeros dropped, is the shortest and the nearest, as `description` chooses: any decimal of
    /// eight digits or fewer that reads back lies within half an ulp of the value, so within 0.12 of
    /// value × 10^8, whose product is off by less than that again, so it is n (none shorter is missed);
    /// and two decimals 10^-8 apart, 10^-15 of the value or more, cannot both lie within half an ulp of
    /// it. Nil for anything else (the 17 digits of a distance or a likelihood): Ryu then.
    @inline(__always)
    private static func eightDecimals(_ value: Double) -> UInt64? {
        let scale = 1e8
        let scaled = value * scale
        guard scaled < 1e15 else { return nil }
        // Nearest by truncating scaled + 0.5 (no libm call): n lies within 0.25 of scaled when it reads
        // back, whatever the addition rounds; a wrong n just fails the test below.
        let nearest = Double(UInt64(scaled + 0.5))
        guard nearest > 0, nearest / scale == value else { return nil }
        return UInt64(nearest)
    }

    /// The digits of n × 10^-8 (`eightDecimals`), its trailing zeros dropped, and their exponent.
    private static func decimalDigits(of n: UInt64, into buffer: UnsafeMutablePointer<UInt8>) -> (Int, Int) {
        var integer = n
        var exponent = -8
        while integer % 10 == 0 {
            integer /= 10
            exponent += 1
        }
        let count = digitCount(integer)
        writeDigits(integer, count: count, into: buffer)
        return (count, exponent)
    }

    /// n × 10^-8 (at least 1, below 10^7) as `decimal` lays out those digits: the integer part,
    /// the point, the eight decimals less their trailing zeros ("60.1699"; "60.0" for none), written in
    /// place, without finding the digits first and moving them after.
    private static func fixedPoint(_ n: UInt64, into text: UnsafeMutablePointer<UInt8>) -> Int {
        let integer = n / 100_000_000
        let fraction = n % 100_000_000
        let count = digitCount(integer)
        writeDigits(integer, count: count, into: text)
        text[count] = UInt8(ascii: ".")
        guard fraction > 0 else {
            text[count + 1] = UInt8(ascii: "0")
            return count + 2
        }
        // Eight digits, zeros in front; then the trailing zeros dropped.
        let decimals = text + count + 1
        writeDigits(fraction, count: 8, into: decimals)
        var last = 8
        while decimals[last - 1] == UInt8(ascii: "0") { last -= 1 }
        return count + 1 + last
    }

    // MARK: Ryu

    /// The shortest digits of `value` (positive, finite) into `buffer` (17 bytes) and their decimal
    /// exponent (value reads back from digits × 10^exponent), by Ryu (Ulf Adams, "Ryū: Fast
    /// Float-to-String Conversion", PLDI 2018; this is its reference d2s.c with the small tables of
    /// d2s_small_table.h): of the decimals that read back as the value (the interval's ends included when
    /// the significand is even, as reading rounds a tie to even) the shortest, and of those the nearest,
    /// a tie to the even one: what `description` chooses.
    private static func shortestDigits(of value: Double, into buffer: UnsafeMutablePointer<UInt8>) -> (Int, Int) {
        let bits = value.bitPattern
        let ieeeMantissa = bits & (1 << 52 - 1)
        let ieeeExponent = Int(bits >> 52)
        // value = m2 × 2^(e2 + 2): two more bits for the interval's ends.
        let e2 = (ieeeExponent == 0 ? 1 : ieeeExponent) - 1023 - 52 - 2
        let m2 = ieeeExponent == 0 ? ieeeMantissa : 1 << 52 | ieeeMantissa
        let acceptBounds = m2 & 1 == 0
        let mv = 4 * m2
        // The lower end is closer at a power of two (not at the smallest normal).
        let mmShift: UInt64 = ieeeMantissa != 0 || ieeeExponent <= 1 ? 1 : 0
        // The value and the interval's ends (vr, vp, vm) in a decimal power: × 10^-e10.
        var vr: UInt64
        var vp: UInt64
        var vm: UInt64
        let e10: Int
        var vmIsTrailingZeros = false
        var vrIsTrailingZeros = false
        if e2 >= 0 {
            let q = log10Pow2(e2) - (e2 > 3 ? 1 : 0)
            e10 = q
            let shift = -e2 + q + pow5InverseBitCount + pow5Bits(q) - 1
            let power = inversePowerOf5(q)
            vr = mulShift(mv, power, shift)
            vp = mulShift(mv + 2, power, shift)
            vm = mulShift(mv - 1 - mmShift, power, shift)
            if q <= 21 {
                // At most one of mv, mp and mm is a multiple of 5.
                if mv % 5 == 0 {
                    vrIsTrailingZeros = isMultiple(mv, ofPowerOf5: q)
                } else if acceptBounds {
                    vmIsTrailingZeros = isMultiple(mv - 1 - mmShift, ofPowerOf5: q)
                } else if isMultiple(mv + 2, ofPowerOf5: q) {
                    vp -= 1
                }
            }
        } else {
            let q = log10Pow5(-e2) - (-e2 > 1 ? 1 : 0)
            e10 = q + e2
            let i = -e2 - q
            let shift = q - (pow5Bits(i) - pow5BitCount)
            let power = powerOf5(i)
            vr = mulShift(mv, power, shift)
            vp = mulShift(mv + 2, power, shift)
            vm = mulShift(mv - 1 - mmShift, power, shift)
            if q <= 1 {
                // mv = 4 × m2 has two trailing zero bits; mm one when mmShift is 1; mp always one.
                vrIsTrailingZeros = true
                if acceptBounds { vmIsTrailingZeros = mmShift == 1 } else { vp -= 1 }
            } else if q < 63 {
                vrIsTrailingZeros = mv & (1 << UInt64(q) - 1) == 0
            }
        }
        // The shortest decimal in the interval: drop digits while the ends still differ.
        var removed = 0
        let output: UInt64
        if vmIsTrailingZeros || vrIsTrailingZeros {
            // The rare general case (about 0.7 %): an end or the value is exact in this power.
            var lastRemovedDigit: UInt64 = 0
            while vp / 10 > vm / 10 {
                vmIsTrailingZeros = vmIsTrailingZeros && vm % 10 == 0
                vrIsTrailingZeros = vrIsTrailingZeros && lastRemovedDigit == 0
                lastRemovedDigit = vr % 10
                vr /= 10
                vp /= 10
                vm /= 10
                removed += 1
            }
            if vmIsTrailingZeros {
                while vm % 10 == 0 {
                    vrIsTrailingZeros = vrIsTrailingZeros && lastRemovedDigit == 0
                    lastRemovedDigit = vr % 10
                    vr /= 10
                    vp /= 10
                    vm /= 10
                    removed += 1
                }
            }
            // A tie (the exact value ends in 50...0) rounds to even.
            if vrIsTrailingZeros, lastRemovedDigit == 5, vr % 2 == 0 { lastRemovedDigit = 4 }
            let outside = vr == vm && (!acceptBounds || !vmIsTrailingZeros)
            output = vr + (outside || lastRemovedDigit >= 5 ? 1 : 0)
        } else {
            var roundUp = false
            if vp / 100 > vm / 100 {
                roundUp = vr % 100 >= 50
                vr /= 100
                vp /= 100
                vm /= 100
                removed += 2
            }
            while vp / 10 > vm / 10 {
                roundUp = vr % 10 >= 5
                vr /= 10
                vp /= 10
                vm /= 10
                removed += 1
            }
            output = vr + (vr == vm || roundUp ? 1 : 0)
        }
        let count = digitCount(output)
        writeDigits(output, count: count, into: buffer)
        return (count, e10 + removed)
    }

    // MARK: Digits

    /// How many decimal digits `value` (positive) has: ⌊log10 2^bits⌋ by 1233/4096, then one more at or
    /// past that power of ten.
    @inline(__always)
    private static func digitCount(_ value: UInt64) -> Int {
        let estimate = ((64 - value.leadingZeroBitCount) * 1233) >> 12
        return estimate + (value >= powersOf10[estimate] ? 1 : 0)
    }

    /// The `count` digits of `value` into `buffer`, two at a time.
    @inline(__always)
    private static func writeDigits(_ value: UInt64, count: Int, into buffer: UnsafeMutablePointer<UInt8>) {
        var value = value
        var end = count
        while end >= 2 {
            let pair = Int(value % 100) * 2
            value /= 100
            buffer[end - 2] = digitPairs.utf8Start[pair]
            buffer[end - 1] = digitPairs.utf8Start[pair + 1]
            end -= 2
        }
        if end == 1 { buffer[0] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value) }
    }

    /// "00", "01", ... "99".
    private static let digitPairs: StaticString = """
        0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849\
        5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899
        """

    /// 10^0 ... 10^19.
    private static let powersOf10: [UInt64] = [
        1, 10, 100, 1_000,
        10_000, 100_000, 1_000_000, 10_000_000,
        100_000_000, 1_000_000_000, 10_000_000_000, 100_000_000_000,
        1_000_000_000_000, 10_000_000_000_000, 100_000_000_000_000, 1_000_000_000_000_000,
        10_000_000_000_000_000, 100_000_000_000_000_000, 1_000_000_000_000_000_000, 10_000_000_000_000_000_000,
    ]

    /// A 128-bit power of five as two words (UInt128's operators check for overflow; these need none).
    private typealias Power = (high: UInt64, low: UInt64)

    /// The 64 bits of (m × power) >> shift that Ryu needs (the product has at most 179 bits, the shift is
    /// at least 115).
    @inline(__always)
    private static func mulShift(_ m: UInt64, _ power: Power, _ shift: Int) -> UInt64 {
        let low = m.multipliedFullWidth(by: power.low).high
        let high = m.multipliedFullWidth(by: power.high)
        let (sum, carry) = high.low.addingReportingOverflow(low)
        return shiftRight(high: high.high &+ (carry ? 1 : 0), low: sum, by: shift - 64)
    }

    /// (high:low) >> distance, 0 < distance < 64, cut to 64 bits.
    @inline(__always)
    private static func shiftRight(high: UInt64, low: UInt64, by distance: Int) -> UInt64 {
        (high &<< UInt64(64 - distance)) | (low &>> UInt64(distance))
    }

    /// m × power as three words, high to low.
    @inline(__always)
    private static func multiply(_ m: UInt64, _ power: Power) -> (UInt64, UInt64, UInt64) {
        let high = m.multipliedFullWidth(by: power.high)
        let low = m.multipliedFullWidth(by: power.low)
        let (middle, carry) = low.high.addingReportingOverflow(high.low)
        return (high.high &+ (carry ? 1 : 0), middle, low.low)
    }

    /// ⌈log2 5^e⌉ (1 for 0), for e ≤ 3528.
    @inline(__always)
    private static func pow5Bits(_ e: Int) -> Int { (e * 1_217_359) >> 19 + 1 }
    /// ⌊log10 2^e⌋, for e ≤ 1650.
    @inline(__always)
    private static func log10Pow2(_ e: Int) -> Int { (e * 78_913) >> 18 }
    /// ⌊log10 5^e⌋, for e ≤ 2620.
    @inline(__always)
    private static func log10Pow5(_ e: Int) -> Int { (e * 732_923) >> 20 }

    private static func isMultiple(_ value: UInt64, ofPowerOf5 power: Int) -> Bool {
        // Multiplying by 5's inverse modulo 2^64 leaves a number at most 2^64 / 5 exactly when 5 divides.
        var value = value
        var count = 0
        while true {
            value &*= 14_757_395_258_967_641_293
            if value > 3_689_348_814_741_910_323 { break }
            count += 1
        }
        return count >= power
    }

    private static let pow5BitCount = 125
    private static let pow5InverseBitCount = 125

    /// 5^i as Ryu's table holds it (its top 125 bits), from every 26th power and an exact factor.
    private static func powerOf5(_ i: Int) -> Power {
        let base = i / 26
        let offset = i - base * 26
        let split = pow5Split[base]
        let multiplier: Power = (split.high, split.low)
        if offset == 0 { return multiplier }
        let (high, middle, low) = multiply(pow5Table[offset], multiplier)
        let delta = pow5Bits(i) - pow5Bits(base * 26)
        let correction = UInt64((pow5Offsets[i / 16] >> ((i % 16) << 1)) & 3)
        return (
            shiftRight(high: high, low: middle, by: delta), shiftRight(high: middle, low: low, by: delta) &+ correction
        )
    }

    /// 2^k / 5^i as Ryu's table holds it (rounded up to 125 bits), from every 26th power and an exact
    /// factor.
    private static func inversePowerOf5(_ i: Int) -> Power {
        let base = (i + 25) / 26
        let offset = base * 26 - i
        let split = pow5InverseSplit[base]
        let multiplier: Power = (split.high, split.low)
        if offset == 0 { return multiplier }
        let (high, middle, low) = multiply(pow5Table[offset], (multiplier.high, multiplier.low - 1))
        let delta = pow5Bits(base * 26) - pow5Bits(i)
        let correction = UInt64((pow5InverseOffsets[i / 16] >> ((i % 16) << 1)) & 3)
        return (
            shiftRight(high: high, low: middle, by: delta),
            shiftRight(high: middle, low: low, by: delta) &+ 1 &+ correction
        )
    }

    /// 5^0 ... 5^25.
    private static let pow5Table: [UInt64] = [
        1, 5, 25, 125, 625,
        3_125, 15_625, 78_125, 390_625, 1_953_125,
        9_765_625, 48_828_125, 244_140_625, 1_220_703_125, 6_103_515_625,
        30_517_578_125, 152_587_890_625, 762_939_453_125, 3_814_697_265_625, 19_073_486_328_125,
        95_367_431_640_625, 476_837_158_203_125, 2_384_185_791_015_625, 11_920_928_955_078_125, 59_604_644_775_390_625,
        298_023_223_876_953_125,
    ]

    /// d2s_small_table.h's DOUBLE_POW5_SPLIT2 (5^0, 5^26, 5^52 ...), as it writes them: low word first.
    private static let pow5Split: [(low: UInt64, high: UInt64)] = [
        (0, 1_152_921_504_606_846_976), (0, 1_490_116_119_384_765_625),
        (1_032_610_780_636_961_552, 1_925_929_944_387_235_853), (7_910_200_175_544_436_838, 1_244_603_055_572_228_341),
        (16_941_905_809_032_713_930, 1_608_611_746_708_759_036),
        (13_024_893_955_298_202_172, 2_079_081_953_128_979_843),
        (6_607_496_772_837_067_824, 1_343_575_221_513_417_750),
        (17_332_926_989_895_652_603, 1_736_530_273_035_216_783),
        (13_037_379_183_483_547_984, 2_244_412_773_384_604_712),
        (1_605_989_338_741_628_675, 1_450_417_759_929_778_918),
        (9_630_225_068_416_591_280, 1_874_621_017_369_538_693),
        (665_883_850_346_957_067, 1_211_445_438_634_777_304),
        (14_931_890_668_723_713_708, 1_565_756_531_257_009_982),
    ]

    /// d2s_small_table.h's POW5_OFFSETS: the corrections, two bits for each power.
    private static let pow5Offsets: [UInt32] = [
        0x0000_0000, 0x0000_0000, 0x0000_0000, 0x0000_0000, 0x4000_0000, 0x5969_5995, 0x5554_5555, 0x5655_5515,
        0x4115_0504, 0x4055_5410, 0x4455_5145, 0x4450_4540, 0x4555_5550, 0x4000_4000, 0x9644_0440, 0x5556_5565,
        0x5445_4045, 0x4015_4151, 0x5555_9155, 0x5140_5555, 0x0000_0105,
    ]

    /// d2s_small_table.h's DOUBLE_POW5_INV_SPLIT2 (5^0, 5^-26, 5^-52 ...).
    private static let pow5InverseSplit: [(low: UInt64, high: UInt64)] = [
        (1, 2_305_843_009_213_693_952), (5_955_668_970_331_000_884, 1_784_059_615_882_449_851),
        (8_982_663_654_677_661_702, 1_380_349_269_358_112_757), (7_286_864_317_269_821_294, 2_135_987_035_920_910_082),
        (7_005_857_020_398_200_553, 1_652_639_921_975_621_497),
        (17_965_325_103_354_776_697, 1_278_668_206_209_430_417),
        (8_928_596_168_509_315_048, 1_978_643_211_784_836_272),
        (10_075_671_573_058_298_858, 1_530_901_034_580_419_511),
        (597_001_226_353_042_382, 1_184_477_304_306_571_148), (1_527_430_471_115_325_346, 1_832_889_850_782_397_517),
        (12_533_209_867_169_019_542, 1_418_129_833_677_084_982),
        (5_577_825_024_675_947_042, 2_194_449_627_517_475_473),
        (11_006_974_540_203_867_551, 1_697_873_161_311_732_311),
        (10_313_493_231_639_821_582, 1_313_665_730_009_899_186),
        (12_701_016_819_766_672_773, 2_032_799_256_770_390_445),
    ]

    /// d2s_small_table.h's POW5_INV_OFFSETS.
    private static let pow5InverseOffsets: [UInt32] = [
        0x5454_4554, 0x0405_5545, 0x1004_1000, 0x0040_0414, 0x4001_0000, 0x4115_5555, 0x0000_0454, 0x0001_0044,
        0x4000_0000, 0x4400_0041, 0x5045_4450, 0x5555_0054, 0x5165_5554, 0x4000_4000, 0x0100_0001, 0x0001_0500,
        0x5151_5411, 0x0555_5554, 0x0000_0000,
    ]
}
