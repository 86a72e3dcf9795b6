// Evaluating opening hours: a day's schedule from the rules, the state at a wall-clock time, the next
// change and the day's intervals. The rules combine as the specification and opening-hours-rs have
// it: a `;` rule selecting a day replaces the day (and the night spilling into it from the day before);
// a `,` rule overlays its times; a `||` rule applies where the rules before it leave the day closed.

/// The dates of public (`PH`) and school (`SH`) holidays where the place is. `nil`: not known. A
/// value's `PH` rules then make the answer `unknown` wherever a holiday could change it, and only
/// there: `Mo-Fr 09:00-17:00; PH off` is unknown on weekdays from 09:00 to 17:00 and closed at night.
public struct HolidayCalendar: Equatable, Sendable {
    public var publicHolidays: Set<CivilDate>?
    public var schoolHolidays: Set<CivilDate>?

    public init(publicHolidays: Set<CivilDate>? = nil, schoolHolidays: Set<CivilDate>? = nil) {
        self.publicHolidays = publicHolidays
        self.schoolHolidays = schoolHolidays
    }
}

/// What evaluation needs from outside the value: where the place is (for sunrise and sunset), its
/// holidays and the zone its clocks keep.
public struct OpeningHoursContext: Equatable, Sendable {
    /// nil: times relative to the sun are unknown.
    public var coordinate: Coordinate?
    public var holidays: HolidayCalendar
    public var timeZone: TimeZoneRules

    public init(coordinate: Coordinate?, holidays: HolidayCalendar = HolidayCalendar(), timeZone: TimeZoneRules) {
        self.coordinate = coordinate
        self.holidays = holidays
        self.timeZone = timeZone
    }
}

/// Part of a day in one state: minutes after midnight, `end` at most 1440.
public struct OpeningHoursInterval: Equatable, Sendable {
    public var start: Int
    public var end: Int
    public var state: OpeningHoursRule.State
    public var comment: String?
}

/// The answer at an instant.
public struct OpeningHoursStatus: Equatable, Sendable {
    public var state: OpeningHoursRule.State
    /// Unix seconds of the next change of state; nil when none comes within the horizon.
    public var nextChange: Int?
    public var comment: String?
}

extension OpeningHours {
    /// How far `nextChange` looks: a year and a day, so a yearly rule's next occurrence is found.
    public static let nextChangeHorizonDays = 367

    /// The state at `unixSeconds` and when it next changes, on the clocks of `context.timeZone`.
    public func status(at unixSeconds: Int, in context: OpeningHoursContext) -> OpeningHoursStatus {
        let local = context.timeZone.localTime(at: unixSeconds)
        let current = interval(at: local, in: context)
        let next = nextChange(after: local, in: context).map { context.timeZone.unixSeconds(for: $0) }
        return OpeningHoursStatus(state: current.state, nextChange: next, comment: current.comment)
    }

    /// The state at a wall-clock time.
    public func state(at time: CivilDateTime, in context: OpeningHoursContext) -> OpeningHoursRule.State {
        interval(at: time, in: context).state
    }

    /// The day's parts that are open or unknown, in order.
    public func intervals(on date: CivilDate, in context: OpeningHoursContext) -> [OpeningHoursInterval] {
        schedule(on: date, in: context).segments.filter { $0.state != .closed }
    }

    /// The first wall-clock time after `time` (to the minute) at which the state differs from the state
    /// at `time`; nil when it stays the same for `nextChangeHorizonDays`.
    public func nextChange(after time: CivilDateTime, in context: OpeningHoursContext) -> CivilDateTime? {
        let minute = time.secondOfDay / 60
        var segments = schedule(on: time.date, in: context).segments
        let current = segments.first { $0.end > minute }?.state ?? .closed
        for dayIndex in 0...Self.nextChangeHorizonDays {
            let date = time.date.adding(days: dayIndex)
            if dayIndex > 0 { segments = schedule(on: date, in: context).segments }
            for segment in segments where segment.state != current && (dayIndex > 0 || segment.start > minute) {
                return CivilDateTime(date: date, secondOfDay: segment.start * 60)
            }
        }
        return nil
    }

