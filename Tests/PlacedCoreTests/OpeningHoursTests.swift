import Foundation
import PlacedTestSupport
import Testing

@testable import PlacedCore

/// Evaluates in Helsinki, on its clocks, at Senate Square.
private struct Helsinki {
    let zone: TimeZoneRules
    var holidays = HolidayCalendar()

    init(holidays: HolidayCalendar = HolidayCalendar()) throws {
        zone = try systemZone("Europe/Helsinki")
        self.holidays = holidays
    }

    var context: OpeningHoursContext {
        OpeningHoursContext(
            coordinate: Coordinate(latitude: 60.1699, longitude: 24.9384), holidays: holidays, timeZone: zone)
    }

    func state(_ value: String, _ y: Int, _ m: Int, _ d: Int, _ h: Int, _ min: Int = 0) throws
        -> OpeningHoursRule.State
    {
        try OpeningHours(parsing: value).state(
            at: CivilDateTime(year: y, month: m, day: d, hour: h, minute: min), in: context)
    }
}

// 2026-12-07 is a Monday; 2026-12-06 (a Sunday) is Finland's Independence Day.

@Suite struct OpeningHoursEvaluationTests {
    @Test func weekdaysAndTimes() throws {
        let at = try Helsinki()
        let value = "Mo-Fr 08:00-12:00,13:00-17:30; Sa 10:00-14:00"
        #expect(try at.state(value, 2026, 12, 7, 9) == .open)
        #expect(try at.state(value, 2026, 12, 7, 12, 30) == .closed)
        #expect(try at.state(value, 2026, 12, 7, 17, 29) == .open)
        #expect(try at.state(value, 2026, 12, 7, 17, 30) == .closed)  // the end is exclusive
        #expect(try at.state(value, 2026, 12, 12, 11) == .open)
        #expect(try at.state(value, 2026, 12, 13, 11) == .closed)
        #expect(try at.state("Fr-Mo 10:00-12:00", 2026, 12, 13, 11) == .open)  // wraps over the week's end
        #expect(try at.state("Fr-Mo 10:00-12:00", 2026, 12, 8, 11) == .closed)
    }

    @Test func timesPastMidnightBelongToTheirDay() throws {
        let at = try Helsinki()
        let value = "Fr-Sa 20:00-05:00; Su 12:00-18:00"
        #expect(try at.state(value, 2026, 12, 12, 3) == .open)  // Saturday 03:00: Friday's night
        #expect(try at.state(value, 2026, 12, 13, 3) == .closed)  // Sunday's own rule replaces Saturday's night
        #expect(try at.state("Fr-Sa 20:00-05:00, Su 12:00-18:00", 2026, 12, 13, 3) == .open)  // ',' adds
        #expect(try at.state("Mo 10:00-26:00", 2026, 12, 8, 1, 59) == .open)
        #expect(try at.state("Mo 10:00-26:00", 2026, 12, 8, 2) == .closed)
    }

    @Test func twentyFourHundredEndsTheDay() throws {
        let at = try Helsinki()
        #expect(try at.state("Mo 18:00-24:00", 2026, 12, 7, 23, 59) == .open)
        #expect(try at.state("Mo 18:00-24:00", 2026, 12, 8, 0) == .closed)
        #expect(try at.state("24/7", 2026, 12, 8, 0) == .open)
    }

    @Test func openEnds() throws {
        let at = try Helsinki()
        #expect(try at.state("Mo 18:00+", 2026, 12, 7, 17) == .closed)
        #expect(try at.state("Mo 18:00+", 2026, 12, 7, 23) == .open)
        #expect(try at.state("Mo 10:00-18:00+", 2026, 12, 7, 17) == .open)
        #expect(try at.state("Mo 10:00-18:00+", 2026, 12, 7, 19) == .closed)
        let parsed = try OpeningHours(parsing: "Mo 10:00-18:00+")
        #expect(parsed.rules[0].times[0].isOpenEnded)
    }

    @Test func weekNumbers() throws {
        let at = try Helsinki()
        // 2026-12-07 is in ISO week 50; 2027-01-01 in 2026's week 53.
        #expect(try at.state("week 50 Mo 10:00-12:00", 2026, 12, 7, 11) == .open)
        #expect(try at.state("week 51-52 Mo 10:00-12:00", 2026, 12, 7, 11) == .closed)
        #expect(try at.state("week 01-53/2 10:00-12:00", 2027, 1, 1, 11) == .open)  // 53 = 1 + 2·26
        #expect(try at.state("week 02-52/2 10:00-12:00", 2027, 1, 1, 11) == .closed)
        #expect(try at.state("week 52-02 10:00-12:00", 2027, 1, 1, 11) == .open)
    }

