/// Choosing a name by the reader's language, as the mobile SDKs' `languageCode` does: the
/// `name:<language>` tag that fits, else the `name` tag.
public enum LocalizedName {
    /// The longest language looked up, in bytes. A tag naming a language, script, region and variant
    /// fits in RFC 5646's 35, a POSIX locale's encoding and modifier in a few more; a client's longer
    /// string names none, so the keys it costs stay few and short (a 64 kB one made its subtags'
    /// prefixes, a gigabyte, for every place of a reply).
    public static let maximumLength = 64

    /// `name` unless `names` holds one for `language` or for its primary subtag ("sv-FI" → "sv").
    public static func choose(_ name: String, _ names: [String: String], language: String?) -> String {
        guard let language, !names.isEmpty else { return name }
        for candidate in candidates(language) {
            if let localized = names[candidate], !localized.isEmpty { return localized }
        }
        return name
    }

    /// The keys to try for a language code, most specific first: "sv_FI.UTF-8" → ["sv-fi", "sv"];
    /// "zh-Hant-TW" → ["zh-hant-tw", "zh-hant", "zh"]. A POSIX locale's encoding (`.UTF-8`) and modifier
    /// (`@euro`) are dropped; "C", "POSIX", anything not starting with a 2–3 letter language and anything
    /// longer than `maximumLength` give none.
    public static func candidates(_ language: String) -> [String] {
        guard language.utf8.count <= maximumLength else { return [] }
        var code = Substring(language)
        if let cut = code.firstIndex(where: { $0 == "." || $0 == "@" }) { code = code[..<cut] }
        let subtags = code.lowercased().split(whereSeparator: { $0 == "_" || $0 == "-" }).map(String.init)
        guard let primary = subtags.first, isLanguage(primary) else { return [] }
        return (1...subtags.count).reversed().map { subtags[0..<$0].joined(separator: "-") }
    }

    /// The key under which an OSM `name:<suffix>` is kept, nil when the suffix is no language
    /// ("name:left", "name:etymology:wikidata", "name:prefix").
    public static func languageKey(ofSuffix suffix: String) -> String? {
        let subtags = suffix.lowercased().split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard let primary = subtags.first, isLanguage(primary),
            subtags.dropFirst().allSatisfy({ !$0.isEmpty && $0.count <= 8 && $0.allSatisfy(isAlphanumeric) })
        else { return nil }
        return subtags.joined(separator: "-")
    }

    private static func isLanguage(_ subtag: String) -> Bool {
        (2...3).contains(subtag.count) && subtag.allSatisfy { ("a"..."z").contains($0) }
    }

    private static func isAlphanumeric(_ character: Character) -> Bool {
        ("a"..."z").contains(character) || ("0"..."9").contains(character)
    }
}
