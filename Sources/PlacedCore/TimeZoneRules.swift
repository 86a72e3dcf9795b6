// A time zone read from the bytes of a TZif file (RFC 8536), as in /usr/share/zoneinfo: instants to
// wall-clock time and back. The caller reads the file (TZ, /etc/localtime); this only decodes bytes.

/// A zone's offsets over time: the file's transition table (64-bit, version 2 and later) and, past
/// its last transition, the POSIX TZ rule of its footer.
public struct TimeZoneRules: Equatable, Sendable {
    /// The offset from UTC in force at and after a transition.
    public struct Period: Equatable, Sendable {
        public var utcOffset: Int
        public var isDaylightSaving: Bool
    }

    /// Unix seconds of each transition, ascending, and the period each begins.
    let transitions: [Int]
    let periods: [Period]
    /// In force before the first transition (RFC 8536: local time type 0).
    let initial: Period
    /// The footer's rule for instants after the last transition; nil: the last period stays.
    let footer: PosixTimeZone?

    /// A zone of one fixed offset (UTC: 0).
    public init(fixedOffset: Int) {
        transitions = []
        periods = []
        initial = Period(utcOffset: fixedOffset, isDaylightSaving: false)
        footer = nil
    }

    /// Decodes a TZif file. Version 1 files (32-bit times only) are read too; their footer is absent.
    public init(tzif bytes: [UInt8]) throws(TimeZoneError) {
        var reader = TZifReader(bytes: bytes)
        let first = try reader.header()
        guard first.version >= 2 else {
            (transitions, periods, initial) = try reader.block(first, timeSize: 4)
            footer = nil
            return
        }
        try reader.advance(by: first.blockSize(timeSize: 4))
        let second = try reader.header()
        (transitions, periods, initial) = try reader.block(second, timeSize: 8)
        let footerText = try reader.footer()
        footer = footerText.isEmpty ? nil : try PosixTimeZone(footerText)
    }

    /// The offset and daylight-saving flag in force at `unixSeconds`.
    public func period(at unixSeconds: Int) -> Period {
        guard let last = transitions.last, unixSeconds >= transitions[0] else { return initial }
        if unixSeconds >= last, let footer { return footer.period(at: unixSeconds) }
        var low = 0
        var high = transitions.count - 1  // transitions[low] <= unixSeconds < transitions[high + 1]
        while low < high {
            let middle = (low + high + 1) / 2
            if transitions[middle] <= unixSeconds { low = middle } else { high = middle - 1 }
        }
        return periods[low]
    }

    /// The wall-clock time at `unixSeconds`.
    public func localTime(at unixSeconds: Int) -> CivilDateTime {
        CivilDateTime(secondsSinceEpoch: unixSeconds + period(at: unixSeconds).utcOffset)
    }

    /// The instant a wall-clock time names. A time the clocks skipped (the spring-forward gap) is read
    /// with the offset before the change, so it lands as far past the change as it lay into the gap;
    /// a time they showed twice (the autumn hour) is its earlier instant. Java, JavaScript's Temporal
    /// ("compatible") and RFC 9557 resolve the same way.
    public func unixSeconds(for local: CivilDateTime) -> Int {
        let wall = local.secondsSinceEpoch
        // Offsets never change twice within two days, and never exceed ±26 h (RFC 8536).
        let before = period(at: wall - 2 * 86_400).utcOffset
        let after = period(at: wall + 2 * 86_400).utcOffset
        let candidates = [wall - before, wall - after].filter { period(at: $0).utcOffset == wall - $0 }
        return candidates.min() ?? wall - before
    }
}

public enum TimeZoneError: Error, Equatable, Sendable {
    /// Not "TZif" at the start.
    case notTZif
    /// The file ends inside the part named.
    case truncated(String)
    /// A transition's local time type index is beyond the types, or a count is out of bounds.
    case inconsistent(String)
    /// The footer is not a POSIX TZ string this reads (position, what was expected).
    case badRule(String)
}

/// Reads the big-endian fields of a TZif file in order.
private struct TZifReader {
    struct Header {
        var version: Int
        var isUTCCount, isStandardCount, leapCount, transitionCount, typeCount, characterCount: Int

        func blockSize(timeSize: Int) -> Int {
            transitionCount * (timeSize + 1) + typeCount * 6 + characterCount + leapCount * (timeSize + 4)
                + isStandardCount + isUTCCount
        }
    }

    let bytes: [UInt8]
    var offset = 0

