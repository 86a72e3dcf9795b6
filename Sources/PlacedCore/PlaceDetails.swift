/// What OpenStreetMap says about a place beyond its name, kind and address (docs/DESIGN.md, "Place
/// details"): opening hours, how to reach it, access and services. Normalized at import
/// (`PlaceDetails(tags:)`): the `contact:` forms merged into the plain key, list values (`phone`,
/// `website`, `cuisine`…) split on `;`, trimmed and without repeats. Empty for a place without any.
public struct PlaceDetails: Sendable, Equatable {
    /// Normalized key → value; a list's items joined by `;` (the OSM form, without spaces). Keys are
    /// `keys`, `description:<language>` (a `LocalizedName` key), `diet:<what>` and `payment:<what>`.
    public private(set) var tags: [String: String]

    /// The plain keys kept, in the order records list them.
    public static let keys = [
        "opening_hours", "phone", "website", "email", "wheelchair", "cuisine", "brand", "brand:wikidata",
        "operator", "level", "description", "internet_access", "outdoor_seating", "takeaway",
    ]
    /// Keys whose value is a `;`-separated list. (`opening_hours` uses `;` between its rules and
    /// `description` is prose: both stay whole.)
    public static let listKeys: Set<String> = ["phone", "website", "email", "cuisine", "level", "internet_access"]
    /// `contact:<key>` merges into `<key>`: after the plain key's items, those not already there.
    public static let contactKeys: [String: String] = [
        "contact:phone": "phone", "contact:website": "website", "contact:email": "email",
    ]
    /// Key prefixes kept with every suffix: `diet:vegan`, `payment:cash`, `description:fi`.
    public static let prefixes = ["description:", "diet:", "payment:"]
    /// The longest value kept, in UTF-8 bytes, as `OpeningHours.maximumLength`: OSM caps a value at 255
    /// characters, so only a hostile or broken extract goes past it, and such a value is dropped whole
    /// (and counted by the import) rather than cut into something that was never tagged.
    public static let maximumValueLength = OpeningHours.maximumLength

    public init() { tags = [:] }

    /// Normalized from raw OSM tags (any keys: those not kept are ignored). Values longer than
    /// `maximumValueLength` and empty ones are dropped; the separators U+001E and U+001F, which the
    /// places file uses, become spaces.
    public init<Tags: Sequence>(tags raw: Tags) where Tags.Element == (key: String, value: String) {
        var plain: [String: String] = [:]
        var contact: [String: String] = [:]
        for (key, value) in raw {
            guard let kept = Self.normalizedKey(key) else { continue }
            let clean = Self.clean(value)
            guard !clean.isEmpty, clean.utf8.count <= Self.maximumValueLength else { continue }
            if let target = Self.contactKeys[key] {
                contact[target] = clean
            } else {
                plain[kept] = clean
            }
        }
        for (key, value) in contact { plain[key] = plain[key].map { "\($0);\(value)" } ?? value }
        for key in Self.listKeys {
            guard let value = plain[key] else { continue }
            let items = Self.split(value)
            plain[key] = items.isEmpty ? nil : items.joined(separator: ";")
        }
        tags = plain
    }

    /// Decoded from the places file's own form (`encoded`): no normalization again.
    public init(normalized tags: [String: String]) { self.tags = tags }

    /// The key a raw OSM key is kept under; nil when it is not kept.
    public static func normalizedKey(_ key: String) -> String? {
        if let target = contactKeys[key] { return target }
        if keys.contains(key) { return key }
        if key.hasPrefix("description:") {
            return LocalizedName.languageKey(ofSuffix: String(key.dropFirst(12))).map { "description:\($0)" }
        }
        // Any suffix, but no control character: U+001E and U+001F separate the stored entries, and a key
        // holding them would come back from the file as other keys.
        for prefix in ["diet:", "payment:"] where key.hasPrefix(prefix) && key.utf8.count > prefix.utf8.count {
            return key.utf8.contains { $0 < 0x20 || $0 == 0x7F } ? nil : key
        }
        return nil
    }

    /// Whether a raw OSM key is one of the keys kept (before looking at its suffix's language).
    public static func mayKeep(_ key: String) -> Bool {
        keys.contains(key) || contactKeys[key] != nil || prefixes.contains { key.hasPrefix($0) }
    }

    public var isEmpty: Bool { tags.isEmpty }

    /// The raw `opening_hours` value.
    public var openingHours: String? { tags["opening_hours"] }

    /// A single value (`wheelchair`, `brand`), or a list's items joined by `;`.
    public func value(_ key: String) -> String? { tags[key] }

    /// A list key's items (`phone`, `website`, `cuisine`, `level`…); a single value as one item. The stored
    /// value is normalized already (`;` between items, no spaces around them), so this only splits it.
    public func list(_ key: String) -> [String] {
        tags[key].map { $0.utf8.split(separator: UInt8(ascii: ";")).map { String(Substring($0)) } } ?? []
    }

    /// The `description`, or its `description:<language>` for a reader of `language`.
    public func description(forLanguage language: String?) -> String? {
        let localized = self.localized("description")
        guard let plain = tags["description"] else {
            guard let language else { return nil }
            let chosen = LocalizedName.choose("", localized, language: language)
            return chosen.isEmpty ? nil : chosen
        }
        return LocalizedName.choose(plain, localized, language: language)
    }

    /// `diet:<what>` → value, keyed by what (`vegan` → `yes`).
    public var diet: [String: String] { suffixed("diet:") }
    /// `payment:<what>` → value (`cash` → `yes`).
    public var payment: [String: String] { suffixed("payment:") }

    private func localized(_ key: String) -> [String: String] { suffixed(key + ":") }

    private func suffixed(_ prefix: String) -> [String: String] {
        var found: [String: String] = [:]
        for (key, value) in tags where key.hasPrefix(prefix) { found[String(key.dropFirst(prefix.count))] = value }
        return found
    }

    /// `a; b;;a` → ["a", "b"].
    static func split(_ value: String) -> [String] {
        var items: [String] = []
        for part in value.split(separator: ";") {
            let item = trimmed(part)
            if !item.isEmpty, !items.contains(item) { items.append(item) }
        }
        return items
    }

    private static func clean(_ value: String) -> String {
        let text = trimmed(Substring(value))
        guard text.utf8.contains(where: { $0 == 0x1E || $0 == 0x1F }) else { return text }
        return String(text.map { $0 == "\u{1E}" || $0 == "\u{1F}" ? " " : $0 })
    }

    /// Without the ASCII spaces, tabs and line breaks at either end; on the UTF-8 bytes, since trimming
    /// Characters through reversed collections made the import three times slower.
    private static func trimmed(_ text: Substring) -> String {
        let bytes = text.utf8
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    // MARK: The places file's form

    /// `key U+001F value` entries joined by U+001E, sorted by key (as `LocalizedNamesCoding`); nil for none.
    public var encoded: String? {
        tags.isEmpty
            ? nil : tags.sorted { $0.key < $1.key }.map { "\($0.key)\u{1F}\($0.value)" }.joined(separator: "\u{1E}")
    }

    /// From `encoded`'s text; entries without a separator are skipped.
    public init(encoded text: String?) {
        var tags: [String: String] = [:]
        if let text {
            for entry in text.utf8.split(separator: 0x1E) {
                guard let separator = entry.firstIndex(of: 0x1F) else { continue }
                tags[String(decoding: entry[..<separator], as: UTF8.self)] = String(
                    decoding: entry[entry.index(after: separator)...], as: UTF8.self)
            }
        }
        self.tags = tags
    }
}
