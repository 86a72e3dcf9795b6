import Foundation
import PlacedTestSupport
import Testing

@testable import PlacedCore

/// A zone of the system's tz database, read as the daemon's adapter will read it.
func systemZone(_ name: String) throws -> TimeZoneRules {
    let data = try #require(FileManager.default.contents(atPath: "/usr/share/zoneinfo/\(name)"))
    return try TimeZoneRules(tzif: [UInt8](data))
}

func unix(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int = 0) -> Int {
    CivilDateTime(year: year, month: month, day: day, hour: hour, minute: minute).secondsSinceEpoch
}

@Suite struct CivilDateTests {
    @Test func daysRoundTripAndWeekdays() {
        for days in stride(from: -800_000, through: 800_000, by: 997) {
            #expect(CivilDate(daysSinceEpoch: days).daysSinceEpoch == days)
        }
        #expect(CivilDate(year: 1970, month: 1, day: 1).weekday == 3)  // Thursday
        #expect(CivilDate(year: 2026, month: 12, day: 7).weekday == 0)  // Monday
        #expect(CivilDate(year: 2028, month: 2, day: 29).weekday == 1)  // Tuesday
        #expect(CivilDate(year: 2028, month: 2, day: 28).adding(days: 1) == CivilDate(year: 2028, month: 2, day: 29))
        #expect(CivilDate(year: 2027, month: 2, day: 28).adding(days: 1) == CivilDate(year: 2027, month: 3, day: 1))
    }

    @Test func isoWeeksAtTheYearEnds() {
        #expect(CivilDate(year: 2026, month: 1, day: 1).isoWeek == 1)  // a Thursday
        #expect(CivilDate(year: 2027, month: 1, day: 1).isoWeek == 53)  // Friday: 2026 has 53 weeks
        #expect(CivilDate(year: 2027, month: 1, day: 4).isoWeek == 1)
        #expect(CivilDate(year: 2024, month: 12, day: 30).isoWeek == 1)  // Monday of 2025's week 1
    }

    @Test func easterDates() {
        #expect(CivilDate.easter(of: 2026) == CivilDate(year: 2026, month: 4, day: 5))
        #expect(CivilDate.easter(of: 2027) == CivilDate(year: 2027, month: 3, day: 28))
        #expect(CivilDate.easter(of: 2038) == CivilDate(year: 2038, month: 4, day: 25))
    }
}

@Suite struct TimeZoneRulesTests {
    @Test func helsinkiSpringForwardSkipsAnHour() throws {
        let zone = try systemZone("Europe/Helsinki")
        let change = unix(2026, 3, 29, 1)  // 01:00 UTC
        #expect(
            zone.localTime(at: change - 1)
                == CivilDateTime(year: 2026, month: 3, day: 29, hour: 2, minute: 59, second: 59))
        #expect(zone.localTime(at: change) == CivilDateTime(year: 2026, month: 3, day: 29, hour: 4))
        #expect(zone.period(at: change).isDaylightSaving)
        // 03:30 never shows on the clocks: read with the offset before, it is 04:30 EEST.
        #expect(
            zone.unixSeconds(for: CivilDateTime(year: 2026, month: 3, day: 29, hour: 3, minute: 30)) == change + 1800)
        #expect(zone.unixSeconds(for: CivilDateTime(year: 2026, month: 3, day: 29, hour: 4)) == change)
    }

    @Test func helsinkiFallBackRepeatsAnHour() throws {
        let zone = try systemZone("Europe/Helsinki")
        let change = unix(2026, 10, 25, 1)
        #expect(zone.localTime(at: change - 1800) == CivilDateTime(year: 2026, month: 10, day: 25, hour: 3, minute: 30))
        #expect(zone.localTime(at: change + 1800) == CivilDateTime(year: 2026, month: 10, day: 25, hour: 3, minute: 30))
        // The repeated 03:30 is its earlier instant.
        #expect(
            zone.unixSeconds(for: CivilDateTime(year: 2026, month: 10, day: 25, hour: 3, minute: 30)) == change - 1800)
        #expect(zone.period(at: change).utcOffset == 7200)
    }

    /// Every zone's offset at seeded instants from 1900 to 2200 (the table, then its footer rule)
    /// equals Foundation's (ICU's own reading of the same database).
    @Test(arguments: [
        "Europe/Helsinki", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago",
        "Pacific/Chatham", "UTC",
    ])
    func offsetsMatchFoundation(name: String) throws {
        let zone = try systemZone(name)
        let reference = try #require(TimeZone(identifier: name))
        var random = SplitMix64(seed: 34)
        for _ in 0..<3000 {
            let instant = Int(random.next() % UInt64(300 * 365 * 86_400)) - 70 * 365 * 86_400
            let expected = reference.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(instant)))
            #expect(zone.period(at: instant).utcOffset == expected, "\(name) at \(instant)")
        }
    }

    @Test func lordHoweKeepsHalfHourDaylightSaving() throws {
        let zone = try systemZone("Australia/Lord_Howe")
        #expect(zone.period(at: unix(2026, 7, 1, 0)).utcOffset == 37_800)  // +10:30
        #expect(zone.period(at: unix(2027, 1, 1, 0)).utcOffset == 39_600)  // +11:00
        #expect(zone.period(at: unix(2127, 1, 1, 0)).utcOffset == 39_600)  // from the footer rule
    }

    @Test func newYorkFromTheFooterRule() throws {
        let zone = try systemZone("America/New_York")
        // 2099: past any table; 2nd Sunday in March (the 8th) 02:00 EST.
        let change = unix(2099, 3, 8, 7)
        #expect(zone.period(at: change - 1).utcOffset == -18_000)
        #expect(zone.period(at: change).utcOffset == -14_400)
    }

    @Test func rejectsWhatIsNotTZif() {
        #expect(throws: TimeZoneError.notTZif) {
            try TimeZoneRules(tzif: Array("not a zone file at all, though longer than a TZif header".utf8))
        }
        #expect(throws: TimeZoneError.truncated("header")) { try TimeZoneRules(tzif: Array("TZif2".utf8)) }
    }

    @Test func truncatedFilesAreErrorsNotCrashes() throws {
        let data = try #require(FileManager.default.contents(atPath: "/usr/share/zoneinfo/Europe/Helsinki"))
        let bytes = [UInt8](data)
        for length in stride(from: 0, to: bytes.count, by: 7) {
            #expect(throws: TimeZoneError.self) { try TimeZoneRules(tzif: Array(bytes[0..<length])) }
        }
    }
}

