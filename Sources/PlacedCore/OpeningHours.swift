// An OpenStreetMap `opening_hours` value as a value type: the rules of
// https://wiki.openstreetmap.org/wiki/Key:opening_hours/specification as far as real data uses them.
// OpeningHoursParser.swift reads the text, OpeningHoursEvaluator.swift answers open, closed or unknown.

/// A parsed `opening_hours` value: its rules in order, each joined to the ones before it.
public struct OpeningHours: Equatable, Sendable {
    /// The longest value parsed, in UTF-8 bytes. OSM caps a tag value at 255 characters (1,020 bytes
    /// at most in UTF-8); four kilobytes passes every real value with room to spare, while bounding
    /// what a hostile extract can make one parse cost (linear in the length, no recursion).
    public static let maximumLength = 4096

    public var rules: [OpeningHoursRule]

    public init(rules: [OpeningHoursRule]) { self.rules = rules }

    /// Parses `text`; throws where it stops making sense, with the byte offset and what was expected.
    public init(parsing text: String) throws(OpeningHoursError) {
        var parser = OpeningHoursParser(text)
        rules = try parser.parse()
    }

    /// Whether any rule selects public (`PH`) or school (`SH`) holidays.
    public var usesPublicHolidays: Bool { rules.contains { $0.holidays.contains { $0.kind == .public } } }
    public var usesSchoolHolidays: Bool { rules.contains { $0.holidays.contains { $0.kind == .school } } }
}

/// Why a value is not parsed. `offset` is in UTF-8 bytes from the start of the value.
public struct OpeningHoursError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        /// Longer than `OpeningHours.maximumLength` bytes; not looked at.
        case tooLong(bytes: Int)
        /// Nothing but spaces.
        case empty
        /// Something else stood at `offset`; what the grammar allows there.
        case expected(String)
        /// A number out of its range there (minute 75, week 54, day 32).
        case outOfRange(String)
    }

    public var reason: Reason
    public var offset: Int

    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    public var description: String {
        switch reason {
        case .tooLong(let bytes): "too long: \(bytes) bytes, at most \(OpeningHours.maximumLength)"
        case .empty: "empty value"
        case .expected(let what): "expected \(what) at offset \(offset)"
        case .outOfRange(let what): "\(what) out of range at offset \(offset)"
        }
    }
}

/// One rule: which days (wide selectors, then weekdays and holidays), which times of them, and the
/// state it gives them. An empty selector list selects everything.
public struct OpeningHoursRule: Equatable, Sendable {
    /// How a rule combines with the rules before it on a day it selects.
    public enum Joiner: Equatable, Sendable {
        /// `;`: replaces what earlier rules said about the day.
        case normal
        /// `,`: adds its times to the day, overriding earlier rules only within them.
        case additional
        /// `||`: applies only when the rules before it leave the day closed or unselected.
        case fallback
    }

    public enum State: Equatable, Sendable {
        case open
        case closed
        case unknown
    }

    public var joiner: Joiner = .normal
    /// `24/7`.
    public var isAlwaysOpen = false
    /// A free-text wide selector (`"on school days": 08:00-12:00`): whether it holds is unknown.
    public var condition: String?
    public var years: [YearRange] = []
    public var dates: [DateRange] = []
    public var weeks: [WeekRange] = []
    public var weekdays: [WeekdayRange] = []
    public var holidays: [HolidaySelector] = []
    /// Empty: the whole day.
    public var times: [TimeSpan] = []
    public var state: State = .open
    public var comment: String?

    public init() {}
}

/// `2026`, `2026-2030`, `2026-2040/2`, `2026+`.
public struct YearRange: Equatable, Sendable {
    public var start: Int
    /// Inclusive; `Int.max` for an open end.
    public var end: Int
    public var step: Int

    func contains(_ year: Int) -> Bool { year >= start && year <= end && (year - start) % step == 0 }
}

/// `week 01-53/2`: ISO 8601 week numbers; a range may wrap the year end (`week 52-02`).
public struct WeekRange: Equatable, Sendable {
    public var start: Int
    public var end: Int
    public var step: Int

    func contains(_ week: Int) -> Bool {
        if start <= end { return week >= start && week <= end && (week - start) % step == 0 }
        return week >= start || week <= end
    }
}

/// A day of a year named without a year, or with one.
public struct DateSpec: Equatable, Sendable {
    public enum Day: Equatable, Sendable {
        /// `Dec 25`; the day past the month's end is its last (`Feb 29` in a common year is Feb 28).
        case monthDay(month: Int, day: Int)
        /// The month's last day (the end of `Jan-Mar`).
        case endOfMonth(month: Int)
        /// `Mar Su[-1]`: the nth (negative: from the end) weekday (0 = Monday) of the month.
        case nthWeekday(month: Int, weekday: Int, nth: Int)
        /// `easter`: Western Easter Sunday.
        case easter
    }