    private func interval(at time: CivilDateTime, in context: OpeningHoursContext) -> OpeningHoursInterval {
        let minute = time.secondOfDay / 60
        return schedule(on: time.date, in: context).segments.first { $0.end > minute }
            ?? OpeningHoursInterval(start: 0, end: DaySchedule.minutesPerDay, state: .closed)
    }

    // MARK: A day's schedule

    /// The day's schedule. Where the holidays are unknown, the value is evaluated as if every day were
    /// a holiday and as if none were; where the two differ, the answer is unknown.
    func schedule(on date: CivilDate, in context: OpeningHoursContext) -> DaySchedule {
        let publicCases: [Bool?] =
            context.holidays.publicHolidays == nil && usesPublicHolidays ? [false, true] : [nil]
        let schoolCases: [Bool?] =
            context.holidays.schoolHolidays == nil && usesSchoolHolidays ? [false, true] : [nil]
        var result: DaySchedule?
        for publicCase in publicCases {
            for schoolCase in schoolCases {
                let evaluator = DayEvaluator(
                    context: context, assumePublicHoliday: publicCase, assumeSchoolHoliday: schoolCase)
                let schedule = evaluator.schedule(of: rules, on: date)
                result = result.map { $0.merged(with: schedule) } ?? schedule
            }
        }
        return result ?? DaySchedule()
    }
}

/// A day from midnight to midnight as consecutive intervals; closed where no rule says otherwise.
struct DaySchedule: Equatable {
    static let minutesPerDay = 1440

    private(set) var segments = [OpeningHoursInterval(start: 0, end: minutesPerDay, state: .closed)]

    var isAlwaysClosed: Bool { segments.allSatisfy { $0.state == .closed } }

    init() {}

    /// Closed but for `spans`, later ones over earlier ones.
    init(_ spans: [OpeningHoursInterval]) { overlay(spans) }

    mutating func overlay(_ spans: [OpeningHoursInterval]) {
        for span in spans { set(span.start, span.end, to: span.state, comment: span.comment) }
    }

    func overlaid(with spans: [OpeningHoursInterval]) -> DaySchedule {
        var result = self
        result.overlay(spans)
        return result
    }

    /// Sets `start ..< end` (clipped to the day) to `state`.
    mutating func set(_ start: Int, _ end: Int, to state: OpeningHoursRule.State, comment: String?) {
        let start = max(0, start)
        let end = min(Self.minutesPerDay, end)
        guard start < end else { return }
        var result: [OpeningHoursInterval] = []
        for segment in segments {
            if segment.start < start { result.append(with(segment, end: min(segment.end, start))) }
            if segment.end > end { result.append(with(segment, start: max(segment.start, end))) }
        }
        result.append(OpeningHoursInterval(start: start, end: end, state: state, comment: comment))
        segments = Self.coalesced(result.sorted { $0.start < $1.start })
    }

    /// Where the two agree, their state; elsewhere unknown.
    func merged(with other: DaySchedule) -> DaySchedule {
        let boundaries = Set(segments.map(\.start) + other.segments.map(\.start)).sorted()
        var result: [OpeningHoursInterval] = []
        for (index, start) in boundaries.enumerated() {
            let end = index + 1 < boundaries.count ? boundaries[index + 1] : Self.minutesPerDay
            let mine = segments.last { $0.start <= start }!
            let theirs = other.segments.last { $0.start <= start }!
            let agree = mine.state == theirs.state && mine.comment == theirs.comment
            result.append(
                OpeningHoursInterval(
                    start: start, end: end, state: agree ? mine.state : .unknown, comment: agree ? mine.comment : nil))
        }
        var schedule = DaySchedule()
        schedule.segments = Self.coalesced(result)
        return schedule
    }

