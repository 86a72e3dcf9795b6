// A place's opening hours at an instant, for records and for the ranker: its raw `opening_hours`
// parsed once per distinct value (`OpeningHoursCache`) and evaluated at the place's position in the
// device's zone.

/// Parsed `opening_hours` values by their raw text: a city has a few hundred distinct values, each
/// parsed once. Not thread-safe: the daemon's loop owns one. Bounded: past `limit` values it starts
/// afresh, so a hostile file cannot grow it.
public final class OpeningHoursCache {
    public static let defaultLimit = 4096
    private var parsed: [String: Result<OpeningHours, OpeningHoursError>] = [:]
    private let limit: Int
    /// `rankingState`'s answers by raw value, for the minute `statesMinute`.
    private var states: [String: OpenState] = [:]
    private var statesMinute = Int.min

    public init(limit: Int = OpeningHoursCache.defaultLimit) { self.limit = max(1, limit) }

    /// The value parsed, or why it is not.
    public func hours(_ raw: String) -> Result<OpeningHours, OpeningHoursError> {
        if let known = parsed[raw] { return known }
        let result: Result<OpeningHours, OpeningHoursError>
        do throws(OpeningHoursError) {
            result = .success(try OpeningHours(parsing: raw))
        } catch {
            result = .failure(error)
        }
        if parsed.count >= limit { parsed.removeAll(keepingCapacity: true) }
        parsed[raw] = result
        return result
    }

    /// Whether `place` is open at `unixSeconds`: nil when it has no hours, they do not parse, or they
    /// leave the answer unknown there (a comment, an open end, a holiday the calendar does not know).
    /// The ranker's question, asked through a closure the daemon hands it.
    public func isOpen(_ place: Place, at unixSeconds: Int, holidays: HolidayCalendar, timeZone: TimeZoneRules)
        -> Bool?
    {
        guard let raw = place.details.openingHours else { return nil }
        return isOpen(raw, at: place.coordinate, unixSeconds: unixSeconds, holidays: holidays, timeZone: timeZone)
    }

    /// The same for a raw value at a position: for candidates read in place, which have no `Place` yet.
    public func isOpen(
        _ raw: String, at coordinate: Coordinate, unixSeconds: Int, holidays: HolidayCalendar, timeZone: TimeZoneRules
    ) -> Bool? {
        guard case .success(let hours) = self.hours(raw) else { return nil }
        let context = OpeningHoursContext(coordinate: coordinate, holidays: holidays, timeZone: timeZone)
        switch hours.state(at: timeZone.localTime(at: unixSeconds), in: context) {
        case .open: return true
        case .closed: return false
        case .unknown: return nil
        }
    }

    /// The ranker's answer for a candidate: `isOpen` as an `OpenState`, remembered by raw value for the
    /// minute `unixSeconds` falls in, so a ranking evaluates each distinct value once and the next fix
    /// in that minute none. The position only moves sunrise and sunset, by seconds over the few
    /// kilometres of one ranking's reach, so the first candidate's answer serves the others.
    public func rankingState(
        _ raw: String, at coordinate: Coordinate, unixSeconds: Int, holidays: HolidayCalendar, timeZone: TimeZoneRules
    ) -> OpenState {
        let minute = unixSeconds >= 0 ? unixSeconds / 60 : (unixSeconds - 59) / 60
        if minute != statesMinute {
            states.removeAll(keepingCapacity: true)
            statesMinute = minute
        }
        if let known = states[raw] { return known }
        let state: OpenState =
            switch isOpen(raw, at: coordinate, unixSeconds: unixSeconds, holidays: holidays, timeZone: timeZone) {
            case true?: .open
            case false?: .closed
            case nil: .unknown
            }
        if states.count >= limit { states.removeAll(keepingCapacity: true) }
        states[raw] = state
        return state
    }

    /// Forgets the remembered states: when the zone or the holidays change.
    public func forgetStates() { states.removeAll() }

