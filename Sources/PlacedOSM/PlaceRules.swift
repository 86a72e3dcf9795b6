/// Which tags make an OSM element a place (DESIGN.md "Place data"), decided on raw string-table
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

    /// The other keys a place reads; their roles follow the main keys'.
    static let otherKeys: [StaticString] = [
        "building", "name", "addr:street", "addr:housenumber", "addr:postcode", "addr:city",
    ]

    /// Role numbers: 0..<14 the main keys, then the other keys in order.
    static let building = UInt8(mainKeys.count)
    static let name = building + 1
    static let street = building + 2
    static let housenumber = building + 3
    static let postcode = building + 4
    static let city = building + 5
    static let roleCount = Int(city) + 1
    /// A key no rule reads.
    static let ignored: UInt8 = .max

    static let mainKeysMask: UInt32 = (1 << UInt32(mainKeys.count)) - 1
    static let nameBit: UInt32 = 1 << UInt32(name)
    static let buildingBit: UInt32 = 1 << UInt32(building)

    /// The role of a key, from its UTF-8 bytes.
    static func role(ofKey key: UnsafeRawBufferPointer) -> UInt8 {
        // Every key the rules read is 4...16 bytes long: most keys are rejected without a compare.
        guard (4...16).contains(key.count) else { return ignored }
        for (index, main) in mainKeys.enumerated() where key.equals(main.key) { return UInt8(index) }
        for (index, other) in otherKeys.enumerated() where key.equals(other) {
            return building + UInt8(index)
        }
        return ignored
    }

    /// Whether `value` qualifies for the main key with role `role`.
    static func qualifies(role: UInt8, value: UnsafeRawBufferPointer) -> Bool {
        guard !value.isEmpty else { return false }
        let rule = mainKeys[Int(role)]
        if let allowed = rule.allowed { return allowed.contains { value.equals($0) } }
        return !rule.excluded.contains { value.equals($0) }
    }
}

/// The tags of one element that the rules read: for each role seen, the value's string index.
struct PlaceTags {
    var seen: UInt32 = 0
    var values = InlineArray<20, UInt32>(repeating: 0)

    @inline(__always)
    mutating func record(role: UInt8, value: UInt32) {
        seen |= 1 << UInt32(role)
        values[Int(role)] = value
    }

    /// Worth a closer look: named, with a main key (or, for a way, a building key).
    @inline(__always)
    func mayBePlace(isWay: Bool) -> Bool {
        seen & PlaceRules.nameBit != 0
            && seen & (isWay ? PlaceRules.mainKeysMask | PlaceRules.buildingBit : PlaceRules.mainKeysMask)
                != 0
    }

    func value(_ role: UInt8, in strings: StringTable) -> UnsafeRawBufferPointer? {
        seen & (1 << UInt32(role)) != 0 ? strings[values[Int(role)]] : nil
    }

    /// Name, kind and address when these tags make a place.
    func place(isWay: Bool, strings: StringTable) -> (name: String, kind: String, address: String?)? {
        guard let name = value(PlaceRules.name, in: strings), !name.isEmpty else { return nil }
        var kind: String?
        for role in 0..<UInt8(PlaceRules.mainKeys.count) {
            if let value = value(role, in: strings), PlaceRules.qualifies(role: role, value: value) {
                kind = "\(PlaceRules.mainKeys[Int(role)].key)=\(text(value))"
                break
            }
        }
        if kind == nil, isWay, let value = value(PlaceRules.building, in: strings), !value.isEmpty,
            !value.equals("no")
        {
            kind = "building=\(text(value))"
        }
        guard let kind else { return nil }
        return (text(name), kind, address(strings))
    }

    /// "Street 52, 00100 City" from addr:street, addr:housenumber, addr:postcode, addr:city.
    func address(_ strings: StringTable) -> String? {
        func joined(_ roles: [UInt8], _ separator: String) -> String {
            roles.compactMap { value($0, in: strings) }.filter { !$0.isEmpty }.map(text).joined(
                separator: separator)
        }
        let line = [
            joined([PlaceRules.street, PlaceRules.housenumber], " "),
            joined([PlaceRules.postcode, PlaceRules.city], " "),
        ]
        .filter { !$0.isEmpty }.joined(separator: ", ")
        return line.isEmpty ? nil : line
    }

    private func text(_ bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes, as: UTF8.self)
    }
}