    private static func coalesced(_ segments: [OpeningHoursInterval]) -> [OpeningHoursInterval] {
        var result: [OpeningHoursInterval] = []
        for segment in segments {
            if let last = result.last, last.state == segment.state, last.comment == segment.comment {
                result[result.count - 1].end = segment.end
            } else {
                result.append(segment)
            }
        }
        return result
    }

    private func with(_ segment: OpeningHoursInterval, start: Int? = nil, end: Int? = nil) -> OpeningHoursInterval {
        OpeningHoursInterval(
            start: start ?? segment.start, end: end ?? segment.end, state: segment.state, comment: segment.comment)
    }
}

/// One evaluation of the rules for a day, under fixed assumptions about unknown holidays.
private struct DayEvaluator {
    let context: OpeningHoursContext
    /// Used only when the calendar lacks that kind of holiday.
    let assumePublicHoliday: Bool?
    let assumeSchoolHoliday: Bool?

    func schedule(of rules: [OpeningHoursRule], on date: CivilDate) -> DaySchedule {
        var schedule = DaySchedule()
        // Whether any rule selects the day (for `||`), and whether an open rule selecting it has made
        // the day its own, so that a later rule's night from the day before no longer reaches in.
        var matched = false
        var claimed = false
        let yesterday = date.adding(days: -1)
        for rule in rules {
            let today = selects(rule, date)
            let selectsYesterday = selects(rule, yesterday)
            guard today || selectsYesterday || rule.joiner == .fallback else { continue }
            let spans = spans(of: rule, on: date, today: today, yesterday: selectsYesterday)
            let isClosed = rule.state == .closed && rule.condition == nil
            switch rule.joiner {
            case .normal where today && !(isClosed && !rule.times.isEmpty):
                // `Mo 10:00-14:00` or `Mo off`: the day is the rule's; earlier rules' hours go, and so
                // does the night running over from the day before, unless the rule has one itself.
                schedule = DaySchedule(spans)
                claimed = rule.state == .open
            case .normal where today, .additional:
                // `We 12:00-14:00 off` closes those times only; `, Sa 10:00-12:00` lays its times over.
                schedule.overlay(spans)
                claimed = claimed || (today && rule.state == .open && !isClosed)
            case .normal:
                // The rule selects only the day before: its night reaches into a day no open rule has
                // claimed. A closed night (`Fr 20:00-04:00 off`) always closes.
                if isClosed || !claimed { schedule.overlay(spans) }
            case .fallback:
                if !matched || schedule.isAlwaysClosed {
                    schedule = DaySchedule(spans)
                    claimed = today && rule.state == .open
                    matched = false
                }
            }
            matched = matched || today
        }
        return schedule
    }

    /// The rule's times on `date`, clipped to the day: those running past midnight from the day before
    /// (when it selects that day), then its own (when it selects this one).
    private func spans(of rule: OpeningHoursRule, on date: CivilDate, today: Bool, yesterday: Bool)
        -> [OpeningHoursInterval]
    {
        let day = DaySchedule.minutesPerDay
        var result: [OpeningHoursInterval] = []
        if yesterday {
            for span in spans(of: rule, on: date.adding(days: -1)) where span.end > day {
                result.append(
                    OpeningHoursInterval(
                        start: max(0, span.start - day), end: span.end - day, state: span.state, comment: rule.comment))
            }
        }
        if today {
            for span in spans(of: rule, on: date) {
                result.append(
                    OpeningHoursInterval(
                        start: span.start, end: min(span.end, day), state: span.state, comment: rule.comment))
            }
        }
        return result.filter { $0.start < $0.end }
    }