    public var year: Int?
    public var day: Day
    /// `+Su` / `-Su`: moved to the next (previous) such weekday, the day itself excluded.
    public var weekdayShift: (direction: Int, weekday: Int)?
    /// `+2 days`.
    public var dayOffset = 0

    public static func == (a: DateSpec, b: DateSpec) -> Bool {
        a.year == b.year && a.day == b.day && a.weekdayShift?.direction == b.weekdayShift?.direction
            && a.weekdayShift?.weekday == b.weekdayShift?.weekday && a.dayOffset == b.dayOffset
    }

    /// The date this names in `year` (its own year when it has one).
    func resolve(in year: Int) -> CivilDate {
        let year = self.year ?? year
        var date: CivilDate
        switch day {
        case .monthDay(let month, let day):
            date = CivilDate(year: year, month: month, day: min(day, CivilDate.days(inMonth: month, of: year)))
        case .endOfMonth(let month):
            date = CivilDate(year: year, month: month, day: CivilDate.days(inMonth: month, of: year))
        case .nthWeekday(let month, let weekday, let nth):
            let first = CivilDate(year: year, month: month, day: 1)
            let firstMatch = 1 + (weekday - first.weekday + 7) % 7
            let length = CivilDate.days(inMonth: month, of: year)
            let lastMatch = firstMatch + (length - firstMatch) / 7 * 7
            date = CivilDate(
                year: year, month: month, day: nth > 0 ? firstMatch + (nth - 1) * 7 : lastMatch + (nth + 1) * 7)
            date = CivilDate(daysSinceEpoch: date.daysSinceEpoch)
        case .easter:
            date = CivilDate.easter(of: year)
        }
        if let shift = weekdayShift {
            let distance =
                shift.direction > 0
                ? (shift.weekday - date.weekday + 6) % 7 + 1 : -((date.weekday - shift.weekday + 6) % 7 + 1)
            date = date.adding(days: distance)
        }
        return dayOffset == 0 ? date : date.adding(days: dayOffset)
    }
}

/// `Dec 24-Jan 06`, `Jan-Mar`, `easter -2 days`, `2026 Dec 20+`: inclusive of both ends; a range
/// without years whose end comes before its start runs over the year's end.
public struct DateRange: Equatable, Sendable {
    public var start: DateSpec
    public var end: DateSpec
    /// `Dec 20+`: from the start on, without end (to the year's end when the start has no year).
    public var isOpenEnded = false

    func contains(_ date: CivilDate) -> Bool {
        if isOpenEnded {
            let from = start.resolve(in: date.year)
            return start.year == nil ? date >= from : date >= from && (start.year ?? 0) <= date.year
        }
        // The range's start in this year or the year before: one of them holds the date if any does.
        for year in [date.year, date.year - 1] where start.year == nil || start.year == year {
            let from = start.resolve(in: year)
            guard from <= date else { continue }
            var to = end.resolve(in: year)
            if to < from, end.year == nil { to = end.resolve(in: year + 1) }
            if date <= to { return true }
        }
        return false
    }
}

/// `Mo`, `Mo-Fr`, `Fr-Mo`, `Su[1,-1]`, `Sa[-1] -1 day`. Weekdays are 0 = Monday ... 6 = Sunday.
public struct WeekdayRange: Equatable, Sendable {
    public var start: Int
    public var end: Int
    /// Which occurrences in the month (`[1-2]`, `[-1]`); empty: every one.
    public var occurrences: [ClosedRange<Int>] = []
    public var dayOffset = 0

    func contains(_ date: CivilDate) -> Bool {
        let day = dayOffset == 0 ? date : date.adding(days: -dayOffset)
        let weekday = day.weekday
        let inRange = start <= end ? (start...end).contains(weekday) : weekday >= start || weekday <= end
        guard inRange else { return false }
        guard !occurrences.isEmpty else { return true }
        let fromStart = (day.day - 1) / 7 + 1
        let fromEnd = -((CivilDate.days(inMonth: day.month, of: day.year) - day.day) / 7 + 1)
        return occurrences.contains { $0.contains(fromStart) || $0.contains(fromEnd) }
    }
}

/// `PH`, `PH +1 day`, `SH`.
public struct HolidaySelector: Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        case `public`
        case school
    }
    public var kind: Kind
    public var dayOffset = 0
}

/// A time of day: a clock time (minutes since midnight, up to 48:00 for an end) or a solar event
/// with an offset in minutes.
public enum TimePoint: Equatable, Sendable {
    case clock(minutes: Int)
    case solar(SolarEvent, offsetMinutes: Int)
}

/// `08:00-12:00`, `20:00-02:00` (ends the next day), `18:00+`, `10:00-16:00+`, `sunset-(sunrise+01:00)`.
public struct TimeSpan: Equatable, Sendable {
    public var start: TimePoint
    /// nil for `18:00+`.
    public var end: TimePoint?
    /// `+`: open at least until `end` (or from `start`), then unknown.
    public var isOpenEnded = false
    /// `10:00-16:00/01:30`: departures every so often. Read as the whole span.
    public var repeatMinutes: Int?
}