    mutating func header() throws(TimeZoneError) -> Header {
        guard bytes.count >= offset + 44 else { throw .truncated("header") }
        guard bytes[offset..<offset + 4].elementsEqual("TZif".utf8) else { throw .notTZif }
        let version = bytes[offset + 4] == 0 ? 1 : Int(bytes[offset + 4]) - 0x30
        offset += 20
        var counts: [Int] = []
        for _ in 0..<6 { counts.append(Int(try integer(size: 4))) }
        guard counts.allSatisfy({ $0 < 1 << 20 }), counts[4] > 0 else { throw .inconsistent("counts") }
        return Header(
            version: version, isUTCCount: counts[0], isStandardCount: counts[1], leapCount: counts[2],
            transitionCount: counts[3], typeCount: counts[4], characterCount: counts[5])
    }

    mutating func advance(by count: Int) throws(TimeZoneError) {
        guard bytes.count >= offset + count else { throw .truncated("version 1 data") }
        offset += count
    }

    /// The transitions, the period each begins, and the period before them.
    mutating func block(_ header: Header, timeSize: Int) throws(TimeZoneError) -> (
        [Int], [TimeZoneRules.Period], TimeZoneRules.Period
    ) {
        guard bytes.count >= offset + header.blockSize(timeSize: timeSize) else { throw .truncated("data block") }
        var times: [Int] = []
        for _ in 0..<header.transitionCount { times.append(try integer(size: timeSize)) }
        var typeIndices: [Int] = []
        for _ in 0..<header.transitionCount {
            typeIndices.append(Int(bytes[offset]))
            offset += 1
        }
        var types: [TimeZoneRules.Period] = []
        for _ in 0..<header.typeCount {
            let utcOffset = try integer(size: 4)
            types.append(TimeZoneRules.Period(utcOffset: utcOffset, isDaylightSaving: bytes[offset] != 0))
            offset += 2  // isdst, abbreviation index
        }
        guard typeIndices.allSatisfy({ $0 < types.count }) else { throw .inconsistent("local time type index") }
        guard zip(times, times.dropFirst()).allSatisfy({ $0 < $1 }) else { throw .inconsistent("transition order") }
        offset +=
            header.characterCount + header.leapCount * (timeSize + 4) + header.isStandardCount
            + header.isUTCCount
        return (times, typeIndices.map { types[$0] }, types[0])
    }

    /// The POSIX TZ string between the newlines after the version 2+ data.
    mutating func footer() throws(TimeZoneError) -> String {
        guard offset < bytes.count, bytes[offset] == 0x0A else { throw .truncated("footer") }
        guard let end = bytes[(offset + 1)...].firstIndex(of: 0x0A) else { throw .truncated("footer") }
        return String(decoding: bytes[(offset + 1)..<end], as: UTF8.self)
    }

    mutating func integer(size: Int) throws(TimeZoneError) -> Int {
        guard bytes.count >= offset + size else { throw .truncated("integer") }
        var value: UInt64 = 0
        for byte in bytes[offset..<offset + size] { value = value << 8 | UInt64(byte) }
        offset += size
        // Sign-extend from the field's width.
        let shift = UInt64(64 - 8 * size)
        return Int(Int64(bitPattern: value << shift) >> Int64(shift))
    }
}

/// A POSIX TZ string (POSIX.1-2017 8.3, with RFC 8536's extensions): a standard offset and, when
/// daylight saving is observed, its offset and the yearly rules of its start and end.
struct PosixTimeZone: Equatable, Sendable {
    /// A yearly date and wall-clock time (of the offset in force before it) of a change.
    struct Rule: Equatable, Sendable {
        enum Day: Equatable, Sendable {
            /// Jn: day 1 ... 365, February 29 never counted.
            case julianSkippingLeap(Int)
            /// n: day 0 ... 365, February 29 counted.
            case zeroBasedJulian(Int)
            /// Mm.w.d: weekday d (0 = Sunday) of week w (5 = last) of month m.
            case monthWeekDay(month: Int, week: Int, weekday: Int)
        }
        var day: Day
        var secondOfDay: Int

        func date(in year: Int) -> CivilDate {
            switch day {
            case .julianSkippingLeap(let n):
                let leapDay = CivilDate.isLeap(year) && n >= 60 ? 1 : 0
                return CivilDate(year: year, month: 1, day: n + leapDay)
            case .zeroBasedJulian(let n):
                return CivilDate(year: year, month: 1, day: n + 1)
            case .monthWeekDay(let month, let week, let weekday):
                let first = CivilDate(year: year, month: month, day: 1)
                let firstMatch = 1 + ((weekday - (first.weekday + 1) % 7) + 7) % 7
                var day = firstMatch + (week - 1) * 7
                if day > CivilDate.days(inMonth: month, of: year) { day -= 7 }
                return CivilDate(year: year, month: month, day: day)
            }
        }
    }

