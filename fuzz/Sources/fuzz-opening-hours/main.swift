import FuzzSupport
import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

/// An `opening_hours` value as a place's tags carry it: parsed, then evaluated as placed does for a
/// place's status (now and the next change, within a year), at Helsinki and near the pole (the sun
/// neither rises nor sets), with holidays known and unknown.
private let helsinki: TimeZoneRules = {
    let fd = open("/usr/share/zoneinfo/Europe/Helsinki", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { fatalError("no /usr/share/zoneinfo/Europe/Helsinki") }
    defer { close(fd) }
    var bytes = [UInt8](repeating: 0, count: 1 << 16)
    let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    return try! TimeZoneRules(tzif: Array(bytes[..<max(count, 0)]))
}()

private let contexts: [OpeningHoursContext] = [
    OpeningHoursContext(
        coordinate: Coordinate(latitude: 60.1699, longitude: 24.9384),
        holidays: HolidayCalendar(
            publicHolidays: [CivilDate(year: 2026, month: 12, day: 6), CivilDate(year: 2026, month: 12, day: 24)],
            schoolHolidays: [CivilDate(year: 2026, month: 12, day: 21)]),
        timeZone: helsinki),
    OpeningHoursContext(
        coordinate: Coordinate(latitude: 89.9, longitude: 15.6), timeZone: TimeZoneRules(fixedOffset: 3600)),
    OpeningHoursContext(coordinate: nil, timeZone: TimeZoneRules(fixedOffset: -36_000)),
]

/// 2026-12-06 10:00 UTC (a holiday, a Sunday), 2024-02-29 23:59 UTC (a leap day), 2027-03-28 00:30 UTC
/// (Europe's clocks go forward that night).
private let moments = [1_796_551_200, 1_709_251_140, 1_806_193_800]

runFuzzer { input in
    guard let hours = try? OpeningHours(parsing: input.text) else { return }
    for (index, context) in contexts.enumerated() {
        let moment = moments[index % moments.count]
        let status = hours.status(at: moment, in: context)
        if let next = status.nextChange, next <= moment {
            fatalError("the next change \(next) is not after \(moment)")
        }
        let local = context.timeZone.localTime(at: moment)
        _ = hours.intervals(on: local.date, in: context)
    }
}
