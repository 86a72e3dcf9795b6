// placed-bench hours: the opening hours evaluator from the command line, for the differential tests
// (Tests/integration/test_opening_hours.py) and, with --time, its speed.
import Foundation
import PlacedCore

private let hoursUsage =
    "placed-bench hours [--zone TZIF] [--holidays FILE] [--time VALUES [--instants N]]\n"
    + "  stdin: value<TAB>instant (RFC 3339 with offset)<TAB>lat<TAB>lon per line;\n"
    + "  stdout: open|closed|unknown<TAB>next change (RFC 3339) or -, or error<TAB>reason\n"
    + "  --zone: the zone file evaluation uses (default: $TZ, else /etc/localtime)\n"
    + "  --holidays: public holiday dates, YYYY-MM-DD per line (default: none known)\n"
    + "  --time: parse and evaluate p50 per value over the values in VALUES (one per line)"

/// `placed-bench hours [--zone TZIF] [--holidays FILE] [--time VALUES [--instants N]]`
func hoursBenchmark(_ arguments: [String]) throws {
    var zonePath = ProcessInfo.processInfo.environment["TZ"].map { "/usr/share/zoneinfo/\($0)" } ?? "/etc/localtime"
    var holidaysPath: String?
    var timingPath: String?
    var instants = 50
    var rest = arguments[...]
    while let flag = rest.popFirst() {
        guard let value = rest.popFirst() else { throw BenchmarkUsage(hoursUsage) }
        switch flag {
        case "--zone": zonePath = value
        case "--holidays": holidaysPath = value
        case "--time": timingPath = value
        case "--instants": instants = Int(value) ?? 50
        default: throw BenchmarkUsage(hoursUsage)
        }
    }
    guard let zoneData = FileManager.default.contents(atPath: zonePath) else {
        throw BenchmarkFailure("cannot read the zone file \(zonePath)")
    }
    let zone = try TimeZoneRules(tzif: [UInt8](zoneData))
    var holidays = HolidayCalendar()
    if let holidaysPath {
        guard let text = try? String(contentsOfFile: holidaysPath, encoding: .utf8) else {
            throw BenchmarkFailure("cannot read \(holidaysPath)")
        }
        holidays.publicHolidays = Set(text.split(separator: "\n").compactMap { parseDate(String($0)) })
    }
    if let timingPath {
        try timeOpeningHours(valuesPath: timingPath, zone: zone, holidays: holidays, instants: instants)
    } else {
        evaluateLines(zone: zone, holidays: holidays)
    }
}

/// One answer per input line, in order; each distinct value parsed once.
private func evaluateLines(zone: TimeZoneRules, holidays: HolidayCalendar) {
    var parsed: [String: Result<OpeningHours, OpeningHoursError>] = [:]
    var output = ""
    while let line = readLine(strippingNewline: true) {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        guard fields.count == 4, let instant = parseRFC3339(fields[1]), let latitude = Double(fields[2]),
            let longitude = Double(fields[3])
        else {
            output += "error\tbad input line\n"
            continue
        }
        let value = fields[0]
        let result = parsed[value] ?? Result { () throws(OpeningHoursError) in try OpeningHours(parsing: value) }
        parsed[value] = result
        switch result {
        case .failure(let error):
            output += "error\t\(error)\n"
        case .success(let hours):
            let context = OpeningHoursContext(
                coordinate: Coordinate(latitude: latitude, longitude: longitude), holidays: holidays, timeZone: zone)
            let status = hours.status(at: instant, in: context)
            let next = status.nextChange.map { formatRFC3339($0, zone: zone) } ?? "-"
            output += "\(status.state)\t\(next)\n"
        }
        if output.utf8.count > 1 << 16 {
            print(output, terminator: "")
            output = ""
        }
    }
    print(output, terminator: "")
}

/// Parse p50 and evaluate p50 (state and next change at `instants` instants through 2026) per value.
private func timeOpeningHours(valuesPath: String, zone: TimeZoneRules, holidays: HolidayCalendar, instants: Int) throws
{
    guard let text = try? String(contentsOfFile: valuesPath, encoding: .utf8) else {
        throw BenchmarkFailure("cannot read \(valuesPath)")
    }
    let values = text.split(separator: "\n").map(String.init)
    let context = OpeningHoursContext(
        coordinate: Coordinate(latitude: 60.17, longitude: 24.94), holidays: holidays, timeZone: zone)
    let start2026 = 1_767_225_600
    // Not a whole number of hours, so the instants fall at all times of day.
    let step = 365 * 86_400 / max(1, instants) + 3_607
    var parseTimes: [Double] = []
    var evaluateTimes: [Double] = []
    var failures = 0
    for value in values {
        var hours: OpeningHours?
        parseTimes.append(
            BenchClock.seconds { hours = try? OpeningHours(parsing: value) } * 1e6)
        guard let hours else {
            failures += 1
            continue
        }
        var sink = 0
        let seconds = BenchClock.seconds {
            for i in 0..<instants { sink &+= hours.status(at: start2026 + i * step, in: context).nextChange ?? 0 }
        }
        if sink == 42 { print("") }  // keeps the work
        evaluateTimes.append(seconds * 1e6 / Double(instants))
    }
    let parse = Percentiles(parseTimes)
    let evaluate = Percentiles(evaluateTimes)
    print("values \(values.count) (unparsed \(failures)), \(instants) instants each")
    print("parse p50 \(parse.p50.formatted(decimals: 2)) µs  p99 \(parse.p99.formatted(decimals: 2)) µs")
    print(
        "evaluate (state + next change) p50 \(evaluate.p50.formatted(decimals: 2)) µs  "
            + "p99 \(evaluate.p99.formatted(decimals: 2)) µs")
}

private func parseDate(_ text: String) -> CivilDate? {
    let parts = text.split(separator: "-").compactMap { Int($0) }
    guard parts.count == 3 else { return nil }
    return CivilDate(year: parts[0], month: parts[1], day: parts[2])
}

/// `2026-03-29T03:30:00+03:00` or `...Z` → Unix seconds.
private func parseRFC3339(_ text: String) -> Int? {
    let utf8 = Array(text.utf8)
    guard utf8.count >= 20 else { return nil }
    func number(_ from: Int, _ length: Int) -> Int? { Int(String(decoding: utf8[from..<from + length], as: UTF8.self)) }
    guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
        let minute = number(14, 2), let second = number(17, 2)
    else { return nil }
    let local = CivilDateTime(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    var offset = 0
    if utf8[19] == UInt8(ascii: "+") || utf8[19] == UInt8(ascii: "-") {
        guard utf8.count >= 25, let hours = number(20, 2), let minutes = number(23, 2) else { return nil }
        offset = (hours * 3600 + minutes * 60) * (utf8[19] == UInt8(ascii: "-") ? -1 : 1)
    }
    return local.secondsSinceEpoch - offset
}

private func formatRFC3339(_ unixSeconds: Int, zone: TimeZoneRules) -> String {
    let offset = zone.period(at: unixSeconds).utcOffset
    let local = CivilDateTime(secondsSinceEpoch: unixSeconds + offset)
    let sign = offset < 0 ? "-" : "+"
    let hours = abs(offset) / 3600
    let minutes = abs(offset) / 60 % 60
    return "\(local)\(sign)\(hours < 10 ? "0" : "")\(hours):\(minutes < 10 ? "0" : "")\(minutes)"
}
