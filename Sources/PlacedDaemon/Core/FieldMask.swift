import PlacedCore

/// Which keys a place record carries (`fields` of Current, Rank, Watch and Details; D-Bus's `fields`
/// option), as Google's Places `X-Goog-FieldMask` and Foursquare's `fields` choose them: absent, the
/// keys of a place before details existed, so existing clients see the very bytes they saw; `*`, every
/// key; else the keys named. An unknown name is `InvalidField` naming it; an empty list asks for nothing
/// and is `InvalidField` with an empty name, since a record of no keys is a client's bug.
public struct FieldMask: Equatable, Sendable {
    /// The keys a ranked place had before details: what an absent mask gives.
    public static let standardFields = [
        "id", "name", "kind", "address", "address_source", "latitude", "longitude", "distance", "likelihood",
        "attribution",
    ]
    /// Evaluated from `opening_hours` at the call's time (Details' `time`, else now).
    public static let hoursFields = ["open_now", "next_change", "intervals"]
    /// `PlaceDetails`' keys as records name them (`brand:wikidata` is `brand_wikidata`).
    public static let detailFields = [
        "opening_hours", "phone", "website", "email", "wheelchair", "cuisine", "brand", "brand_wikidata", "operator",
        "level", "description", "internet_access", "outdoor_seating", "takeaway", "diet", "payment",
    ]
    public static let allFields = standardFields + detailFields + hoursFields

    /// nil: the standard record, built as before masks existed.
    public let fields: Set<String>?
    /// Whether the record carries any detail or hours key (decided once, not per place).
    public let includesDetails: Bool

    public static let standard = FieldMask(fields: nil)
    public static let all = FieldMask(fields: Set(allFields))

    private init(fields: Set<String>?) {
        self.fields = fields
        includesDetails = fields.map { !$0.isSubset(of: Self.standardFields) } ?? false
    }

    /// A client's `fields`: nil gives `default`.
    public static func parse(_ names: [String]?, default: FieldMask = .standard) throws(ServiceError) -> FieldMask {
        guard let names else { return `default` }
        guard !names.isEmpty else { throw .invalidField("") }
        var chosen = Set<String>()
        for name in names {
            if name == "*" { return .all }
            guard allFields.contains(name) else { throw .invalidField(name) }
            chosen.insert(name)
        }
        return FieldMask(fields: chosen)
    }

    public var isStandard: Bool { fields == nil }

    public func includes(_ field: String) -> Bool { fields?.contains(field) ?? Self.standardFields.contains(field) }

    /// Whether the record needs the place's hours evaluated.
    public var needsHours: Bool { Self.hoursFields.contains { includes($0) } }
}