    var standardOffset: Int
    var daylight: (offset: Int, start: Rule, end: Rule)?

    static func == (a: PosixTimeZone, b: PosixTimeZone) -> Bool {
        a.standardOffset == b.standardOffset && a.daylight?.offset == b.daylight?.offset
            && a.daylight?.start == b.daylight?.start && a.daylight?.end == b.daylight?.end
    }

    init(_ text: String) throws(TimeZoneError) {
        var scanner = ByteScanner(Array(text.utf8))
        try scanner.skipName()
        standardOffset = -(try scanner.duration())
        guard !scanner.atEnd else { return }
        try scanner.skipName()
        let offset = scanner.peek == UInt8(ascii: ",") ? standardOffset + 3600 : -(try scanner.duration())
        guard scanner.take(",") else { throw .badRule("',' before the start rule at \(scanner.offset)") }
        let start = try scanner.rule()
        guard scanner.take(",") else { throw .badRule("',' before the end rule at \(scanner.offset)") }
        let end = try scanner.rule()
        guard scanner.atEnd else { throw .badRule("end at \(scanner.offset)") }
        daylight = (offset, start, end)
    }

    func period(at unixSeconds: Int) -> TimeZoneRules.Period {
        guard let daylight else { return TimeZoneRules.Period(utcOffset: standardOffset, isDaylightSaving: false) }
        let year = CivilDateTime(secondsSinceEpoch: unixSeconds + standardOffset).date.year
        // The start is given in standard time, the end in daylight time.
        func changes(in year: Int) -> (start: Int, end: Int) {
            let start = daylight.start.date(in: year).daysSinceEpoch * 86_400 + daylight.start.secondOfDay
            let end = daylight.end.date(in: year).daysSinceEpoch * 86_400 + daylight.end.secondOfDay
            return (start - standardOffset, end - daylight.offset)
        }
        let (start, end) = changes(in: year)
        let isDaylight =
            start < end ? start <= unixSeconds && unixSeconds < end : !(end <= unixSeconds && unixSeconds < start)
        return TimeZoneRules.Period(
            utcOffset: isDaylight ? daylight.offset : standardOffset, isDaylightSaving: isDaylight)
    }
}

/// The fields of a POSIX TZ string, byte by byte.
private struct ByteScanner {
    let bytes: [UInt8]
    var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { offset == bytes.count }
    var peek: UInt8? { offset < bytes.count ? bytes[offset] : nil }

    mutating func take(_ character: Unicode.Scalar) -> Bool {
        guard peek == UInt8(ascii: character) else { return false }
        offset += 1
        return true
    }

    /// An abbreviation: three or more letters, or anything but '>' within '<' and '>'.
    mutating func skipName() throws(TimeZoneError) {
        let start = offset
        if take("<") {
            while let byte = peek, byte != UInt8(ascii: ">") { offset += 1 }
            guard take(">") else { throw .badRule("'>' at \(offset)") }
        } else {
            while let byte = peek, (byte | 0x20) >= UInt8(ascii: "a"), (byte | 0x20) <= UInt8(ascii: "z") {
                offset += 1
            }
            guard offset - start >= 3 else { throw .badRule("a zone abbreviation at \(start)") }
        }
    }

    mutating func number() throws(TimeZoneError) -> Int {
        let start = offset
        var value = 0
        while let byte = peek, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), offset - start < 4 {
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            offset += 1
        }
        guard offset > start else { throw .badRule("a number at \(start)") }
        return value
    }

    /// [+-]hh[:mm[:ss]] in seconds.
    mutating func duration() throws(TimeZoneError) -> Int {
        let sign = take("-") ? -1 : (take("+") ? 1 : 1)
        var seconds = try number() * 3600
        if take(":") { seconds += try number() * 60 }
        if take(":") { seconds += try number() }
        return sign * seconds
    }

    mutating func rule() throws(TimeZoneError) -> PosixTimeZone.Rule {
        let day: PosixTimeZone.Rule.Day
        if take("J") {
            day = .julianSkippingLeap(try number())
        } else if take("M") {
            let month = try number()
            guard take(".") else { throw .badRule("'.' at \(offset)") }
            let week = try number()
            guard take(".") else { throw .badRule("'.' at \(offset)") }
            let weekday = try number()
            guard (1...12).contains(month), (1...5).contains(week), (0...6).contains(weekday) else {
                throw .badRule("a month rule in range before \(offset)")
            }
            day = .monthWeekDay(month: month, week: week, weekday: weekday)
        } else {
            day = .zeroBasedJulian(try number())
        }
        return PosixTimeZone.Rule(day: day, secondOfDay: take("/") ? try duration() : 7200)
    }
}
