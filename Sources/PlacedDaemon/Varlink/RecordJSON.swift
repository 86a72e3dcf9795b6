import PlacedCore
import PlacedJSON
import PlacedStore
import PlacedVarlink

// A `Record` as JSON, written in one place: `encodeJSON(into:)` appends the text straight into a reply
// buffer (a ranking of 20 places without building 200 dictionary entries first). Every varlink reply
// and broadcast that carries records is itself a record (`VarlinkCall.reply(_:)`,
// `VarlinkServer.broadcast(_:to:)` below); the fleet payloads parse these bytes back (`jsonObject`).
// The text is what `JSON.encode` makes of the same object: compact, keys in `JSON.keyPrecedes` order,
// numbers as `JSON.encode(number:)` writes them, doubles that are not finite as null.

extension Record {
    /// Appends the record as a JSON object: keys in `JSON.keyPrecedes` order and, as in a dictionary,
    /// the last value of a key set twice.
    func encodeJSON(into output: inout [UInt8]) {
        encodeJSON(as: JSONShape(self), into: &output)
    }

    /// Appends the records as a JSON array. Records with the keys of the one before (the places of a
    /// ranking) are written in the shape made for it: keys sorted and encoded once.
    static func encodeJSON(array records: [Record], into output: inout [UInt8]) {
        output.append(UInt8(ascii: "["))
        var shape: JSONShape?
        for (index, record) in records.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            if index == 0 || !record.fields.elementsEqual(records[index - 1].fields, by: { $0.key == $1.key }) {
                shape = JSONShape(record)
            }
            record.encodeJSON(as: shape!, into: &output)
        }
        output.append(UInt8(ascii: "]"))
    }

    private func encodeJSON(as shape: JSONShape, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "{"))
        fields.withUnsafeBufferPointer { fields in
            for (index, prefix) in zip(shape.order, shape.prefixes) {
                output.append(contentsOf: prefix)
                fields[index].value.encodeJSON(into: &output)
            }
        }
        output.append(UInt8(ascii: "}"))
    }
}

/// How a record's fields are written: which, in what order, each after its encoded key.
private struct JSONShape {
    /// The fields' indices sorted by key, stably; of a key set more than once only the last.
    var order: [Int] = []
    /// `"key":` for the first, `,"key":` for the others.
    var prefixes: [[UInt8]] = []

    init(_ record: Record) {
        let fields = record.fields
        var sorted: [Int] = []
        sorted.reserveCapacity(fields.count)
        // Insertion sort: a record has about ten fields.
        for index in fields.indices {
            var slot = sorted.count
            sorted.append(index)
            while slot > 0, JSON.keyPrecedes(fields[index].key, fields[sorted[slot - 1]].key) {
                sorted[slot] = sorted[slot - 1]
                slot -= 1
            }
            sorted[slot] = index
        }
        for (position, index) in sorted.enumerated()
        where position + 1 == sorted.count || fields[sorted[position + 1]].key != fields[index].key {
            var prefix: [UInt8] = order.isEmpty ? [] : [UInt8(ascii: ",")]
            JSON.encode(string: fields[index].key, into: &prefix)
            prefix.append(UInt8(ascii: ":"))
            order.append(index)
            prefixes.append(prefix)
        }
    }
}

extension Record.Value {
    func encodeJSON(into output: inout [UInt8]) {
        switch self {
        case let .string(s): JSON.encode(string: s, into: &output)
        case let .double(d): Self.encode(number: d, into: &output)
        case let .int(i): Self.encode(number: Double(i), into: &output)
        case let .uint(u): Self.encode(number: Double(u), into: &output)
        case let .bool(b): output.append(contentsOf: b ? "true".utf8 : "false".utf8)
        case let .record(r): r.encodeJSON(into: &output)
        case let .records(rs): Record.encodeJSON(array: rs, into: &output)
        }
    }

    /// A double as JSON: null when not finite, as a dictionary of `JSON` values could not hold it.
    static func encode(number: Double, into output: inout [UInt8]) {
        if number.isFinite {
            try! JSON.encode(number: number, into: &output)  // only a non-finite number throws
        } else {
            output.append(contentsOf: "null".utf8)
        }
    }
}

/// A ranking's places as JSON, written straight from the `RankedPlace`s or from the places file's
/// records (`PlaceListing`): exactly the bytes that `.records(places.map { Record.place($0, language:) })`
/// makes through `encodeJSON` (RecordJSONTests compare them on every place shape, on random places and
/// on random places files), without building, sorting and releasing ten fields a place first, nor, from
/// a listing, a `Place` with its Strings — the `Rank` reply lists twenty places, and those were most of
/// its cost. `Record.place` stays the definition of a place's keys; this is its fast path for lists.
enum PlaceListJSON {
    /// `Record.place`'s keys.
    private enum Field: String, CaseIterable {
        case id, name, kind, address, latitude, longitude, distance, likelihood, attribution
        case addressSource = "address_source"
    }