    /// Minutes from the day's midnight (ends up to 48:00) and the state of each.
    private func spans(of rule: OpeningHoursRule, on date: CivilDate)
        -> [(start: Int, end: Int, state: OpeningHoursRule.State)]
    {
        let state: OpeningHoursRule.State = rule.condition == nil ? rule.state : .unknown
        let day = DaySchedule.minutesPerDay
        guard !rule.times.isEmpty else { return [(0, day, state)] }
        var result: [(Int, Int, OpeningHoursRule.State)] = []
        for span in rule.times {
            // A span bounded by a sun event the day does not have (no dusk in Oulu's white nights, nor
            // before midnight in Helsinki's June) has no part that day, as both reference evaluators
            // have it; nor has one that an offset pushes past midnight.
            guard let (start, startKnown) = minutes(of: span.start, on: date, isStart: true), start < day else {
                continue
            }
            guard let endPoint = span.end else {
                // `18:00+`: open from then until midnight, as opening-hours-rs reads it (KOpeningHours
                // reads it closed; the specification says only that the end is not given).
                result.append((start, max(start, day), startKnown ? state : .unknown))
                continue
            }
            guard let (clockEnd, endKnown) = minutes(of: endPoint, on: date, isStart: false) else { continue }
            // `20:00-05:00` ends the next morning; `10:00-10:00` is 24 hours.
            let end = clockEnd <= start ? clockEnd + day : clockEnd
            // `10:00-18:00+` is open until 18:00 and closed after, as both reference evaluators read it:
            // "perhaps longer" is nothing a device can tell anyone.
            result.append((start, end, startKnown && endKnown ? state : .unknown))
        }
        return result
    }

    /// The time point's minutes on `date`, and whether they are known (a solar time without a position is
    /// not); nil for a sun event the day does not have.
    private func minutes(of point: TimePoint, on date: CivilDate, isStart: Bool) -> (Int, Bool)? {
        switch point {
        case .clock(let minutes):
            return (minutes, true)
        case .solar(let event, let offset):
            guard let coordinate = context.coordinate else { return (fallbackMinutes(event) + offset, false) }
            let noon = context.timeZone.unixSeconds(for: CivilDateTime(date: date, secondOfDay: 43_200))
            let utcOffset = context.timeZone.period(at: noon).utcOffset
            switch SolarTimes.occurrence(event, on: date, at: coordinate) {
            case .at(let seconds):
                // A span cannot start at an event past the day's midnight (Helsinki's dusk in June, at
                // 00:40): the day has none, as both reference evaluators count it. It can end at one.
                let local = Int((seconds + Double(utcOffset)) / 60)
                guard !isStart || (0..<DaySchedule.minutesPerDay).contains(local) else { return nil }
                return (max(0, local + offset), true)
            case .sunAlwaysAbove, .sunAlwaysBelow:
                return nil
            }
        }
    }

    /// Where a solar time without a position is placed; the span it bounds is unknown anyway.
    private func fallbackMinutes(_ event: SolarEvent) -> Int {
        switch event {
        case .dawn: 330
        case .sunrise: 360
        case .sunset: 1080
        case .dusk: 1110
        }
    }

    private func selects(_ rule: OpeningHoursRule, _ date: CivilDate) -> Bool {
        if !rule.years.isEmpty, !rule.years.contains(where: { $0.contains(date.year) }) { return false }
        if !rule.dates.isEmpty, !rule.dates.contains(where: { $0.contains(date) }) { return false }
        if !rule.weeks.isEmpty, !rule.weeks.contains(where: { $0.contains(date.isoWeek) }) { return false }
        if rule.weekdays.isEmpty && rule.holidays.isEmpty { return true }
        return rule.weekdays.contains { $0.contains(date) } || rule.holidays.contains { isHoliday(date, $0) }
    }

    private func isHoliday(_ date: CivilDate, _ selector: HolidaySelector) -> Bool {
        let day = date.adding(days: -selector.dayOffset)
        switch selector.kind {
        case .public:
            return context.holidays.publicHolidays?.contains(day) ?? assumePublicHoliday ?? false
        case .school:
            return context.holidays.schoolHolidays?.contains(day) ?? assumeSchoolHoliday ?? false
        }
    }
}
