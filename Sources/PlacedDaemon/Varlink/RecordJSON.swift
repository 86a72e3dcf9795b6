import PlacedCore
import PlacedJSON
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
            shape.prefixes.withUnsafeBufferPointer { prefixes in
                var start = 0
                for (index, end) in zip(shape.order, shape.prefixEnds) {
                    output.append(contentsOf: UnsafeBufferPointer(rebasing: prefixes[start..<end]))
                    fields[index].value.encodeJSON(into: &output)
                    start = end
                }
            }
        }
        output.append(UInt8(ascii: "}"))
    }
}

/// How a record's fields are written: which, in what order, each after its encoded key.
private struct JSONShape {
    /// The fields' indices sorted by key, stably; of a key set more than once only the last.
    var order: [Int] = []
    /// `"key":` for the first, `,"key":` for the others, one after the other; each ends at its
    /// `prefixEnds` entry.
    var prefixes: [UInt8] = []
    var prefixEnds: [Int] = []

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
        order.reserveCapacity(sorted.count)
        prefixEnds.reserveCapacity(sorted.count)
        prefixes.reserveCapacity(16 * sorted.count)
        for (position, index) in sorted.enumerated()
        where position + 1 == sorted.count || fields[sorted[position + 1]].key != fields[index].key {
            if !order.isEmpty { prefixes.append(UInt8(ascii: ",")) }
            JSON.encode(string: fields[index].key, into: &prefixes)
            prefixes.append(UInt8(ascii: ":"))
            order.append(index)
            prefixEnds.append(prefixes.count)
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
        case let .strings(items):
            output.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                JSON.encode(string: item, into: &output)
            }
            output.append(UInt8(ascii: "]"))
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
            case .strings(let items): items.reduce(size + field.key.utf8.count + 2) { $0 + $1.utf8.count + 3 }
            default: size + field.key.utf8.count + 24
            }
        }
    }
}