@Suite struct SolarTimesTests {
    private let helsinki = Coordinate(latitude: 60.1699, longitude: 24.9384)

    /// Local minutes of an event in Helsinki; published (timeanddate.com, Ilmatieteen laitos) to the minute.
    private func localMinutes(_ event: SolarEvent, _ date: CivilDate, utcOffsetHours: Int) throws -> Double {
        guard case .at(let seconds) = SolarTimes.occurrence(event, on: date, at: helsinki) else {
            Issue.record("no \(event) on \(date)")
            return .nan
        }
        return seconds / 60 + Double(utcOffsetHours * 60)
    }

    @Test func helsinkiSolsticesWithinTwoMinutesOfPublished() throws {
        let june = CivilDate(year: 2026, month: 6, day: 21)
        let december = CivilDate(year: 2026, month: 12, day: 21)
        #expect(abs(try localMinutes(.sunrise, june, utcOffsetHours: 3) - (3 * 60 + 54)) <= 2)
        #expect(abs(try localMinutes(.sunset, june, utcOffsetHours: 3) - (22 * 60 + 50)) <= 2)
        #expect(abs(try localMinutes(.sunrise, december, utcOffsetHours: 2) - (9 * 60 + 24)) <= 2)
        #expect(abs(try localMinutes(.sunset, december, utcOffsetHours: 2) - (15 * 60 + 13)) <= 2)
    }

    @Test func whiteNightsHaveNoDuskAndPolarNightNoSunrise() {
        let midsummer = CivilDate(year: 2026, month: 6, day: 21)
        // Helsinki's sun dips 6.4° below the horizon at midsummer: dusk comes, after midnight.
        guard case .at(let dusk) = SolarTimes.occurrence(.dusk, on: midsummer, at: helsinki) else {
            Issue.record("no dusk in Helsinki")
            return
        }
        #expect(dusk / 3600 + 3 > 24)
        // Oulu's sun stays within 2° of it: no dusk at all.
        let oulu = Coordinate(latitude: 65.01, longitude: 25.47)
        #expect(SolarTimes.occurrence(.dusk, on: midsummer, at: oulu) == .sunAlwaysAbove)
        let tromso = Coordinate(latitude: 69.65, longitude: 18.96)
        #expect(
            SolarTimes.occurrence(.sunrise, on: CivilDate(year: 2026, month: 12, day: 21), at: tromso)
                == .sunAlwaysBelow)
        #expect(
            SolarTimes.occurrence(.sunset, on: CivilDate(year: 2026, month: 6, day: 21), at: tromso) == .sunAlwaysAbove)
    }
}
