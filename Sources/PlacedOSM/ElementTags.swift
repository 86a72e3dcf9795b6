import PlacedCore

/// The tags of one element that the import reads: for each role seen (PlaceRules), the value's
/// string index, plus every `name:<suffix>` key and value.
struct ElementTags {
    var seen: UInt32 = 0
    var values = InlineArray<32, UInt32>(repeating: 0)
    /// `name:<suffix>` tags as key index << 32 | value index; allocated only for elements that have one.
    var localized: [UInt64] = []

    @inline(__always)
    mutating func record(role: UInt8, key: UInt32, value: UInt32) {
        if role == PlaceRules.localizedName {
            localized.append(UInt64(key) << 32 | UInt64(value))
            return
        }
        seen |= 1 << UInt32(role)
        values[Int(role)] = value
    }

    func has(_ role: UInt8) -> Bool { seen & (1 << UInt32(role)) != 0 }

    /// Worth a closer look as a place: named, with a main key (or, for a way, a building key).
    @inline(__always)
    func mayBePlace(isWay: Bool) -> Bool {
        seen & PlaceRules.nameBit != 0
            && seen & (isWay ? PlaceRules.mainKeysMask | PlaceRules.buildingBit : PlaceRules.mainKeysMask)
                != 0
    }

    /// Has addr:street or addr:housenumber: an address another place may borrow.
    @inline(__always)
    var mayHaveAddress: Bool { seen & PlaceRules.addressBits != 0 }

    /// Has a key that can make a map feature (for ways and relations).
    @inline(__always)
    var mayBeMapFeature: Bool { seen & PlaceRules.mapBits != 0 }

    func value(_ role: UInt8, in strings: StringTable) -> UnsafeRawBufferPointer? {
        has(role) ? strings[values[Int(role)]] : nil
    }

    func text(_ role: UInt8, in strings: StringTable) -> String? {
        value(role, in: strings).map(Self.text)
    }

    func value(_ role: UInt8, is literal: StaticString, in strings: StringTable) -> Bool {
        value(role, in: strings)?.equals(literal) ?? false
    }

    /// Name, kind and address when these tags make a place.
    func place(isWay: Bool, strings: StringTable) -> (name: String, kind: String, address: String?)? {
        guard let name = value(PlaceRules.name, in: strings), !name.isEmpty else { return nil }
        var kind: String?
        for role in 0..<UInt8(PlaceRules.mainKeys.count) {
            if let value = value(role, in: strings), PlaceRules.qualifies(role: role, value: value) {
                kind = "\(PlaceRules.mainKeys[Int(role)].key)=\(Self.text(value))"
                break
            }
        }
        if kind == nil, isWay, let building = buildingValue(strings) {
            kind = "building=\(building)"
        }
        guard let kind else { return nil }
        return (Self.text(name), kind, address(strings))
    }

    /// The building value unless absent, empty or "no".
    func buildingValue(_ strings: StringTable) -> String? {
        guard let value = value(PlaceRules.building, in: strings), !value.isEmpty, !value.equals("no") else {
            return nil
        }
        return Self.text(value)
    }

    /// "Street 52, 00100 City" from addr:street, addr:housenumber, addr:postcode, addr:city.
    func address(_ strings: StringTable) -> String? {
        func joined(_ roles: [UInt8], _ separator: String) -> String {
            roles.compactMap { value($0, in: strings) }.filter { !$0.isEmpty }.map(Self.text).joined(
                separator: separator)
        }
        let line = [
            joined([PlaceRules.street, PlaceRules.housenumber], " "),
            joined([PlaceRules.postcode, PlaceRules.city], " "),
        ]
        .filter { !$0.isEmpty }.joined(separator: ", ")
        return line.isEmpty ? nil : line
    }

    /// The address another place may borrow: only one that names a street ("00100 Helsinki" alone
    /// says little about where something is).
    func lendableAddress(_ strings: StringTable) -> String? {
        guard let street = value(PlaceRules.street, in: strings), !street.isEmpty else { return nil }
        return address(strings)
    }

    /// The `name:<language>` tags, keyed by `LocalizedName.languageKey(ofSuffix:)`; others dropped.
    func localizedNames(_ strings: StringTable) -> [String: String] {
        guard !localized.isEmpty else { return [:] }
        var names: [String: String] = [:]
        for pair in localized {
            let key = strings[UInt32(truncatingIfNeeded: pair >> 32)]
            let value = strings[UInt32(truncatingIfNeeded: pair)]
            guard !value.isEmpty,
                let language = LocalizedName.languageKey(
                    ofSuffix: String(decoding: UnsafeRawBufferPointer(rebasing: key[5...]), as: UTF8.self))
            else { continue }
            names[language] = Self.text(value)
        }
        return names
    }

    static func text(_ bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes, as: UTF8.self)
    }
}