    /// The fields in the order `encodeJSON` writes them, each with `"key":`.
    private static let fields: [(field: Field, key: [UInt8])] = Field.allCases
        .sorted { JSON.keyPrecedes($0.rawValue, $1.rawValue) }
        .map { field in
            var key: [UInt8] = []
            JSON.encode(string: field.rawValue, into: &key)
            key.append(UInt8(ascii: ":"))
            return (field, key)
        }
    private static let attribution: [UInt8] = {
        var text: [UInt8] = []
        JSON.encode(string: Place.attribution, into: &text)
        return text
    }()

    static func encode(_ places: [RankedPlace], language: String?, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "["))
        for (index, ranked) in places.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            encode(ranked, language: language, into: &output)
        }
        output.append(UInt8(ascii: "]"))
    }

    /// The listing's places, each from its record's text where that gives what decoding would, else
    /// from the place decoded.
    static func encode(_ listing: PlaceListing, language: String?, into output: inout [UInt8]) {
        let nameLanguage = NameLanguage(language)
        let layout = textLayout
        output.append(UInt8(ascii: "["))
        for index in 0..<listing.count {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            if let text = listing.text(at: index), let name = text.name(for: nameLanguage) {
                encode(
                    text, name: name, distance: listing.distance(at: index),
                    likelihood: listing.likelihood(at: index), layout: layout, into: &output)
            } else {
                encode(listing.rankedPlace(at: index), language: language, into: &output)
            }
        }
        output.append(UInt8(ascii: "]"))
    }

    /// `{"places":[...]}`: what a `Record` with just `"places": .records(...)` writes.
    static func encode(parameters places: [RankedPlace], language: String?, into output: inout [UInt8]) {
        output.append(contentsOf: #"{"places":"#.utf8)
        encode(places, language: language, into: &output)
        output.append(UInt8(ascii: "}"))
    }

    static func encode(parameters listing: PlaceListing, language: String?, into output: inout [UInt8]) {
        output.append(contentsOf: #"{"places":"#.utf8)
        encode(listing, language: language, into: &output)
        output.append(UInt8(ascii: "}"))
    }

    private static func encode(_ ranked: RankedPlace, language: String?, into output: inout [UInt8]) {
        let place = ranked.place
        output.append(UInt8(ascii: "{"))
        var first = true
        for (field, key) in fields {
            if field == .address, place.address == nil { continue }
            if !first { output.append(UInt8(ascii: ",")) }
            first = false
            output.append(contentsOf: key)
            switch field {
            case .id: JSON.encode(string: place.id, into: &output)
            case .name: JSON.encode(string: place.name(forLanguage: language), into: &output)
            case .kind: JSON.encode(string: place.kind, into: &output)
            case .address: JSON.encode(string: place.address ?? "", into: &output)
            case .latitude: Record.Value.encode(number: place.coordinate.latitude, into: &output)
            case .longitude: Record.Value.encode(number: place.coordinate.longitude, into: &output)
            case .distance: Record.Value.encode(number: ranked.distance, into: &output)
            case .likelihood: Record.Value.encode(number: ranked.likelihood, into: &output)
            case .attribution: output.append(contentsOf: attribution)
            case .addressSource: JSON.encode(string: place.addressSource.rawValue, into: &output)
            }
        }
        output.append(UInt8(ascii: "}"))
    }

    /// The same fields from a record's text (`name`: the one chosen for the reader's language), written
    /// through a `JSONWriter` sized for the place: the template of the place's shape (`TextLayout`) gives
    /// the constant bytes between the values, so a place is nine copies (eight without an address) around
    /// its values.
    private static func encode(
        _ text: PlaceText, name: UnsafeRawBufferPointer, distance: Double, likelihood: Double,
        layout: TextLayout, into output: inout [UInt8]
    ) {
        let stringBytes = text.id.count + name.count + text.kind.count + (text.address?.count ?? 0)
        // The four strings' bytes, escaped at worst, and their quotes.
        let capacity = layout.fixedBound + JSONWriter.stringBound(stringBytes) + 3 * JSONWriter.stringBound(0)
        let template = layout.templates[TextLayout.templateIndex(text.addressSource, hasAddress: text.address != nil)]
        layout.constants.withUnsafeBytes { constants in
            layout.steps.withUnsafeBufferPointer { allSteps in
                JSONWriter.append(capacity: capacity, to: &output) { writer in
                    for step in allSteps[template] {
                        writer.bytes(UnsafeRawBufferPointer(rebasing: constants[step.constant]))
                        switch step.value {
                        case .address: writer.string(validUTF8: text.address!)
                        case .distance: writer.number(orNull: distance)
                        case .id: writer.string(validUTF8: text.id)
                        case .kind: writer.string(validUTF8: text.kind)
                        case .latitude: writer.number(orNull: text.coordinate.latitude)
                        case .likelihood: writer.number(orNull: likelihood)
                        case .longitude: writer.number(orNull: text.coordinate.longitude)
                        case .name: writer.string(validUTF8: name)
                        case .end: break
                        }
                    }
                }
            }
        }
    }

    /// A place's text between its values, built once from `fields` (so in their order): for each shape
    /// of place (an address or none, and its source) the steps of writing one, each the constant bytes
    /// before a value and the value: `{"address":` address, `,"address_source":"own","attribution":"…",
    /// "distance":` distance, `,"id":` id, … `}`. Flat arrays of plain values, read without retaining.
    private struct TextLayout {
        enum Value { case address, distance, id, kind, latitude, likelihood, longitude, name, end }

        /// Every template's constant bytes end to end.
        private(set) var constants: [UInt8] = []
        /// Every template's steps end to end, each template's last one `.end`.
        private(set) var steps: [(constant: Range<Int>, value: Value)] = []
        /// Each template's steps, at `templateIndex(_:hasAddress:)`.
        private(set) var templates: [Range<Int>]
        /// The most constant bytes of any template, with room for four numbers.
        private(set) var fixedBound = 0

        static func templateIndex(_ source: AddressSource, hasAddress: Bool) -> Int {
            2 * source.fileCode + (hasAddress ? 1 : 0)
        }

        init() {
            templates = Array(repeating: 0..<0, count: 2 * AddressSource.allCases.count)
            for source in AddressSource.allCases {
                for hasAddress in [false, true] {
                    let first = steps.count
                    var pending: [UInt8] = [UInt8(ascii: "{")]
                    var size = 0
                    func add(_ value: Value) {
                        steps.append((constants.count..<constants.count + pending.count, value))
                        constants += pending
                        size += pending.count
                        pending = []
                    }
                    var isFirst = true
                    for (field, key) in fields {
                        if field == .address, !hasAddress { continue }
                        if !isFirst { pending.append(UInt8(ascii: ",")) }
                        isFirst = false
                        pending += key
                        switch field {
                        case .attribution: pending += attribution
                        case .addressSource: JSON.encode(string: source.rawValue, into: &pending)
                        case .address: add(.address)
                        case .distance: add(.distance)
                        case .id: add(.id)
                        case .kind: add(.kind)
                        case .latitude: add(.latitude)
                        case .likelihood: add(.likelihood)
                        case .longitude: add(.longitude)
                        case .name: add(.name)
                        }
                    }
                    pending.append(UInt8(ascii: "}"))
                    add(.end)
                    templates[Self.templateIndex(source, hasAddress: hasAddress)] = first..<steps.count
                    fixedBound = max(fixedBound, size + 4 * JSONWriter.numberBound)
                }
            }
        }
    }

    private static let textLayout = TextLayout()
}

extension VarlinkCall {
    /// Replies `{"places": [...]}`, the places written by `PlaceListJSON`: the parameters
    /// `Record` with `"places": .records(places.map { Record.place($0, language:) })` makes. A file
    /// found truncated while the places were read is the store's failure, and nothing is sent.
    func reply(places listing: PlaceListing, language: String?) throws(ServiceError) {
        _ = try reply(capacity: 32 + listing.count * 320) { (output: inout [UInt8]) throws(ServiceError) in
            PlaceListJSON.encode(parameters: listing, language: language, into: &output)
            if let damage = listing.damage { throw .storeFailed(reason: "\(damage)") }
        }
    }
}

extension Record {
    /// The record as a JSON object, parsed from what `encodeJSON` writes: for the fleet payloads, which
    /// PlacedFleet merges with its own keys and keeps in its outbox. Rare (a marker, a move of 50 m), so
    /// the round trip costs nothing that matters and the record still has one encoding.
    var jsonObject: [String: JSON] {
        var bytes: [UInt8] = []
        encodeJSON(into: &bytes)
        return try! JSON(parsing: bytes).object!  // the writer's own output is a JSON object
    }
}

extension VarlinkCall {
    /// Replies with `parameters` written by `Record.encodeJSON`.
    @discardableResult
    func reply(_ parameters: Record, continues: Bool = false) -> Bool {
        reply(continues: continues, capacity: parameters.estimatedJSONSize) { parameters.encodeJSON(into: &$0) }
    }
}

extension VarlinkServer {
    /// Sends `parameters`, written once by `Record.encodeJSON`, as a `continues` reply to `streams`.
    @discardableResult
    func broadcast(_ parameters: Record, to streams: [VarlinkCall]) -> Int {
        try! broadcast(to: streams, capacity: parameters.estimatedJSONSize) { parameters.encodeJSON(into: &$0) }
    }
}

extension Record {
    /// About how many bytes `encodeJSON` writes (a place is about 250), so a reply's buffer is
    /// allocated once.
    fileprivate var estimatedJSONSize: Int {
        fields.reduce(16) { size, field in
            switch field.value {
            case .record(let record): size + field.key.utf8.count + record.estimatedJSONSize
            case .records(let records): size + field.key.utf8.count + records.count * 320
            default: size + field.key.utf8.count + 24
            }
        }
    }
}
