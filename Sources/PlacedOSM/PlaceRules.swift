/// Which tags make an OSM element a place (docs/DESIGN.md, "Place data"), decided on raw string-table
/// bytes so that the millions of elements that are not places cost a table lookup per tag.
///
/// A place is a node or way with a non-empty `name` and a main key; the first main key in
/// `mainKeys` order whose value qualifies gives the kind (`amenity=cafe`). An excluded value
/// (`amenity=bench`) does not qualify, so a later main key may still apply. A named way with
/// `building` (other than `building=no`) is a place when no main key qualifies.
enum PlaceRules {
    /// A main key and the values that qualify: all but `excluded`, or only `allowed` when given.
    struct MainKey {
        let key: StaticString
        let allowed: [StaticString]?
        let excluded: [StaticString]
    }

    static let mainKeys: [MainKey] = [
        MainKey(
            key: "amenity", allowed: nil,
            excluded: ["parking_space", "parking_entrance", "waste_disposal", "bench"]),
        MainKey(key: "shop", allowed: nil, excluded: []),
        MainKey(key: "tourism", allowed: nil, excluded: []),
        MainKey(key: "leisure", allowed: nil, excluded: []),
        MainKey(key: "office", allowed: nil, excluded: []),
        MainKey(key: "craft", allowed: nil, excluded: []),
        MainKey(key: "club", allowed: nil, excluded: []),
        MainKey(key: "emergency", allowed: nil, excluded: ["fire_hydrant"]),
        MainKey(key: "healthcare", allowed: nil, excluded: []),
        MainKey(key: "historic", allowed: nil, excluded: []),
        MainKey(key: "public_transport", allowed: nil, excluded: []),
        MainKey(key: "railway", allowed: ["station", "halt", "tram_stop"], excluded: []),
        MainKey(key: "highway", allowed: ["bus_stop"], excluded: []),
        MainKey(key: "aeroway", allowed: ["aerodrome", "terminal"], excluded: []),
    ]

    /// The other keys the import reads (places, addresses, the map layer); their roles follow the
    /// main keys'.
    static let otherKeys: [StaticString] = [
        "building", "name", "addr:street", "addr:housenumber", "addr:postcode", "addr:city",
        "natural", "landuse", "waterway", "area", "tunnel", "type", "place",
    ]

    /// Role numbers: 0..<14 the main keys, then the other keys in order.
    static let amenity: UInt8 = 0
    static let leisure: UInt8 = 3
    static let railway: UInt8 = 11
    static let highway: UInt8 = 12
    static let building = UInt8(mainKeys.count)
    static let name = building + 1
    static let street = building + 2
    static let housenumber = building + 3
    static let postcode = building + 4
    static let city = building + 5
    static let natural = building + 6
    static let landuse = building + 7
    static let waterway = building + 8
    static let area = building + 9
    static let tunnel = building + 10
    static let type = building + 11
    static let place = building + 12
    static let roleCount = Int(place) + 1
    /// A `name:<suffix>` key: kept in a list of its own, as an element may have dozens.
    static let localizedName: UInt8 = .max - 1
    /// A key `PlaceDetails` keeps (`opening_hours`, `contact:phone`, `payment:cash`…): kept in a list of
    /// its own, as an element may have dozens of `payment:*`.
    static let detail: UInt8 = .max - 2
    /// A key no rule reads.
    static let ignored: UInt8 = .max

    /// `PlaceDetails.keys` and `contactKeys` as literals, and its prefixes: decided on the bytes.
    static let detailKeys: [StaticString] = [
        "opening_hours", "phone", "website", "email", "wheelchair", "cuisine", "brand", "brand:wikidata",
        "operator", "level", "description", "internet_access", "outdoor_seating", "takeaway", "contact:phone",
        "contact:website", "contact:email",
    ]
    static let detailPrefixes: [StaticString] = ["description:", "diet:", "payment:"]
    /// The longest detail key looked at: `payment:<scheme>` keys run past the other keys' 24 bytes.
    static let maximumDetailKeyLength = 64

    static let mainKeysMask: UInt32 = (1 << UInt32(mainKeys.count)) - 1
    static let nameBit: UInt32 = 1 << UInt32(name)
    static let buildingBit: UInt32 = 1 << UInt32(building)
    static let addressBits: UInt32 = 1 << UInt32(street) | 1 << UInt32(housenumber)
    /// Any of the four parts of an address.
    static let anyAddressBits: UInt32 = addressBits | 1 << UInt32(postcode) | 1 << UInt32(city)
    /// Keys that can make a way or relation a map feature (MapRules).
    static let mapBits: UInt32 =
        1 << UInt32(highway) | 1 << UInt32(railway) | buildingBit | 1 << UInt32(natural) | 1 << UInt32(landuse)
        | 1 << UInt32(waterway) | 1 << UInt32(leisure) | 1 << UInt32(place)

    /// The role of a key, from its UTF-8 bytes.
    static func role(ofKey key: UnsafeRawBufferPointer) -> UInt8 {
        // Every key the rules read is 4...16 bytes long, `name:<language>` up to 24: most keys are
        // rejected without a compare.
        guard (4...maximumDetailKeyLength).contains(key.count) else { return ignored }
        if key.count > 5, key.starts(with: "name:") { return localizedName }
        if isDetail(key) { return detail }
        guard key.count <= 24 else { return ignored }
        guard key.count <= 16 else { return ignored }
        for (index, main) in mainKeys.enumerated() where key.equals(main.key) { return UInt8(index) }
        for (index, other) in otherKeys.enumerated() where key.equals(other) {
            return building + UInt8(index)
        }
        return ignored
    }

    private static func isDetail(_ key: UnsafeRawBufferPointer) -> Bool {
        detailKeys.contains { key.equals($0) }
            || detailPrefixes.contains { key.count > $0.utf8CodeUnitCount && key.starts(with: $0) }
    }

    /// Whether `value` qualifies for the main key with role `role`.
    static func qualifies(role: UInt8, value: UnsafeRawBufferPointer) -> Bool {
        guard !value.isEmpty else { return false }
        let rule = mainKeys[Int(role)]
        if let allowed = rule.allowed { return allowed.contains { value.equals($0) } }
        return !rule.excluded.contains { value.equals($0) }
    }
}