    @Test func monthAndDateRangesAcrossTheYearEnd() throws {
        let at = try Helsinki()
        #expect(try at.state("Nov-Feb 10:00-12:00", 2027, 1, 15, 11) == .open)
        #expect(try at.state("Nov-Feb 10:00-12:00", 2027, 3, 1, 11) == .closed)
        #expect(try at.state("Dec 24-Jan 06 off; 10:00-12:00", 2026, 12, 31, 11) == .open)  // off first, overridden
        #expect(try at.state("10:00-12:00; Dec 24-Jan 06 off", 2026, 12, 31, 11) == .closed)
        #expect(try at.state("10:00-12:00; Dec 24-Jan 06 off", 2027, 1, 6, 11) == .closed)
        #expect(try at.state("10:00-12:00; Dec 24-Jan 06 off", 2027, 1, 7, 11) == .open)
        #expect(try at.state("2028 Feb 29 10:00-12:00", 2028, 2, 29, 11) == .open)
        #expect(try at.state("2028 Feb 29 10:00-12:00", 2027, 2, 28, 11) == .closed)
        #expect(try at.state("2026-2027 10:00-12:00", 2028, 1, 3, 11) == .closed)
        #expect(try at.state("easter -2 days 10:00-12:00", 2026, 4, 3, 11) == .open)  // Good Friday
        #expect(try at.state("Mar Su[-1] 10:00-12:00", 2026, 3, 29, 11) == .open)  // last Sunday of March
        #expect(try at.state("Mar Su[-1] 10:00-12:00", 2026, 3, 22, 11) == .closed)
    }

    @Test func fallbackAppliesOnlyWhereEarlierRulesLeaveTheDayClosed() throws {
        let at = try Helsinki()
        let value = "Mo-Fr 10:00-18:00 || \"by appointment\""
        #expect(try at.state(value, 2026, 12, 7, 11) == .open)
        #expect(try at.state(value, 2026, 12, 7, 20) == .closed)  // Monday is the first rule's
        #expect(try at.state(value, 2026, 12, 12, 11) == .unknown)  // Saturday falls through
    }

    @Test func offOverridesOnlyWhatItSelects() throws {
        let at = try Helsinki()
        #expect(try at.state("Mo-Fr 10:00-20:00; We off", 2026, 12, 9, 12) == .closed)
        #expect(try at.state("Mo-Fr 10:00-20:00; We 12:00-14:00 off", 2026, 12, 9, 13) == .closed)
        #expect(try at.state("Mo-Fr 10:00-20:00; We 12:00-14:00 off", 2026, 12, 9, 15) == .open)
        #expect(try at.state("24/7; Su closed", 2026, 12, 13, 12) == .closed)
        #expect(try at.state("Mo-Fr 10:00-20:00 unknown", 2026, 12, 7, 12) == .unknown)
    }

    @Test func commentsCarryOverOrMakeTheStateUnknown() throws {
        let at = try Helsinki()
        #expect(try at.state("\"only on request\"", 2026, 12, 7, 12) == .unknown)
        #expect(try at.state("Mo \"call first\"", 2026, 12, 7, 12) == .unknown)
        #expect(try at.state("Mo 10:00-14:00 \"lunch only\"", 2026, 12, 7, 12) == .open)
        let hours = try OpeningHours(parsing: "Mo 10:00-14:00 open \"lunch only\"")
        let status = hours.status(at: unix(2026, 12, 7, 10), in: at.context)  // 12:00 EET
        #expect(status.comment == "lunch only")
    }

    @Test func sunriseAndSunsetAtThePlace() throws {
        let at = try Helsinki()
        // Sunrise 09:24, sunset 15:13 on 2026-12-21.
        #expect(try at.state("sunrise-sunset", 2026, 12, 21, 9, 15) == .closed)
        #expect(try at.state("sunrise-sunset", 2026, 12, 21, 9, 35) == .open)
        #expect(try at.state("sunrise-sunset", 2026, 12, 21, 15, 5) == .open)
        #expect(try at.state("sunrise-sunset", 2026, 12, 21, 15, 25) == .closed)
        #expect(try at.state("(sunset-01:00)-22:00", 2026, 12, 21, 14, 20) == .open)
        let hours = try OpeningHours(parsing: "sunrise-sunset")
        let intervals = hours.intervals(on: CivilDate(year: 2026, month: 12, day: 21), in: at.context)
        #expect(intervals.count == 1)
        #expect(abs(intervals[0].start - (9 * 60 + 24)) <= 2 && abs(intervals[0].end - (15 * 60 + 13)) <= 2)
        // Without a position the sun's times are unknown, not guessed.
        var nowhere = at.context
        nowhere.coordinate = nil
        #expect(hours.state(at: CivilDateTime(year: 2026, month: 12, day: 21, hour: 12), in: nowhere) == .unknown)
    }

