import PlacedJSON

/// A `Record` as JSON, two ways that give the same bytes: `json`, a `JSON` value to put into a larger
/// message, and `encodeJSON(into:)`, the text written straight into a reply buffer (a Rank reply of
/// 20 places without building 200 dictionary entries first). Doubles that are not finite are null.
extension JSON {
    /// JSON has no NaN or infinity.
    static func finite(_ value: Double) -> JSON { value.isFinite ? .number(value) : .null }
}

extension Record {
    var json: JSON {
        var object: [String: JSON] = [:]
        for (key, value) in fields { object[key] = value.json }
        return .object(object)
    }

    /// Appends `json.encode(into:)`'s bytes: keys in `JSON.keyPrecedes` order and, as in a dictionary,
    /// the last value of a key set twice.
    func encodeJSON(into output: inout [UInt8]) {
        encodeJSON(in: jsonOrder, into: &output)
    }

    /// Appends `JSON.array(records.map(\.json))`'s bytes. Records with the keys of the one before (the
    /// places of a ranking) are written in the order sorted for it, not sorted again.
    static func encodeJSON(array records: [Record], into output: inout [UInt8]) {
        output.append(UInt8(ascii: "["))
        var order: [Int] = []
        for (index, record) in records.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            if index == 0 || !record.fields.elementsEqual(records[index - 1].fields, by: { $0.key == $1.key }) {
                order = record.jsonOrder
            }
            record.encodeJSON(in: order, into: &output)
        }
        output.append(UInt8(ascii: "]"))
    }

    /// The fields' indices in the order they are written: sorted by key, stably, and of a key set
    /// more than once only the last.
    private var jsonOrder: [Int] {
        var order: [Int] = []
        order.reserveCapacity(fields.count)
        // Insertion sort: a record has about ten fields.
        for index in fields.indices {
            var slot = order.count
            order.append(index)
            while slot > 0, JSON.keyPrecedes(fields[index].key, fields[order[slot - 1]].key) {
                order[slot] = order[slot - 1]
                slot -= 1
            }
            order[slot] = index
        }
        return order.indices.filter { $0 + 1 == order.count || fields[order[$0 + 1]].key != fields[order[$0]].key }
            .map { order[$0] }
    }

    private func encodeJSON(in order: [Int], into output: inout [UInt8]) {
        output.append(UInt8(ascii: "{"))
        fields.withUnsafeBufferPointer { fields in
            for (position, index) in order.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                JSON.encode(string: fields[index].key, into: &output)
                output.append(UInt8(ascii: ":"))
                fields[index].value.encodeJSON(into: &output)
            }
        }
        output.append(UInt8(ascii: "}"))
    }
}

extension Record.Value {
    var json: JSON {
        switch self {
        case let .string(s): .string(s)
        case let .double(d): .finite(d)
        case let .int(i): .number(Double(i))
        case let .uint(u): .number(Double(u))
        case let .bool(b): .bool(b)
        case let .record(r): r.json
        case let .records(rs): .array(rs.map(\.json))
        }
    }

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

    private static func encode(number: Double, into output: inout [UInt8]) {
        if number.isFinite {
            try! JSON.encode(number: number, into: &output)  // only a non-finite number throws
        } else {
            output.append(contentsOf: "null".utf8)
        }
    }
}
