import Testing

@testable import PlacedCore

/// Normalizing a place's details (docs/DESIGN.md, "Place details"), their stored form, RFC 3339 and the
/// parsed-values cache the records and the ranker share.
@Suite struct PlaceDetailsTests {
    @Test func contactFormsMergeAndListsSplit() {
        let details = PlaceDetails(tags: [
            (key: "phone", value: " +358 1 ; +358 2;"), (key: "contact:phone", value: "+358 2;+358 3"),
            (key: "contact:website", value: "https://a.example"), (key: "email", value: "a@example.org"),
            (key: "contact:email", value: "a@example.org"), (key: "cuisine", value: "pizza;;burger; pizza"),
            (key: "level", value: "0;-1"), (key: "opening_hours", value: " Mo-Fr 09:00-17:00; Sa 10:00-14:00 "),
            (key: "description", value: "A; B"), (key: "name", value: "not a detail"), (key: "diet:", value: "x"),
            (key: "payment:cash", value: "yes"), (key: "description:FI", value: "Kuvaus"),
            (key: "description:left", value: "not a language"), (key: "wheelchair", value: "  "),
        ])
        #expect(details.list("phone") == ["+358 1", "+358 2", "+358 3"])
        #expect(details.list("website") == ["https://a.example"])
        #expect(details.list("email") == ["a@example.org"])
        #expect(details.list("cuisine") == ["pizza", "burger"])
        #expect(details.list("level") == ["0", "-1"])
        #expect(details.openingHours == "Mo-Fr 09:00-17:00; Sa 10:00-14:00", "trimmed, its ';' kept")
        #expect(details.value("description") == "A; B", "prose is no list")
        #expect(details.description(forLanguage: "fi_FI.UTF-8") == "Kuvaus")
        #expect(details.payment == ["cash": "yes"])
        #expect(details.diet.isEmpty && details.tags["name"] == nil && details.tags["description:left"] == nil)
        #expect(details.value("wheelchair") == nil, "blank values are dropped")
        #expect(PlaceDetails(tags: [(key: "contact:phone", value: "+1")]).list("phone") == ["+1"])
        #expect(PlaceDetails().isEmpty && PlaceDetails(tags: [(key: "fixme", value: "x")]).isEmpty)
    }

    @Test func overlongValuesAndSeparatorsNeverReachTheFile() {
        let long = String(repeating: "x", count: PlaceDetails.maximumValueLength + 1)
        let details = PlaceDetails(tags: [(key: "operator", value: long), (key: "brand", value: "A\u{1E}B\u{1F}C")])
        #expect(details.value("operator") == nil)
        #expect(details.value("brand") == "A B C")
        #expect(PlaceDetails(encoded: details.encoded) == details)
    }

    @Test func theStoredFormRoundTrips() {
        let details = PlaceDetails(tags: [
            (key: "opening_hours", value: "24/7"), (key: "phone", value: "+1;+2"), (key: "diet:vegan", value: "only"),
            (key: "description:sv", value: "Åäö ✓"),
        ])
        let encoded = details.encoded
        #expect(
            encoded
                == "description:sv\u{1F}Åäö ✓\u{1E}diet:vegan\u{1F}only\u{1E}opening_hours\u{1F}24/7\u{1E}phone\u{1F}+1;+2"
        )
        #expect(PlaceDetails(encoded: encoded) == details)
        #expect(PlaceDetails().encoded == nil && PlaceDetails(encoded: nil).isEmpty)
        #expect(PlaceDetails(encoded: "no separator\u{1E}k\u{1F}v").tags == ["k": "v"])
        // A key that holds a separator is not kept: read back, it would be another key (hours unchecked).
        let forged = PlaceDetails(tags: [(key: "diet:x\u{1E}opening_hours", value: "Mo-Zz")])
        #expect(forged.isEmpty && PlaceDetails(encoded: forged.encoded) == forged)
    }

    @Test func rfc3339() {
        #expect(RFC3339.parse("1970-01-01T00:00:00Z") == 0)
        #expect(RFC3339.parse("2026-03-29T03:30:00+03:00") == RFC3339.parse("2026-03-29T00:30:00Z"))
        #expect(RFC3339.parse("2024-02-29 12:00:00.123456-05:30") == RFC3339.parse("2024-02-29T17:30:00Z"))
        for bad in [
            "2026-03-29T03:30:00", "2026-03-29", "2023-02-29T00:00:00Z", "1899-12-31T23:59:59Z",
            "2026-03-29T24:00:00Z", "2026-03-29T03:30:00+0300", "2026-03-29T03:30:00.Z", "x",
        ] {
            #expect(RFC3339.parse(bad) == nil, "\(bad)")
        }
        #expect(RFC3339.format(1_796_630_400, utcOffset: 7200) == "2026-12-07T10:00:00+02:00")
        #expect(RFC3339.format(1_796_630_400, utcOffset: -12_600) == "2026-12-07T04:30:00-03:30")
        #expect(RFC3339.format(1_796_630_400, utcOffset: 0) == "2026-12-07T08:00:00Z")
        #expect(RFC3339.clock(minutes: 1440) == "24:00" && RFC3339.clock(minutes: 65) == "01:05")
    }

    @Test func theCacheAnswersOpenClosedOrUnknown() {
        let cache = OpeningHoursCache(limit: 2)
        let utc = TimeZoneRules(fixedOffset: 0)
        func place(_ hours: String?) -> Place {
            Place(
                id: "osm:node/1", name: "P", kind: "amenity=cafe",
                coordinate: Coordinate(latitude: 60.17, longitude: 24.94),
                details: PlaceDetails(tags: hours.map { [(key: "opening_hours", value: $0)] } ?? []))
        }
        let monday10 = 1_796_637_600  // 2026-12-07T10:00Z
        #expect(
            cache.isOpen(place("Mo-Fr 09:00-17:00"), at: monday10, holidays: HolidayCalendar(), timeZone: utc) == true)
        #expect(
            cache.isOpen(place("Sa-Su 09:00-17:00"), at: monday10, holidays: HolidayCalendar(), timeZone: utc) == false)
        #expect(cache.isOpen(place("Mo-Fr unknown"), at: monday10, holidays: HolidayCalendar(), timeZone: utc) == nil)
        #expect(cache.isOpen(place("nonsense"), at: monday10, holidays: HolidayCalendar(), timeZone: utc) == nil)
        #expect(cache.isOpen(place(nil), at: monday10, holidays: HolidayCalendar(), timeZone: utc) == nil)
        let summary = cache.summary(
            of: place("Mo-Fr 09:00-12:00,13:00-17:00"), at: monday10, holidays: HolidayCalendar(), timeZone: utc)
        #expect(summary?.openNow == true && summary?.nextChange == monday10 + 2 * 3600)
        #expect(summary?.intervals.map { [$0.start, $0.end] } == [[540, 720], [780, 1020]])
        #expect(cache.summary(of: place("nonsense"), at: monday10, holidays: HolidayCalendar(), timeZone: utc) == nil)
        let helsinki = Coordinate(latitude: 60.17, longitude: 24.94)
        #expect(
            cache.isOpen(
                "Mo-Fr 09:00-17:00", at: helsinki, unixSeconds: monday10, holidays: HolidayCalendar(), timeZone: utc)
                == true)
        #expect(
            cache.isOpen(
                "Mo-Fr 11:00-17:00", at: helsinki, unixSeconds: monday10, holidays: HolidayCalendar(), timeZone: utc)
                == false)
        if case .failure = cache.hours("Mo-Fr 09:00-17:00") {
            Issue.record("a good value parses")
        }
    }
}