    /// The hours of `place` at `unixSeconds` as records show them; nil when it has none or they do not
    /// parse.
    public func summary(of place: Place, at unixSeconds: Int, holidays: HolidayCalendar, timeZone: TimeZoneRules)
        -> PlaceHours?
    {
        guard let raw = place.details.openingHours, case .success(let hours) = self.hours(raw) else { return nil }
        let context = OpeningHoursContext(coordinate: place.coordinate, holidays: holidays, timeZone: timeZone)
        let status = hours.status(at: unixSeconds, in: context)
        let day = timeZone.localTime(at: unixSeconds).date
        return PlaceHours(
            openNow: status.state == .unknown ? nil : status.state == .open,
            nextChange: status.nextChange, date: day, intervals: hours.intervals(on: day, in: context))
    }
}

/// A place's hours evaluated at one instant.
public struct PlaceHours: Equatable, Sendable {
    /// Open (true) or closed (false) then; nil when unknown.
    public var openNow: Bool?
    /// Unix seconds of the next change of state within `OpeningHours.nextChangeHorizonDays`.
    public var nextChange: Int?
    /// The local day the instant falls on, whose open and unknown parts `intervals` lists.
    public var date: CivilDate
    public var intervals: [OpeningHoursInterval]
}

/// RFC 3339 instants, as clients send them (`time` of Details) and records state them (`next_change`).
public enum RFC3339 {
    /// Years accepted: an instant outside them is no question anyone asks of opening hours, and the
    /// civil arithmetic stays well inside `Int`.
    public static let years = 1900...2200

    /// Unix seconds of `2026-12-06T18:30:00+02:00` (`Z` or `z` for UTC, `T`, `t` or a space between
    /// date and time, fractions of a second dropped); nil without a zone, out of `years` or with any
    /// field out of its range.
    public static func parse(_ text: String) -> Int? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 64 else { return nil }
        func number(_ from: Int, _ count: Int) -> Int? {
            var value = 0
            for index in from..<from + count {
                guard index < bytes.count, (48...57).contains(bytes[index]) else { return nil }
                value = value * 10 + Int(bytes[index] - 48)
            }
            return value
        }
        guard let year = number(0, 4), bytes[4] == 0x2D, let month = number(5, 2), bytes[7] == 0x2D,
            let day = number(8, 2), [0x54, 0x74, 0x20].contains(bytes[10]), let hour = number(11, 2),
            bytes[13] == 0x3A, let minute = number(14, 2), bytes[16] == 0x3A, let second = number(17, 2)
        else { return nil }
        var position = 19
        if position < bytes.count, bytes[position] == 0x2E {
            position += 1
            let digitsStart = position
            while position < bytes.count, (48...57).contains(bytes[position]) { position += 1 }
            guard position > digitsStart else { return nil }
        }
        guard position < bytes.count else { return nil }
        var offset = 0
        switch bytes[position] {
        case 0x5A, 0x7A:
            guard position + 1 == bytes.count else { return nil }
        case 0x2B, 0x2D:
            guard position + 6 == bytes.count, let hours = number(position + 1, 2), bytes[position + 3] == 0x3A,
                let minutes = number(position + 4, 2), hours <= 23, minutes <= 59
            else { return nil }
            offset = (hours * 60 + minutes) * 60 * (bytes[position] == 0x2B ? 1 : -1)
        default:
            return nil
        }
        guard years.contains(year), (1...12).contains(month), day >= 1,
            day <= CivilDate.days(inMonth: month, of: year), hour <= 23, minute <= 59, second <= 60
        else { return nil }
        let local = CivilDateTime(
            year: year, month: month, day: day, hour: hour, minute: minute, second: min(second, 59))
        return local.secondsSinceEpoch - offset
    }

    /// `2026-12-06T21:00:00+02:00`: the instant on the clocks of a zone `utcOffset` seconds east of UTC.
    public static func format(_ unixSeconds: Int, utcOffset: Int) -> String {
        let local = CivilDateTime(secondsSinceEpoch: unixSeconds + utcOffset)
        guard utcOffset != 0 else { return "\(local)Z" }
        let minutes = abs(utcOffset) / 60
        return "\(local)\(utcOffset < 0 ? "-" : "+")\(two(minutes / 60)):\(two(minutes % 60))"
    }

    /// `09:30`, `24:00`: minutes after midnight as a wall-clock time.
    public static func clock(minutes: Int) -> String { "\(two(minutes / 60)):\(two(minutes % 60))" }

    private static func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
