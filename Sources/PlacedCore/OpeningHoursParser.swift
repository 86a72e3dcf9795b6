// The opening_hours grammar read byte by byte, by recursive descent without recursion: the grammar
// nests nothing, so every loop here consumes input and the work is linear in a value's length.
// Relaxed as real data and both reference evaluators are: case, single-digit hours and days, spaces
// around separators, a trailing `;`.

struct OpeningHoursParser {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ text: String) { bytes = Array(text.utf8) }

    mutating func parse() throws(OpeningHoursError) -> [OpeningHoursRule] {
        guard bytes.count <= OpeningHours.maximumLength else {
            throw OpeningHoursError(.tooLong(bytes: bytes.count), at: 0)
        }
        skipSpaces()
        guard offset < bytes.count else { throw OpeningHoursError(.empty, at: 0) }
        var rules: [OpeningHoursRule] = []
        var joiner = OpeningHoursRule.Joiner.normal
        while true {
            var rule = try parseRule()
            rule.joiner = joiner
            rules.append(rule)
            skipSpaces()
            if offset == bytes.count { break }
            if take(";") {
                joiner = .normal
            } else if take("||") {
                joiner = .fallback
            } else if take(",") {
                joiner = .additional
            } else if bytes[offset - 1] == UInt8(ascii: " "), atWeekdayOrHoliday || atMonth {
                // `Mo-Fr 08:00-19:00 Sa 09:00-14:00`: a ';' left out, as both reference evaluators read it.
                joiner = .normal
            } else {
                throw expected("';', ',', '||' or the end")
            }
            skipSpaces()
            if offset == bytes.count, joiner == .normal { break }  // a trailing ';'
        }
        return rules
    }

    // MARK: Rules

    private mutating func parseRule() throws(OpeningHoursError) -> OpeningHoursRule {
        var rule = OpeningHoursRule()
        let start = offset
        if take("24/7") {
            rule.isAlwaysOpen = true
        } else {
            if peek == UInt8(ascii: "\""), let end = commentEnd(), followedByColon(after: end) {
                rule.condition = try parseComment()
                skipSpaces()
                _ = take(":")
            }
            try parseWideSelectors(into: &rule)
            skipSpaces()
            try parseWeekdaySelector(into: &rule)
            skipSpaces()
            if atTimeStart { rule.times = try parseTimeSelector() }
        }
        skipSpaces()
        var explicitState = false
        if let state = parseState() {
            rule.state = state
            explicitState = true
            skipSpaces()
        }
        if peek == UInt8(ascii: "\"") {
            rule.comment = try parseComment()
            // A comment in place of a state and of times (`"by appointment"`, `Mo "on request"`) says
            // what the grammar cannot: unknown, as KOpeningHours and opening_hours.js read it. With
            // times, the comment annotates open hours.
            if !explicitState, rule.times.isEmpty, !rule.isAlwaysOpen { rule.state = .unknown }
        }
        guard offset > start else { throw expected("a rule: days, times, a state or a comment") }
        return rule
    }

    private mutating func parseState() -> OpeningHoursRule.State? {
        for (word, state) in [("open", .open), ("closed", .closed), ("off", .closed), ("unknown", .unknown)]
            as [(String, OpeningHoursRule.State)]
        where takeWord(word) {
            return state
        }
        return nil
    }

    private mutating func parseComment() throws(OpeningHoursError) -> String {
        guard let end = commentEnd() else { throw expected("a closing '\"'") }
        let text = String(decoding: bytes[(offset + 1)..<end], as: UTF8.self)
        offset = end + 1
        return text
    }

    /// The offset of the quote that closes the comment opening at `offset`.
    private func commentEnd() -> Int? { bytes[(offset + 1)...].firstIndex(of: UInt8(ascii: "\"")) }

    private func followedByColon(after end: Int) -> Bool {
        var i = end + 1
        while i < bytes.count, bytes[i] == UInt8(ascii: " ") { i += 1 }
        return i < bytes.count && bytes[i] == UInt8(ascii: ":")
    }

    // MARK: Wide selectors: years, dates, weeks

    private mutating func parseWideSelectors(into rule: inout OpeningHoursRule) throws(OpeningHoursError) {
        var any = false
        // Years (`2026-2028/2`), unless the year begins a date (`2026 Dec 24`).
        while let year = peekYear(), !atDateStart {
            offset += 4
            rule.years.append(try parseYearRange(from: year))
            any = true
            guard continuesList(spaced: false, with: { $0.peekYear() != nil && !$0.atDateStart }) else { break }
        }
        skipSpaces()
        while atDateStart {
            rule.dates.append(try parseDateRange())
            any = true
            guard continuesList(spaced: false, with: { $0.atDateStart }) else { break }
        }
        skipSpaces()
        if takeWord("week") {
            any = true
            repeat {
                skipSpaces()
                let start = try parseNumber(in: 1...53, what: "a week number 01-53")
                var range = WeekRange(start: start, end: start, step: 1)
                if take("-") {
                    range.end = try parseNumber(in: 1...53, what: "a week number 01-53")
                    if take("/") { range.step = try parseNumber(in: 1...53, what: "a week step") }
                }
                rule.weeks.append(range)
            } while continuesList(with: { $0.peekDigit })
        }
        if any {
            skipSpaces()
            _ = take(":")
        }
    }

    private mutating func parseYearRange(from year: Int) throws(OpeningHoursError) -> YearRange {
        var range = YearRange(start: year, end: year, step: 1)
        if take("+") {
            range.end = Int.max
        } else if take("-") {
            guard let end = peekYear() else { throw expected("a year") }
            offset += 4
            guard end >= year else { throw OpeningHoursError(.outOfRange("year range end"), at: offset - 4) }
            range.end = end
            if take("/") { range.step = try parseNumber(in: 1...9999, what: "a year step") }
        }
        return range
    }

    private mutating func parseDateRange() throws(OpeningHoursError) -> DateRange {
        let (start, monthOnly) = try parseDateSpec()
        if let month = monthOnly {
            // `Jan`, `Jan-Mar`, `2026 Nov-2027 Feb`.
            var end = DateSpec(year: start.year, day: .endOfMonth(month: month))
            let save = offset
            if takeDash() {
                skipSpaces()
                let year = peekYear()
                if year != nil { offset += 4 }
                skipSpaces()
                if let endMonth = takeMonth() {
                    end = DateSpec(year: year ?? start.year, day: .endOfMonth(month: endMonth))
                } else {
                    offset = save
                }
            }
            return DateRange(start: start, end: end)
        }
        var range = DateRange(start: start, end: start)
        let save = offset
        skipSpaces()
        if takeDash() {
            skipSpaces()
            if let day = peekDayNumber() {
                offset += day.length
                guard case .monthDay(let month, _) = start.day else { throw expected("a month before the day") }
                range.end = DateSpec(year: start.year, day: .monthDay(month: month, day: day.value))
            } else {
                let (end, endMonth) = try parseDateSpec()
                range.end = endMonth.map { DateSpec(year: end.year, day: .endOfMonth(month: $0)) } ?? end
            }
            parseDateOffsets(into: &range.end)
        } else if take("+") {
            range.isOpenEnded = true
        } else {
            offset = save
        }
        return range
    }

    /// `[year] month day`, `[year] month weekday[n]`, `[year] easter`, each with offsets; or
    /// `[year] month` alone, whose month is returned.
    private mutating func parseDateSpec() throws(OpeningHoursError) -> (DateSpec, Int?) {
        var year: Int?
        if let y = peekYear() {
            year = y
            offset += 4
            skipSpaces()
        }
        if takeWord("easter") {
            var spec = DateSpec(year: year, day: .easter)
            parseDateOffsets(into: &spec)
            return (spec, nil)
        }
        guard let month = takeMonth() else { throw expected("a month (Jan ... Dec) or easter") }
        let afterMonth = offset
        skipSpaces()
        if let day = peekDayNumber() {
            offset += day.length
            var spec = DateSpec(year: year, day: .monthDay(month: month, day: day.value))
            parseDateOffsets(into: &spec)
            return (spec, nil)
        }
        // `Mar Su[-1]` as a date only where a range needs one (`Mar Su[-1]-Oct Su[-1]`); elsewhere it is
        // March and a weekday selector, which selects the same day and allows `Feb Sa[1,3]`.
        if let (weekday, length) = peekWeekdayName(), let nth = nthBeforeDash(at: offset + length) {
            offset += length
            while peek != UInt8(ascii: "]") { offset += 1 }
            offset += 1
            var spec = DateSpec(year: year, day: .nthWeekday(month: month, weekday: weekday, nth: nth))
            parseDateOffsets(into: &spec)
            return (spec, nil)
        }
        offset = afterMonth
        return (DateSpec(year: year, day: .monthDay(month: month, day: 1)), month)
    }

    /// `[n]` or `[-n]` at `i` followed by a '-': its n.
    private func nthBeforeDash(at i: Int) -> Int? {
        guard i + 2 < bytes.count, bytes[i] == UInt8(ascii: "[") else { return nil }
        var j = i + 1
        let negative = bytes[j] == UInt8(ascii: "-")
        if negative { j += 1 }
        guard j + 1 < bytes.count, (UInt8(ascii: "1")...UInt8(ascii: "5")).contains(bytes[j]),
            bytes[j + 1] == UInt8(ascii: "]")
        else { return nil }
        var k = j + 2
        while k < bytes.count, bytes[k] == UInt8(ascii: " ") { k += 1 }
        guard k < bytes.count, bytes[k] == UInt8(ascii: "-") else { return nil }
        let n = Int(bytes[j] - UInt8(ascii: "0"))
        return negative ? -n : n
    }

    /// ` +Su`, ` -Sa`, ` +2 days`, in that order, each optional.
    private mutating func parseDateOffsets(into spec: inout DateSpec) {
        let save = offset
        skipSpaces()
        if let sign = peekSign, offset + 3 <= bytes.count {
            offset += 1
            if let weekday = takeWeekday() {
                spec.weekdayShift = (sign, weekday)
            } else {
                offset -= 1
            }
        }
        if spec.weekdayShift == nil { offset = save }
        if let days = parseDayOffset() { spec.dayOffset = days }
    }

    // MARK: Weekdays and holidays

    private mutating func parseWeekdaySelector(into rule: inout OpeningHoursRule) throws(OpeningHoursError) {
        while true {
            if takeWord("PH") {
                rule.holidays.append(HolidaySelector(kind: .public, dayOffset: parseDayOffset() ?? 0))
            } else if takeWord("SH") {
                rule.holidays.append(HolidaySelector(kind: .school, dayOffset: parseDayOffset() ?? 0))
            } else if let weekday = takeWeekday() {
                rule.weekdays.append(try parseWeekdayRange(from: weekday))
            } else {
                return
            }
            // `,` joins items; a space joins a weekday list to a holiday list (`PH Mo-Fr`). A `,` and a
            // space separate rules (`Sa, Su 10:00-16:00` is all Saturday, and Sunday's hours).
            let save = offset
            if take(","), atWeekdayOrHoliday { continue }
            offset = save
            skipSpaces()
            guard atWeekdayOrHoliday, offset > save else {
                offset = save
                return
            }
        }
    }

    private mutating func parseWeekdayRange(from start: Int) throws(OpeningHoursError) -> WeekdayRange {
        var range = WeekdayRange(start: start, end: start)
        if take("[") {
            repeat {
                let negative = take("-")
                let first = try parseNumber(in: 1...5, what: "an occurrence 1-5")
                if negative {
                    range.occurrences.append(-first...(-first))
                } else if take("-") {
                    let last = try parseNumber(in: first...5, what: "an occurrence \(first)-5")
                    range.occurrences.append(first...last)
                } else {
                    range.occurrences.append(first...first)
                }
            } while take(",")
            guard take("]") else { throw expected("']'") }
            range.dayOffset = parseDayOffset() ?? 0
        } else {
            let save = offset
            skipSpaces()
            if takeDash() {
                skipSpaces()
                if let end = takeWeekday() { range.end = end } else { offset = save }
            } else {
                offset = save
            }
        }
        return range
    }

    /// ` +1 day`, ` -2 days`: consumed only whole.
    private mutating func parseDayOffset() -> Int? {
        let save = offset
        skipSpaces()
        if let sign = peekSign {
            offset += 1
            if let days = try? parseNumber(in: 1...366, what: "") {
                skipSpaces()
                if takeWord("days") || takeWord("day") { return sign * days }
            }
        }
        offset = save
        return nil
    }

    // MARK: Times

    private mutating func parseTimeSelector() throws(OpeningHoursError) -> [TimeSpan] {
        var spans: [TimeSpan] = []
        repeat {
            skipSpaces()
            spans.append(try parseTimeSpan())
        } while continuesList(with: { $0.atTimeStart })
        return spans
    }

    private mutating func parseTimeSpan() throws(OpeningHoursError) -> TimeSpan {
        let start = try parseTimePoint(latest: 24 * 60)
        if take("+") { return TimeSpan(start: start, end: nil, isOpenEnded: true) }
        skipSpaces()
        guard takeDash() else { throw expected("'-' or '+' after a time") }
        skipSpaces()
        if peek == nil || peek == UInt8(ascii: ",") || peek == UInt8(ascii: ";") {
            return TimeSpan(start: start, end: nil, isOpenEnded: true)  // `16:00-`: an end not given
        }
        var span = TimeSpan(start: start, end: try parseTimePoint(latest: 48 * 60))
        span.isOpenEnded = take("+")
        let save = offset
        skipSpaces()
        if take("/") {
            skipSpaces()
            let first = try parseNumber(in: 0...99, what: "a repeat interval")
            span.repeatMinutes = take(":") ? first * 60 + (try parseNumber(in: 0...59, what: "minutes")) : first
        } else {
            offset = save
        }
        return span
    }

    private mutating func parseTimePoint(latest: Int) throws(OpeningHoursError) -> TimePoint {
        if take("(") {
            skipSpaces()
            guard let event = takeSolarEvent() else { throw expected("sunrise, sunset, dawn or dusk") }
            skipSpaces()
            guard let sign = peekSign else { throw expected("'+' or '-'") }
            offset += 1
            skipSpaces()
            let minutes = try parseClock(latest: 24 * 60)
            skipSpaces()
            guard take(")") else { throw expected("')'") }
            return .solar(event, offsetMinutes: sign * minutes)
        }
        if let event = takeSolarEvent() { return .solar(event, offsetMinutes: 0) }
        return .clock(minutes: try parseClock(latest: latest))
    }

    /// `H:MM` or `HH:MM`, at most `latest` minutes after midnight.
    private mutating func parseClock(latest: Int) throws(OpeningHoursError) -> Int {
        let start = offset
        var hour = try parseNumber(in: 0...48, what: "an hour")
        guard offset - start <= 2 else { throw OpeningHoursError(.expected("a time HH:MM"), at: start) }
        var minute = 0
        // Minutes may be left out (`10-18`), as by mappers typing hours only.
        if take(":") {
            let minuteStart = offset
            minute = try parseNumber(in: 0...59, what: "minutes 00-59")
            guard offset - minuteStart == 2 else {
                throw OpeningHoursError(.expected("two-digit minutes"), at: minuteStart)
            }
        }
        // A 12-hour clock (`11am`, `2pm`, `12am` is midnight).
        let meridiemStart = offset
        skipSpaces()
        if hour <= 12, takeWord("am") || takeWord("pm") {
            let isPM = bytes[offset - 2] | 0x20 == UInt8(ascii: "p")
            hour = hour % 12 + (isPM ? 12 : 0)
        } else {
            offset = meridiemStart
        }
        guard hour * 60 + minute <= latest else { throw OpeningHoursError(.outOfRange("time"), at: start) }
        return hour * 60 + minute
    }

    private mutating func takeSolarEvent() -> SolarEvent? {
        for (word, event) in [("sunrise", .sunrise), ("sunset", .sunset), ("dawn", .dawn), ("dusk", .dusk)]
            as [(String, SolarEvent)]
        where takeWord(word) {
            return event
        }
        return nil
    }

    // MARK: Lookahead

    private var peek: UInt8? { offset < bytes.count ? bytes[offset] : nil }
    private var peekDigit: Bool { peek.map { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } ?? false }
    private var peekSign: Int? {
        peek == UInt8(ascii: "+") ? 1 : (peek == UInt8(ascii: "-") ? -1 : nil)
    }

    /// A clock time (`10:00`, `10-`, `10+`, `10am`), a solar event, or `(` before one; not `24/7`.
    private var atTimeStart: Bool {
        if peek == UInt8(ascii: "(") || ["sunrise", "sunset", "dawn", "dusk"].contains(where: { atWord($0) }) {
            return true
        }
        var i = offset
        while i < bytes.count, isDigit(bytes[i]), i - offset < 3 { i += 1 }
        guard (1...2).contains(i - offset) else { return false }
        while i < bytes.count, bytes[i] == UInt8(ascii: " ") { i += 1 }
        guard i < bytes.count else { return false }
        if [UInt8(ascii: ":"), UInt8(ascii: "-"), UInt8(ascii: "+"), 0xE2].contains(bytes[i]) { return true }
        return i + 1 < bytes.count && [UInt8(ascii: "a"), UInt8(ascii: "p")].contains(bytes[i] | 0x20)
            && bytes[i + 1] | 0x20 == UInt8(ascii: "m")
    }

    private var atMonth: Bool { monthAt(offset) != nil }

    /// A month, `easter`, or a year followed by either.
    private var atDateStart: Bool {
        if atMonth || atWord("easter") { return true }
        guard peekYear() != nil else { return false }
        var probe = self
        probe.offset += 4
        probe.skipSpaces()
        return probe.atMonth || probe.atWord("easter")
    }
    private var atWeekdayOrHoliday: Bool { atWord("PH") || atWord("SH") || peekWeekday() != nil }

    /// After a list item: a ',' followed by another item is consumed; anything else is left alone.
    /// Where the grammar has ", " separate rules (`Jan, Apr-Jul Fr` is all January and Fridays from
    /// April), `spaced` is false and a space after the ',' ends the list.
    private mutating func continuesList(
        spaced: Bool = true, with startsItem: (inout OpeningHoursParser) -> Bool
    ) -> Bool {
        let save = offset
        if spaced { skipSpaces() }
        if take(",") {
            if spaced { skipSpaces() }
            if startsItem(&self) { return true }
        }
        offset = save
        return false
    }

    private mutating func skipSpaces() {
        while let byte = peek, byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") { offset += 1 }
    }

    private mutating func take(_ literal: String) -> Bool {
        let utf8 = literal.utf8
        guard bytes.count - offset >= utf8.count, bytes[offset..<offset + utf8.count].elementsEqual(utf8) else {
            return false
        }
        offset += utf8.count
        return true
    }

    /// '-', or the en dash (U+2013) some mappers type.
    private mutating func takeDash() -> Bool { take("-") || take("\u{2013}") }

    /// A case-insensitive word not followed by a letter.
    private func atWord(_ word: String) -> Bool {
        let utf8 = word.utf8
        guard bytes.count - offset >= utf8.count else { return false }
        for (i, byte) in utf8.enumerated() where bytes[offset + i] | 0x20 != byte | 0x20 { return false }
        let next = offset + utf8.count
        return next == bytes.count || !isLetter(bytes[next])
    }

    private mutating func takeWord(_ word: String) -> Bool {
        guard atWord(word) else { return false }
        offset += word.utf8.count
        return true
    }

    private func isLetter(_ byte: UInt8) -> Bool {
        (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z")
    }

    private static let weekdayFullNames = [
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    ]
    private static let monthNames = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]

    /// 0 = Monday ... 6 = Sunday and the name's length, when a weekday stands here: `Mo`, or in
    /// English as mappers also write it, `Mon` or `Monday` (never the start of `sunrise`).
    private func peekWeekdayName() -> (weekday: Int, length: Int)? {
        var end = offset
        while end < bytes.count, isLetter(bytes[end]), end - offset < 10 { end += 1 }
        guard end - offset >= 2 else { return nil }
        let word = bytes[offset..<end].map { $0 | 0x20 }
        for (weekday, name) in Self.weekdayFullNames.enumerated() {
            let full = Array(name.utf8)
            if word.count == 2 || word.count == 3 || word.count == full.count,
                word.elementsEqual(full.prefix(word.count))
            {
                return (weekday, word.count)
            }
        }
        return nil
    }

    private func peekWeekday() -> Int? { peekWeekdayName()?.weekday }

    private mutating func takeWeekday() -> Int? {
        guard let (weekday, length) = peekWeekdayName() else { return nil }
        offset += length
        return weekday
    }

    private func monthAt(_ i: Int) -> Int? {
        guard bytes.count - i >= 3, i + 3 == bytes.count || !isLetter(bytes[i + 3]) else { return nil }
        let name = [bytes[i] | 0x20, bytes[i + 1] | 0x20, bytes[i + 2] | 0x20]
        return Self.monthNames.firstIndex { $0.utf8.elementsEqual(name) }.map { $0 + 1 }
    }

    private mutating func takeMonth() -> Int? {
        guard let month = monthAt(offset) else { return nil }
        offset += 3
        return month
    }

    /// Four digits 1900-9999 not followed by a digit or ':' (which would make them something else).
    private func peekYear() -> Int? {
        guard bytes.count - offset >= 4 else { return nil }
        var value = 0
        for byte in bytes[offset..<offset + 4] {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        if offset + 4 < bytes.count, bytes[offset + 4] == UInt8(ascii: ":") || isDigit(bytes[offset + 4]) {
            return nil
        }
        return value >= 1900 ? value : nil
    }

    /// A day of the month (1-2 digits, 1-31) not followed by ':' (that would be an hour).
    private func peekDayNumber() -> (value: Int, length: Int)? {
        var i = offset
        var value = 0
        while i < bytes.count, isDigit(bytes[i]), i - offset < 3 {
            value = value * 10 + Int(bytes[i] - UInt8(ascii: "0"))
            i += 1
        }
        let length = i - offset
        guard (1...2).contains(length), (1...31).contains(value) else { return nil }
        if i < bytes.count, bytes[i] == UInt8(ascii: ":") { return nil }
        return (value, length)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// Up to four digits, in `range`.
    private mutating func parseNumber(in range: ClosedRange<Int>, what: String) throws(OpeningHoursError) -> Int {
        let start = offset
        var value = 0
        while let byte = peek, isDigit(byte), offset - start < 4 {
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
            offset += 1
        }
        guard offset > start else { throw OpeningHoursError(.expected(what), at: start) }
        guard range.contains(value) else { throw OpeningHoursError(.outOfRange(what), at: start) }
        return value
    }

    private func expected(_ what: String) -> OpeningHoursError { OpeningHoursError(.expected(what), at: offset) }
}
