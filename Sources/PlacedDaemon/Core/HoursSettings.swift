import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Where opening hours are evaluated (docs/DESIGN.md, "Place details"): the device's zone (`TimeZone=`,
/// else `TZ`, else /etc/localtime, else UTC) and the holidays an operator lists (`PublicHolidays=`,
/// `SchoolHolidays=`). Without a list, `PH` and `SH` are unknown days: a place whose answer they
/// would change is neither open nor closed then, and only then.
public struct HoursSettings: Equatable, Sendable {
    public var timeZone: TimeZoneRules
    /// Where the zone came from, for the log: `Europe/Helsinki`, `/etc/localtime`, `UTC`.
    public var timeZoneSource: String
    public var holidays: HolidayCalendar

    /// The zone database's directory, as glibc and systemd read it.
    static let zoneDirectory = "/usr/share/zoneinfo"

    /// The settings `configuration` names, the zone read from its file now.
    static func load(_ configuration: Configuration, environment: String? = HoursSettings.environmentZone())
        -> HoursSettings
    {
        let (zone, source) = loadZone(named: configuration.timeZone, environment: environment)
        return HoursSettings(
            timeZone: zone, timeZoneSource: source,
            holidays: HolidayCalendar(
                publicHolidays: days(configuration.publicHolidays), schoolHolidays: days(configuration.schoolHolidays)))
    }

    /// A list's days; nil for an empty one (checked when the setting was read).
    private static func days(_ text: String) -> Set<CivilDate>? {
        guard !text.isEmpty, let days = try? parseDays(text) else { return nil }
        return Set(days)
    }

    static func environmentZone() -> String? { getenv("TZ").map { String(cString: $0) } }

    /// `TimeZone=`'s zone when set (checked when the setting was read), else `TZ`'s, else /etc/localtime,
    /// else UTC; a `TZ` or /etc/localtime that does not read is logged and passed over.
    static func loadZone(named name: String, environment: String?) -> (TimeZoneRules, String) {
        if !name.isEmpty, let zone = try? zone(named: name) { return (zone, name) }
        if var tz = environment, !tz.isEmpty {
            if tz.hasPrefix(":") { tz.removeFirst() }
            do {
                return (try zone(named: tz), "TZ=\(tz)")
            } catch {
                Log.warning("TZ=\(tz): \(error); opening hours use /etc/localtime")
            }
        }
        do {
            return (try zone(atPath: "/etc/localtime"), "/etc/localtime")
        } catch {
            Log.warning("/etc/localtime: \(error); opening hours are evaluated in UTC (set TimeZone=)")
            return (TimeZoneRules(fixedOffset: 0), "UTC")
        }
    }

    /// The zone a name (`Europe/Helsinki`) or an absolute path names.
    static func zone(named name: String) throws(HoursSettingError) -> TimeZoneRules {
        if name.hasPrefix("/") { return try zone(atPath: name) }
        guard !name.split(separator: "/").contains(".."), name.utf8.count <= 255 else {
            throw HoursSettingError("'\(name)' is no zone name")
        }
        if name == "UTC" || name == "Etc/UTC", (try? zone(atPath: "\(zoneDirectory)/\(name)")) == nil {
            return TimeZoneRules(fixedOffset: 0)
        }
        return try zone(atPath: "\(zoneDirectory)/\(name)")
    }

    static func zone(atPath path: String) throws(HoursSettingError) -> TimeZoneRules {
        let bytes = try readSmallFile(path)
        do {
            return try TimeZoneRules(tzif: bytes)
        } catch {
            throw HoursSettingError("\(path) is no time zone file (\(error))")
        }
    }

    /// A file of at most 1 MiB (a TZif file is a few kilobytes).
    private static func readSmallFile(_ path: String) throws(HoursSettingError) -> [UInt8] {
        let descriptor: Int32
        do {
            descriptor = try checkPOSIX(open(path, O_RDONLY | O_CLOEXEC), "open")
        } catch {
            throw HoursSettingError("\(path): \(error)")
        }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while bytes.count <= 1 << 20 {
            let count: Int
            do {
                count = try retryingOnInterrupt("read") {
                    chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                }
            } catch {
                throw HoursSettingError("\(path): \(error)")
            }
            if count == 0 { return bytes }
            bytes += chunk[..<count]
        }
        throw HoursSettingError("\(path) is larger than 1 MiB")
    }

    /// The days `PublicHolidays=` or `SchoolHolidays=` lists: dates (`2026-12-06`) and inclusive ranges
    /// (`2026-06-01..2026-08-09`) separated by spaces or commas; at most `maximumDays` in all.
    static func parseDays(_ text: String) throws(HoursSettingError) -> [CivilDate] {
        var days: [CivilDate] = []
        for item in text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\t" }) {
            let ends = item.split(separator: ".", omittingEmptySubsequences: false)
            let range: (CivilDate, CivilDate)
            if ends.count == 1, let day = date(ends[0]) {
                range = (day, day)
            } else if ends.count == 3, ends[1].isEmpty, let from = date(ends[0]), let to = date(ends[2]), from <= to {
                range = (from, to)
            } else {
                throw HoursSettingError("'\(item)' is no date (YYYY-MM-DD) or range of dates (YYYY-MM-DD..YYYY-MM-DD)")
            }
            let count = range.1.daysSinceEpoch - range.0.daysSinceEpoch + 1
            guard days.count + count <= maximumDays else {
                throw HoursSettingError("more than \(maximumDays) days listed")
            }
            days += (0..<count).map { range.0.adding(days: $0) }
        }
        return days
    }

    /// Ten years of days: enough for any calendar an operator maintains by hand.
    static let maximumDays = 3660

    private static func date(_ text: Substring) -> CivilDate? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2])
        else { return nil }
        let date = CivilDate(year: year, month: month, day: day)
        return date.isValid && RFC3339.years.contains(year) ? date : nil
    }
}

public struct HoursSettingError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
