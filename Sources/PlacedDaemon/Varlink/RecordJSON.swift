import PlacedJSON

// A `Record` as JSON, two ways that give the same bytes: `json`, a `JSON` value to put into a larger
// message, and `encodeJSON(into:)`, the text written straight into a reply buffer (a Rank reply of
// 20 places without building 200 dictionary entries first). Doubles that are not finite are null.

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
        encodeJSON(as: JSONShape(self), into: &output)
    }

    /// Appends `JSON.array(records.map(\.json))`'s bytes. Records with the keys of the one before (the
    /// places of a ranking) are written in the shape made for it: keys sorted and encoded once.
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
