import PlacedCore
import Testing

/// Names in the reader's language (`name:<language>`, falling back to `name`) and the GeoJSON form
/// of map features.
@Suite struct LocalizedNameTests {
    static let names = ["sv": "Järnvägstorget", "fi": "Rautatientori", "zh-hant": "火車站廣場", "pt-br": "Praça"]

    @Test(arguments: [
        ("sv", "Järnvägstorget"), ("sv-FI", "Järnvägstorget"), ("sv_FI.UTF-8", "Järnvägstorget"),
        ("SV_fi@euro", "Järnvägstorget"), ("fi_FI", "Rautatientori"), ("zh-Hant-TW", "火車站廣場"),
        ("zh", "Rautatientori (name)"), ("pt_BR", "Praça"), ("pt", "Rautatientori (name)"),
        ("en", "Rautatientori (name)"), ("C", "Rautatientori (name)"), ("POSIX", "Rautatientori (name)"),
        ("", "Rautatientori (name)"), ("C.UTF-8", "Rautatientori (name)"),
    ])
    func choosesTheMostSpecificFittingName(language: String, expected: String) {
        #expect(LocalizedName.choose("Rautatientori (name)", Self.names, language: language) == expected)
    }

    @Test func noLanguageOrNoNamesIsTheNameTag() {
        #expect(LocalizedName.choose("Kauppatori", Self.names, language: nil) == "Kauppatori")
        #expect(LocalizedName.choose("Kauppatori", [:], language: "sv") == "Kauppatori")
        #expect(LocalizedName.choose("Kauppatori", ["sv": ""], language: "sv") == "Kauppatori", "an empty tag")
    }

    @Test func candidatesAndKeys() {
        #expect(LocalizedName.candidates("sv_FI.UTF-8") == ["sv-fi", "sv"])
        #expect(LocalizedName.candidates("zh-Hant-TW") == ["zh-hant-tw", "zh-hant", "zh"])
        #expect(LocalizedName.candidates("C").isEmpty)
    }

    @Test func aLanguageLongerThanTheLimitNamesNone() {
        let atTheLimit = "sv-" + String(repeating: "a", count: LocalizedName.maximumLength - 3)
        #expect(atTheLimit.utf8.count == LocalizedName.maximumLength)
        #expect(LocalizedName.candidates(atTheLimit) == [atTheLimit, "sv"])
        #expect(LocalizedName.candidates(atTheLimit + "a").isEmpty)
        let subtags = "sv" + String(repeating: "-a", count: 32_000)
        #expect(LocalizedName.candidates(subtags).isEmpty)
        #expect(LocalizedName.choose("Rautatientori", Self.names, language: subtags) == "Rautatientori")
    }

    @Test func keysOfOSMSuffixes() {
        #expect(LocalizedName.languageKey(ofSuffix: "sv") == "sv")
        #expect(LocalizedName.languageKey(ofSuffix: "zh-Hant") == "zh-hant")
        #expect(LocalizedName.languageKey(ofSuffix: "be-tarask") == "be-tarask")
        for notALanguage in ["left", "etymology:wikidata", "prefix", "sv:", "s", "sv-", "1a"] {
            #expect(LocalizedName.languageKey(ofSuffix: notALanguage) == nil, "\(notALanguage)")
        }
        let place = Place(
            id: "osm:node/1", name: "Rautatientori", kind: "amenity=marketplace",
            coordinate: .init(latitude: 60, longitude: 24),
            localizedNames: Self.names)
        #expect(place.name(forLanguage: "sv_SE.UTF-8") == "Järnvägstorget")
        #expect(place.addressSource == .none)
    }
}