    @Test func publicHolidaysWithAndWithoutACalendar() throws {
        let value = "Mo-Su 10:00-18:00; PH off"
        let unknownHolidays = try Helsinki()
        #expect(try unknownHolidays.state(value, 2026, 12, 6, 12) == .unknown)  // could be a holiday
        #expect(try unknownHolidays.state(value, 2026, 12, 6, 20) == .closed)  // closed either way
        let finland = try Helsinki(
            holidays: HolidayCalendar(publicHolidays: [CivilDate(year: 2026, month: 12, day: 6)]))
        #expect(try finland.state(value, 2026, 12, 6, 12) == .closed)
        #expect(try finland.state(value, 2026, 12, 7, 12) == .open)
        #expect(try finland.state("PH +1 day 10:00-12:00", 2026, 12, 7, 11) == .open)
        let school = try Helsinki(
            holidays: HolidayCalendar(schoolHolidays: [CivilDate(year: 2026, month: 12, day: 22)]))
        #expect(try school.state("SH 10:00-12:00", 2026, 12, 22, 11) == .open)
        #expect(try school.state("SH 10:00-12:00", 2026, 12, 21, 11) == .closed)
    }

    @Test func daylightSavingChangesInHelsinki() throws {
        let at = try Helsinki()
        let hours = try OpeningHours(parsing: "Mo-Su 03:00-04:00, 10:00-12:00")
        // 2026-03-29: the clocks skip 03:00-04:00, so the place never opens that night.
        let beforeGap = unix(2026, 3, 29, 0, 59)  // 02:59 EET
        let status = hours.status(at: beforeGap, in: at.context)
        #expect(status.state == .closed)
        // Opening "at 03:00" lands where the clocks land: 04:00 EEST, which is also closing time.
        #expect(status.nextChange == unix(2026, 3, 29, 1))
        #expect(hours.status(at: unix(2026, 3, 29, 1), in: at.context).state == .closed)
        // 2026-10-25: 03:00-04:00 comes twice, and is open both times.
        #expect(hours.status(at: unix(2026, 10, 25, 0, 30), in: at.context).state == .open)  // 03:30 EEST
        #expect(hours.status(at: unix(2026, 10, 25, 1, 30), in: at.context).state == .open)  // 03:30 EET
        #expect(hours.status(at: unix(2026, 10, 25, 2, 30), in: at.context).state == .closed)  // 04:30 EET
    }

    @Test func nextChangeAndItsHorizon() throws {
        let at = try Helsinki()
        let hours = try OpeningHours(parsing: "Mo-Fr 10:00-18:00")
        #expect(
            hours.nextChange(after: CivilDateTime(year: 2026, month: 12, day: 11, hour: 19), in: at.context)
                == CivilDateTime(year: 2026, month: 12, day: 14, hour: 10))
        #expect(
            try OpeningHours(parsing: "24/7").nextChange(
                after: CivilDateTime(year: 2026, month: 1, day: 1), in: at.context) == nil)
        // Once a year: found within the horizon of a year and a day.
        let yearly = try OpeningHours(parsing: "Dec 06 10:00-12:00")
        #expect(
            yearly.nextChange(after: CivilDateTime(year: 2026, month: 12, day: 6, hour: 13), in: at.context)
                == CivilDateTime(year: 2027, month: 12, day: 6, hour: 10))
    }
}

