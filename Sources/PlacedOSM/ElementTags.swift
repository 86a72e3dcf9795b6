import PlacedCore

/// The tags of one element that the import reads: for each role seen (PlaceRules), the value's
/// string index, plus every `name:<suffix>` key and value.
struct ElementTags {
    var seen: UInt32 = 0
    var values = InlineArray<32, UInt32>(repeating: 0)
    /// `name:<suffix>` tags as key index << 32 | value index; allocated only for elements that have one.
    var localized: [UInt64] = []
    /// The tags `PlaceDetails` keeps, as `localized`.
    var details: [UInt64] = []

    @inline(__always)
    mutating func record(role: UInt8, key: UInt32, value: UInt32) {
        if role == PlaceRules.localizedName {
            localized.append(UInt64(key) << 32 | UInt64(value))
            return
        }
        if role == PlaceRules.detail {
            details.append(UInt64(key) << 32 | UInt64(value))
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
        place(isWay: isWay, strings: strings, address: address(strings))
    }

    /// The same with the address already made (`address(_:)`), so that an element that is a place and
    /// lends its address makes the text once.
    func place(isWay: Bool, strings: StringTable, address: String?) -> (
        name: String, kind: String, address: String?
    )? {
        guard let name = value(PlaceRules.name, in: strings), !name.isEmpty else { return nil }
        var kind: String?
        for role in 0..<UInt8(PlaceRules.mainKeys.count) {
            if let value = value(role, in: strings), PlaceRules.qualifies(role: role, value: value) {
                kind = Self.text(PlaceRules.mainKeys[Int(role)].key, "=", value)
                break
            }
        }
        if kind == nil, isWay, let building = nonNoBuilding(strings) {
            kind = Self.text("building", "=", building)
        }
        guard let kind else { return nil }
        return (Self.text(name), kind, address)
    }

    /// The building value unless absent, empty or "no".
    func buildingValue(_ strings: StringTable) -> String? {
        nonNoBuilding(strings).map(Self.text)
    }

    private func nonNoBuilding(_ strings: StringTable) -> UnsafeRawBufferPointer? {
        guard let value = value(PlaceRules.building, in: strings), !value.isEmpty, !value.equals("no") else {
            return nil
        }
        return value
    }

    /// "Street 52, 00100 City" from addr:street, addr:housenumber, addr:postcode, addr:city: the
    /// non-empty parts of each pair joined by a space, the pairs by ", ". Made in one buffer: the
    /// separators are ASCII, so decoding the whole repairs invalid UTF-8 as decoding each part would.
    func address(_ strings: StringTable) -> String? {
        guard seen & PlaceRules.anyAddressBits != 0 else { return nil }
        func part(_ role: UInt8) -> UnsafeRawBufferPointer? {
            guard let bytes = value(role, in: strings), !bytes.isEmpty else { return nil }
            return bytes
        }
        let street = part(PlaceRules.street)
        let number = part(PlaceRules.housenumber)
        let postcode = part(PlaceRules.postcode)
        let city = part(PlaceRules.city)
        let length = (street?.count ?? 0) + (number?.count ?? 0) + (postcode?.count ?? 0) + (city?.count ?? 0) + 4
        return TextBuilder.make(capacity: length) { text in
            for (first, second) in [(street, number), (postcode, city)] where first != nil || second != nil {
                if !text.isEmpty { text.append(", ") }
                if let first { text.append(first) }
                if first != nil, second != nil { text.append(" ") }
                if let second { text.append(second) }
            }
        }
    }

    /// The address another place may borrow: only one that names a street ("00100 Helsinki" alone
    /// says little about where something is).
    func lendableAddress(_ strings: StringTable) -> String? {
        lendable(address(strings), strings)
    }

    /// `address` when it may be lent (names a street), else nil.
    func lendable(_ address: String?, _ strings: StringTable) -> String? {
        guard let street = value(PlaceRules.street, in: strings), !street.isEmpty else { return nil }
        return address
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

    /// The place's details, normalized; and the keys of values dropped as longer than
    /// `PlaceDetails.maximumValueLength`, with their length in bytes.
    func details(_ strings: StringTable) -> (details: PlaceDetails, tooLong: [(key: String, bytes: Int)]) {
        guard !details.isEmpty else { return (PlaceDetails(), []) }
        var tags: [(key: String, value: String)] = []
        var tooLong: [(key: String, bytes: Int)] = []
        tags.reserveCapacity(details.count)
        for pair in details {
            let key = Self.text(strings[UInt32(truncatingIfNeeded: pair >> 32)])
            let value = strings[UInt32(truncatingIfNeeded: pair)]
            // Not decoded: a hostile megabyte is measured, not copied.
            guard value.count <= PlaceDetails.maximumValueLength else {
                tooLong.append((key, value.count))
                continue
            }
            tags.append((key, Self.text(value)))
        }
        return (PlaceDetails(tags: tags), tooLong)
    }

    static func text(_ bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// `key=value` (a kind) made in one step, as `"\(key)=\(text(value))"` makes it.
    static func text(_ key: StaticString, _ separator: StaticString, _ value: UnsafeRawBufferPointer) -> String {
        TextBuilder.make(capacity: key.utf8CodeUnitCount + separator.utf8CodeUnitCount + value.count) { text in
            text.append(key)
            text.append(separator)
            text.append(value)
        }!
    }
}

/// Bytes gathered in a temporary buffer and decoded once as UTF-8 (invalid sequences repaired, as
/// `String(decoding:as:)` repairs them): one allocation for text made of several parts.
struct TextBuilder {
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The text `body` appends (at most `capacity` bytes); nil when it appends nothing.
    static func make(capacity: Int, _ body: (inout TextBuilder) -> Void) -> String? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            var builder = TextBuilder(buffer: buffer)
            body(&builder)
            guard builder.count > 0 else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[..<builder.count]), as: UTF8.self)
        }
    }

    private init(buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        precondition(count + bytes.count <= buffer.count, "TextBuilder: more than its capacity")
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        (buffer.baseAddress! + count).update(from: source.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        count += bytes.count
    }

    mutating func append(_ literal: StaticString) {
        append(UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }
}
