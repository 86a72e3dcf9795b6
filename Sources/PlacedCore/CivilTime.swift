// Proleptic Gregorian dates and wall-clock times, as opening hours and time zones need them: day
// counts from 1970-01-01 (Howard Hinnant's days_from_civil), weekdays, ISO 8601 weeks and Easter.

/// A date of the proleptic Gregorian calendar, without a time zone.
public struct CivilDate: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var year: Int
    /// 1 ... 12.
    public var month: Int
    /// 1 ... 31.
    public var day: Int

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// The date `days` days after 1970-01-01 (negative: before).
    public init(daysSinceEpoch days: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153  // 0 = March
        day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }

    /// Days since 1970-01-01; the day may lie outside its month (2026-01-32 is 2026-02-01).
    public var daysSinceEpoch: Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    public func adding(days: Int) -> CivilDate { CivilDate(daysSinceEpoch: daysSinceEpoch + days) }

    /// 0 = Monday ... 6 = Sunday (ISO 8601 order, as opening_hours lists them).
    public var weekday: Int {
        let days = daysSinceEpoch + 3  // 1970-01-01 was a Thursday
        return ((days % 7) + 7) % 7
    }

    public var isValid: Bool {
        (1...12).contains(month) && (1...CivilDate.days(inMonth: month, of: year)).contains(day)
    }

    public static func isLeap(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    public static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// ISO 8601 week number (1 ... 53): weeks start on Monday, week 1 holds the year's first Thursday.
    public var isoWeek: Int {
        let thursday = adding(days: 3 - weekday)
        let firstOfYear = CivilDate(year: thursday.year, month: 1, day: 1)
        return (thursday.daysSinceEpoch - firstOfYear.daysSinceEpoch) / 7 + 1
    }

    /// Western (Gregorian) Easter Sunday: the anonymous Gregorian algorithm (Meeus/Jones/Butcher).
    public static func easter(of year: Int) -> CivilDate {
        let a = year % 19
        let b = year / 100
        let c = year % 100
        let h = (19 * a + b - b / 4 - (8 * b + 13) / 25 + 15) % 30
        let l = (32 + 2 * (b % 4) + 2 * (c / 4) - h - c % 4) % 7
        let m = (a + 11 * h + 22 * l) / 451
        let month = (h + l - 7 * m + 114) / 31
        let day = (h + l - 7 * m + 114) % 31 + 1
        return CivilDate(year: year, month: month, day: day)
    }

    public static func < (a: CivilDate, b: CivilDate) -> Bool {
        (a.year, a.month, a.day) < (b.year, b.month, b.day)
    }

    public var description: String { "\(year.padded(4))-\(month.padded(2))-\(day.padded(2))" }
}

/// A wall-clock date and time, to the second, without a time zone.
public struct CivilDateTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var date: CivilDate
    /// Seconds since the date's midnight, 0 ..< 86,400.
    public var secondOfDay: Int

    public init(date: CivilDate, secondOfDay: Int) {
        self.date = date
        self.secondOfDay = secondOfDay
    }

    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        self.init(date: CivilDate(year: year, month: month, day: day), secondOfDay: hour * 3600 + minute * 60 + second)
    }

    /// Seconds since 1970-01-01T00:00:00 of the same wall clock (as if it were UTC).
    public init(secondsSinceEpoch seconds: Int) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        date = CivilDate(daysSinceEpoch: days)
        secondOfDay = seconds - days * 86_400
    }

    public var secondsSinceEpoch: Int { date.daysSinceEpoch * 86_400 + secondOfDay }

    public var hour: Int { secondOfDay / 3600 }
    public var minute: Int { secondOfDay / 60 % 60 }
    public var second: Int { secondOfDay % 60 }

    public static func < (a: CivilDateTime, b: CivilDateTime) -> Bool {
        (a.date, a.secondOfDay) < (b.date, b.secondOfDay)
    }

    public var description: String { "\(date)T\(hour.padded(2)):\(minute.padded(2)):\(second.padded(2))" }
}

extension Int {
    /// Decimal digits, zero-padded on the left to `width`.
    fileprivate func padded(_ width: Int) -> String {
        let digits = String(magnitude)
        let padding = String(repeating: "0", count: Swift.max(0, width - digits.count))
        return (self < 0 ? "-" : "") + padding + digits
    }
}