@Suite struct OpeningHoursParserTests {
    @Test func readsEveryConstruct() throws {
        let value =
            "2026-2028/2 Dec 24-Jan 06,easter +1 day week 01-10/2: Mo-Fr,Su[1,-1],PH -1 day,SH "
            + "08:00-12:00,(sunrise+00:30)-sunset+,22:00-26:00/01:00 open \"busy\"; 24/7 || \"note\": off"
        let hours = try OpeningHours(parsing: value)
        #expect(hours.rules.count == 3)
        let first = hours.rules[0]
        #expect(first.years == [YearRange(start: 2026, end: 2028, step: 2)])
        #expect(first.dates.count == 2 && first.weeks == [WeekRange(start: 1, end: 10, step: 2)])
        #expect(
            first.weekdays == [
                WeekdayRange(start: 0, end: 4), WeekdayRange(start: 6, end: 6, occurrences: [1...1, -1...(-1)]),
            ])
        #expect(first.holidays == [HolidaySelector(kind: .public, dayOffset: -1), HolidaySelector(kind: .school)])
        #expect(first.times.count == 3 && first.times[2].repeatMinutes == 60 && first.comment == "busy")
        #expect(hours.rules[1].isAlwaysOpen && hours.rules[1].joiner == .normal)
        #expect(
            hours.rules[2].joiner == .fallback && hours.rules[2].condition == "note" && hours.rules[2].state == .closed)
    }

    @Test func namedErrorsWithPositions() {
        func error(_ value: String) -> OpeningHoursError? {
            do {
                _ = try OpeningHours(parsing: value)
                return nil
            } catch { return error }
        }
        #expect(error("") == OpeningHoursError(.empty, at: 0))
        #expect(error("Mo-Fr 10:00-") == nil)  // an open end, as mappers write it
        #expect(error("Mo-Fr 10:75-12:00") == OpeningHoursError(.outOfRange("minutes 00-59"), at: 9))
        #expect(error("Mo-Fr 10:00 12:00")?.reason == .expected("'-' or '+' after a time"))
        #expect(error("Mo-Fr 10:00-12:00 \"unclosed") == OpeningHoursError(.expected("a closing '\"'"), at: 18))
        #expect(error("week 54 10:00-12:00") == OpeningHoursError(.outOfRange("a week number 01-53"), at: 5))
        #expect(error("Seasonal, only summer time")?.offset == 0)
    }

    @Test func aMegabyteValueIsTooLongAndNotRead() {
        let value = String(repeating: "Mo-Fr 10:00-20:00; ", count: 55_000)
        #expect(value.utf8.count > 1_000_000)
        #expect(throws: OpeningHoursError(.tooLong(bytes: value.utf8.count), at: 0)) {
            try OpeningHours(parsing: value)
        }
    }

    @Test func theLongestValueParsesQuickly() throws {
        let rule = "Mo-Fr,Su[1,-1] 10:00-12:00,13:00-20:00; "
        let value = String(String(repeating: rule, count: OpeningHours.maximumLength / rule.utf8.count).dropLast(2))
        let clock = ContinuousClock()
        let elapsed = try clock.measure { _ = try OpeningHours(parsing: value) }
        #expect(elapsed < .seconds(1))
        #expect(try OpeningHours(parsing: value).rules.count == OpeningHours.maximumLength / rule.utf8.count)
    }

    @Test func nestingAndGarbageAreErrorsNotCrashes() {
        let nested = [
            String(repeating: "(", count: 4000) + "sunrise+01:00" + String(repeating: ")", count: 4000),
            String(repeating: "[", count: 4000), String(repeating: "Mo[", count: 1300),
            String(repeating: "\"", count: 4001), String(repeating: "||", count: 2000),
            // Every construct inside every other, as deep as they go.
            "2026 Dec Su[-1] +Mo -1 day-2027 easter +1 day week 01-10/2: Mo[1-2,-1] +1 day,PH -1 day,SH (sunrise-(sunset"
                + "+01:00)+)-(dusk+((01:00)))/05 open \"\"\"",
        ]
        for value in nested {
            #expect(throws: OpeningHoursError.self) { try OpeningHours(parsing: value) }
        }
        var random = SplitMix64(seed: 34)
        let alphabet = Array("MoTuWeFrSaSuJanDecPHSHweek0123456789:-+,;|/()[]\" offeastersunrise".utf8)
        for _ in 0..<3000 {
            let length = Int(random.next() % 200)
            let bytes = (0..<length).map { _ in
                random.next() % 4 == 0
                    ? UInt8(truncatingIfNeeded: random.next()) : alphabet[Int(random.next() % UInt64(alphabet.count))]
            }
            let value = String(decoding: bytes, as: UTF8.self)
            // Either it parses (and then evaluates) or it names its error; nothing else may happen.
            if let hours = try? OpeningHours(parsing: value) {
                let context = OpeningHoursContext(coordinate: nil, timeZone: TimeZoneRules(fixedOffset: 0))
                _ = hours.status(at: 1_800_000_000, in: context)
            }
        }
    }
}
