/// A JSON value (RFC 8259), small enough for the daemon's wire formats.
///
/// Objects are dictionaries: equality ignores key order, and the serializer writes keys sorted by
/// their UTF-8 bytes, so the same value always produces the same bytes. Numbers are `Double`, which
/// holds every integer up to 2^53 exactly.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])
}

/// Why JSON text was rejected or could not be written, and where: the byte offset into the input
/// (parsing) or into the output produced so far (serializing).
public struct JSONError: Error, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        case unexpectedEnd
        /// A byte that cannot start or continue the value being read.
        case unexpectedByte(UInt8)
        case invalidNumber
        /// The number's magnitude does not fit a `Double` (e.g. `1e400`).
        case numberOutOfRange
        case invalidEscape
        /// A `\u` escape with an unpaired surrogate.
        case invalidSurrogate
        case invalidUTF8
        /// A raw control character (U+0000–U+001F) inside a string; JSON requires it escaped.
        case controlCharacterInString
        case duplicateKey(String)
        case tooDeep(limit: Int)
        /// Data after the top-level value.
        case trailingData
        /// NaN or an infinity: JSON has no spelling for them.
        case nonFiniteNumber
    }

    public let reason: Reason
    public let offset: Int

    public init(_ reason: Reason, offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    public var description: String {
        let what: String
        switch reason {
        case .unexpectedEnd: what = "unexpected end of input"
        case .unexpectedByte(let byte):
            what =
                (0x21...0x7E).contains(byte)
                ? "unexpected character '\(Character(Unicode.Scalar(byte)))'"
                : "unexpected byte 0x\(hex(byte))"
        case .invalidNumber: what = "invalid number"
        case .numberOutOfRange: what = "number out of range"
        case .invalidEscape: what = "invalid escape sequence"
        case .invalidSurrogate: what = "unpaired UTF-16 surrogate in \\u escape"
        case .invalidUTF8: what = "invalid UTF-8"
        case .controlCharacterInString: what = "unescaped control character in string"
        case .duplicateKey(let key): what = "duplicate key \"\(key)\""
        case .tooDeep(let limit): what = "nesting deeper than \(limit) levels"
        case .trailingData: what = "data after the JSON value"
        case .nonFiniteNumber: what = "NaN or infinity cannot be written as JSON"
        }
        return "JSON: \(what) at byte \(offset)"
    }

    private func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }
}

// MARK: - Accessors

extension JSON {
    public subscript(key: String) -> JSON? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var isNull: Bool { self == .null }

    public var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var double: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    /// The number when it is an integer that `Int` holds exactly; nil for 1.5 or 1e300.
    public var int: Int? {
        guard case .number(let value) = self, value.rounded(.towardZero) == value,
            value >= -9_223_372_036_854_775_808.0, value < 9_223_372_036_854_775_808.0
        else { return nil }
        return Int(value)
    }

    public var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var array: [JSON]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var object: [String: JSON]? {
        if case .object(let value) = self { return value }
        return nil
    }
}

extension JSON: ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

// MARK: - Parsing

extension JSON {
    /// Nesting limit of `init(parsing:)` unless told otherwise; deep enough for any real message,
    /// shallow enough that hostile input cannot exhaust the stack.
    public static let defaultDepthLimit = 64

    /// Parses exactly one JSON text (surrounding whitespace allowed). Strict RFC 8259: no comments,
    /// trailing commas, leading zeros, lone surrogates, raw control characters, invalid UTF-8 or
    /// duplicate object keys.
    public init(parsing bytes: some Sequence<UInt8>, depthLimit: Int = JSON.defaultDepthLimit)
        throws(JSONError)
    {
        let result: Result<JSON, JSONError>? = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(JSONError) -> JSON in try JSON.parse(buffer, depthLimit: depthLimit) }
        }
        if let result {
            self = try result.get()
        } else {
            self = try JSON(parsing: Array(bytes), depthLimit: depthLimit)
        }
    }

    /// `init(parsing:)` for the bytes a framer hands out (a slice of its buffer), without the generic
    /// path's metadata lookups in the caller's module.
    public init(parsing bytes: ArraySlice<UInt8>, depthLimit: Int = JSON.defaultDepthLimit) throws(JSONError) {
        let result = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONError) -> JSON in try JSON.parse(buffer, depthLimit: depthLimit) }
        }
        self = try result.get()
    }

    public init(parsing bytes: [UInt8], depthLimit: Int = JSON.defaultDepthLimit) throws(JSONError) {
        try self.init(parsing: bytes[...], depthLimit: depthLimit)
    }

    public init(parsing text: String, depthLimit: Int = JSON.defaultDepthLimit) throws(JSONError) {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(JSONError) -> JSON in try JSON.parse(buffer, depthLimit: depthLimit) }
        }
        self = try result.get()
    }

    private static func parse(_ buffer: UnsafeBufferPointer<UInt8>, depthLimit: Int) throws(JSONError)
        -> JSON
    {
        var parser = Parser(bytes: buffer, depthLimit: depthLimit)
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        if parser.position != buffer.count { throw JSONError(.trailingData, offset: parser.position) }
        return value
    }
}

private struct Parser {
    let bytes: UnsafeBufferPointer<UInt8>
    let depthLimit: Int
    var position = 0

    init(bytes: UnsafeBufferPointer<UInt8>, depthLimit: Int) {
        self.bytes = bytes
        self.depthLimit = depthLimit
    }

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    func peek() throws(JSONError) -> UInt8 {
        guard position < bytes.count else { throw JSONError(.unexpectedEnd, offset: position) }
        return bytes[position]
    }

    mutating func expect(_ byte: UInt8) throws(JSONError) {
        let actual = try peek()
        guard actual == byte else { throw JSONError(.unexpectedByte(actual), offset: position) }
        position += 1
    }

    mutating func expectLiteral(_ literal: StaticString, _ value: JSON) throws(JSONError) -> JSON {
        let start = position
        for index in 0..<literal.utf8CodeUnitCount {
            let expected = literal.utf8Start[index]
            guard start + index < bytes.count else {
                throw JSONError(.unexpectedEnd, offset: start + index)
            }
            let actual = bytes[start + index]
            guard actual == expected else {
                throw JSONError(.unexpectedByte(actual), offset: start + index)
            }
        }
        position = start + literal.utf8CodeUnitCount
        return value
    }

    mutating func parseValue(depth: Int) throws(JSONError) -> JSON {
        switch try peek() {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try expectLiteral("true", .bool(true))
        case UInt8(ascii: "f"): return try expectLiteral("false", .bool(false))
        case UInt8(ascii: "n"): return try expectLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        case let byte: throw JSONError(.unexpectedByte(byte), offset: position)
        }
    }

    mutating func parseObject(depth: Int) throws(JSONError) -> JSON {
        if depth > depthLimit { throw JSONError(.tooDeep(limit: depthLimit), offset: position) }
        position += 1  // {
        skipWhitespace()
        if try peek() == UInt8(ascii: "}") {
            position += 1
            return .object([:])
        }
        // Room for a few members at once: growing one member at a time rehashes twice by the third.
        var members = [String: JSON](minimumCapacity: 4)
        while true {
            skipWhitespace()
            let keyOffset = position
            guard try peek() == UInt8(ascii: "\"") else {
                throw JSONError(.unexpectedByte(bytes[position]), offset: position)
            }
            let key = try parseString()
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            let value = try parseValue(depth: depth)
            if members.updateValue(value, forKey: key) != nil {
                throw JSONError(.duplicateKey(key), offset: keyOffset)
            }
            skipWhitespace()
            switch try peek() {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"):
                position += 1
                return .object(members)
            case let byte: throw JSONError(.unexpectedByte(byte), offset: position)
            }
        }
    }

    mutating func parseArray(depth: Int) throws(JSONError) -> JSON {
        if depth > depthLimit { throw JSONError(.tooDeep(limit: depthLimit), offset: position) }
        position += 1  // [
        var elements: [JSON] = []
        skipWhitespace()
        if try peek() == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            switch try peek() {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"):
                position += 1
                return .array(elements)
            case let byte: throw JSONError(.unexpectedByte(byte), offset: position)
            }
        }
    }

    mutating func parseNumber() throws(JSONError) -> Double {
        let start = position
        var isInteger = true
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        // Integer part: "0" alone or a non-zero digit followed by digits.
        let first = try peek()
        guard isDigit(first) else { throw JSONError(.invalidNumber, offset: position) }
        position += 1
        if first != UInt8(ascii: "0") {
            while position < bytes.count, isDigit(bytes[position]) { position += 1 }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            isInteger = false
            position += 1
            try requireDigits()
        }
        if position < bytes.count,
            bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E")
        {
            isInteger = false
            position += 1
            if position < bytes.count,
                bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-")
            {
                position += 1
            }
            try requireDigits()
        }
        let text = UnsafeBufferPointer(rebasing: bytes[start..<position])
        // Fast path: up to 15 digits are exact in a Double, no rounding question arises.
        if isInteger, text.count <= 16 {
            var negative = false
            var magnitude: Int64 = 0
            for byte in text {
                if byte == UInt8(ascii: "-") {
                    negative = true
                } else {
                    magnitude = magnitude * 10 + Int64(byte &- 48)
                }
            }
            if magnitude < 1 << 53 {
                // "-0" stays negative zero, as the general path would give.
                return negative ? -Double(magnitude) : Double(magnitude)
            }
        }
        if let exact = Self.exactDecimal(text) { return exact }
        // The grammar is checked above, so a failed or infinite conversion can only mean overflow.
        guard let value = Double(String(decoding: text, as: UTF8.self)), value.isFinite else {
            throw JSONError(.numberOutOfRange, offset: start)
        }
        return value
    }

    /// A number whose digits (up to 15 significant ones; 60.1699123, 2.5e-3) and power of ten (at
    /// most 22 either way) are both exact doubles, as one correctly rounded multiplication or division:
    /// the same double strtod gives (Clinger's fast path), without making a String for it. Nil for
    /// the rest. `text` has passed the grammar.
    static func exactDecimal(_ text: UnsafeBufferPointer<UInt8>) -> Double? {
        var index = 0
        let negative = text[0] == UInt8(ascii: "-")
        if negative { index = 1 }
        var significand: UInt64 = 0
        var digits = 0
        var inFraction = false
        var fractionDigits = 0
        while index < text.count, text[index] != UInt8(ascii: "e"), text[index] != UInt8(ascii: "E") {
            let byte = text[index]
            index += 1
            if byte == UInt8(ascii: ".") {
                inFraction = true
                continue
            }
            if inFraction { fractionDigits += 1 }
            if significand == 0, byte == UInt8(ascii: "0") { continue }  // a leading zero is not significant
            digits += 1
            guard digits <= 15 else { return nil }
            significand = significand * 10 + UInt64(byte &- UInt8(ascii: "0"))
        }
        var exponent = -fractionDigits
        if index < text.count {
            index += 1  // e
            var exponentNegative = false
            if text[index] == UInt8(ascii: "-") || text[index] == UInt8(ascii: "+") {
                exponentNegative = text[index] == UInt8(ascii: "-")
                index += 1
            }
            var stated = 0
            while index < text.count {
                stated = stated * 10 + Int(text[index] &- UInt8(ascii: "0"))
                guard stated <= 400 else { return nil }
                index += 1
            }
            exponent += exponentNegative ? -stated : stated
        }
        guard exponent >= -22, exponent <= 22 else { return significand == 0 ? (negative ? -0.0 : 0) : nil }
        let magnitude =
            exponent < 0
            ? Double(significand) / exactPowersOfTen[-exponent]
            : Double(significand) * exactPowersOfTen[exponent]
        return negative ? -magnitude : magnitude
    }

    /// 10^0 ... 10^22, every one exactly a double.
    static let exactPowersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
        1e19, 1e20, 1e21, 1e22,
    ]

    mutating func requireDigits() throws(JSONError) {
        guard isDigit(try peek()) else { throw JSONError(.invalidNumber, offset: position) }
        while position < bytes.count, isDigit(bytes[position]) { position += 1 }
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    mutating func parseString() throws(JSONError) -> String {
        position += 1  // opening quote
        let start = position
        // Fast path: no escapes, so the string is the raw bytes once validated as UTF-8.
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<position])
                position += 1
                // ASCII is valid as it is, and `String(decoding:)` takes it without the generic
                // validation `String(validating:)` runs (type metadata looked up for every string).
                if isASCII(raw) { return String(decoding: raw, as: UTF8.self) }
                guard let string = String(validating: raw, as: UTF8.self) else {
                    throw JSONError(.invalidUTF8, offset: start + firstInvalidUTF8(raw))
                }
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw JSONError(.controlCharacterInString, offset: position) }
            position += 1
        }
        guard position < bytes.count else { throw JSONError(.unexpectedEnd, offset: position) }
        return try parseEscapedString(from: start)
    }

    /// The slow path: decode escapes into a byte buffer, then validate the result as UTF-8 once.
    mutating func parseEscapedString(from start: Int) throws(JSONError) -> String {
        var utf8 = Array(UnsafeBufferPointer(rebasing: bytes[start..<position]))
        while true {
            guard position < bytes.count else { throw JSONError(.unexpectedEnd, offset: position) }
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                guard let string = String(validating: utf8, as: UTF8.self) else {
                    throw JSONError(.invalidUTF8, offset: start)
                }
                return string
            case UInt8(ascii: "\\"):
                position += 1
                let escape = try peek()
                position += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"): appendUTF8(of: try parseUnicodeEscape(), to: &utf8)
                default: throw JSONError(.invalidEscape, offset: position - 2)
                }
            case 0..<0x20:
                throw JSONError(.controlCharacterInString, offset: position)
            default:
                utf8.append(byte)
                position += 1
            }
        }
    }

    /// After `\u`: four hex digits, and for a high surrogate the `\uDC00`-range partner.
    mutating func parseUnicodeEscape() throws(JSONError) -> Unicode.Scalar {
        let escapeStart = position - 2
        let unit = try parseHex4()
        switch unit {
        case 0xD800...0xDBFF:
            guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
                bytes[position + 1] == UInt8(ascii: "u")
            else { throw JSONError(.invalidSurrogate, offset: escapeStart) }
            position += 2
            let low = try parseHex4()
            guard (0xDC00...0xDFFF).contains(low) else {
                throw JSONError(.invalidSurrogate, offset: escapeStart)
            }
            let value = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            return Unicode.Scalar(value)!
        case 0xDC00...0xDFFF:
            throw JSONError(.invalidSurrogate, offset: escapeStart)
        default:
            return Unicode.Scalar(unit)!
        }
    }

    mutating func parseHex4() throws(JSONError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = try peek()
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw JSONError(.invalidEscape, offset: position)
            }
            value = value << 4 | UInt16(digit)
            position += 1
        }
        return value
    }

    func appendUTF8(of scalar: Unicode.Scalar, to utf8: inout [UInt8]) {
        UTF8.encode(scalar) { utf8.append($0) }
    }

    /// Whether every byte is ASCII, eight at a time.
    func isASCII(_ raw: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        while raw.count - index >= 8 {
            let word = UnsafeRawPointer(raw.baseAddress! + index).loadUnaligned(as: UInt64.self)
            if word & 0x8080_8080_8080_8080 != 0 { return false }
            index += 8
        }
        while index < raw.count {
            if raw[index] >= 0x80 { return false }
            index += 1
        }
        return true
    }

    /// Offset of the first byte that breaks UTF-8, for the error message.
    func firstInvalidUTF8(_ raw: UnsafeBufferPointer<UInt8>) -> Int {
        var decoder = UTF8()
        var iterator = raw.makeIterator()
        var offset = 0
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): offset += UTF8.width(scalar)
            case .emptyInput, .error: return offset
            }
        }
    }
}

// MARK: - Serializing

extension JSON {
    /// The compact UTF-8 encoding: no insignificant whitespace, object keys sorted, integers
    /// without a fraction, shortest round-tripping form for other numbers.
    public func encoded() throws(JSONError) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(64)
        try encode(into: &output)
        return output
    }

    /// Appends the compact encoding to `output` (e.g. a socket buffer).
    public func encode(into output: inout [UInt8]) throws(JSONError) {
        switch self {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let value): output.append(contentsOf: value ? "true".utf8 : "false".utf8)
        case .number(let value): try JSON.encode(number: value, into: &output)
        case .string(let value): JSON.encode(string: value, into: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                try element.encode(into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            let sorted = members.sorted { JSON.keyPrecedes($0.key, $1.key) }
            for (index, member) in sorted.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                JSON.encode(string: member.key, into: &output)
                output.append(UInt8(ascii: ":"))
                try member.value.encode(into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// The compact encoding as a string.
    public func serialized() throws(JSONError) -> String {
        String(decoding: try encoded(), as: UTF8.self)
    }

    /// Whether object key `a` is written before `b`: by their UTF-8 bytes, which is Unicode scalar
    /// order, deterministic and locale-free. Writers that emit objects themselves sort by it too.
    public static func keyPrecedes(_ a: String, _ b: String) -> Bool {
        var a = a
        var b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                for index in 0..<min(x.count, y.count) where x[index] != y[index] { return x[index] < y[index] }
                return x.count < y.count
            }
        }
    }

    /// Appends `number` as `encode(into:)` writes it, for code that writes JSON text directly. Exact
    /// integers within ±2^53 are written as integers ("3", not "3.0"; "-0" becomes "0"), the others as
    /// `description` writes them, the shortest digits that read back as the same double ("0.1",
    /// "1e-07", "1e+20"): valid JSON as written.
    public static func encode(number: Double, into output: inout [UInt8]) throws(JSONError) {
        guard number.isFinite else { throw JSONError(.nonFiniteNumber, offset: output.count) }
        // Through `withUTF8`: appending a String's `utf8` view copies it byte by byte.
        var text =
            number.rounded(.towardZero) == number && number.magnitude <= 9_007_199_254_740_992
            ? Int64(number).description : number.description
        text.withUTF8 { output.append(contentsOf: $0) }
    }

    /// Appends `string` quoted and escaped as `encode(into:)` writes it.
    public static func encode(string: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // A native or small string's bytes are read in place; others (bridged) are copied once first.
        if string.utf8.withContiguousStorageIfAvailable({ appendEscaped($0, to: &output) }) == nil {
            var string = string
            string.withUTF8 { appendEscaped($0, to: &output) }
        }
        output.append(UInt8(ascii: "\""))
    }

    /// Copies runs of bytes that need no escape in one go (most strings are a single run) and escapes
    /// the others: controls, the quote and the backslash, looked for eight bytes at a time.
    private static func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        var runStart = 0
        var index = 0
        func word(at offset: Int) -> UInt64 {
            UInt64(littleEndian: UnsafeRawPointer(bytes.baseAddress! + offset).loadUnaligned(as: UInt64.self))
        }
        while index < bytes.count {
            if bytes.count - index >= 8 {
                if !mayNeedEscape(word(at: index)) {
                    index += 8
                    continue
                }
            } else if bytes.count >= 8, !mayNeedEscape(word(at: bytes.count - 8)) {
                // The last eight bytes, overlapping those already read, need none: nor does the tail.
                break
            }
            let stop = min(index + 8, bytes.count)
            while index < stop {
                let byte = bytes[index]
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                    appendEscape(of: byte, to: &output)
                    runStart = index + 1
                }
                index += 1
            }
        }
        output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
    }

    /// Whether any of the eight bytes is below 0x20, a quote or a backslash (never false when one is).
    private static func mayNeedEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let below = (word &- ones &* 0x20) & ~word
        let isQuote = (quote &- ones) & ~quote
        let isBackslash = (backslash &- ones) & ~backslash
        return (below | isQuote | isBackslash) & high != 0
    }

    /// The escape of a byte that needs one: a control, the quote, the backslash.
    private static func appendEscape(of byte: UInt8, to output: inout [UInt8]) {
        let escaped: UInt8
        switch byte {
        case UInt8(ascii: "\""): escaped = UInt8(ascii: "\"")
        case UInt8(ascii: "\\"): escaped = UInt8(ascii: "\\")
        case 0x0A: escaped = UInt8(ascii: "n")
        case 0x0D: escaped = UInt8(ascii: "r")
        case 0x09: escaped = UInt8(ascii: "t")
        case 0x08: escaped = UInt8(ascii: "b")
        case 0x0C: escaped = UInt8(ascii: "f")
        default:
            let hex: StaticString = "0123456789abcdef"
            output.append(contentsOf: "\\u00".utf8)
            output.append(hex.utf8Start[Int(byte >> 4)])
            output.append(hex.utf8Start[Int(byte & 0xF)])
            return
        }
        output.append(UInt8(ascii: "\\"))
        output.append(escaped)
    }
}

extension JSON: CustomStringConvertible {
    /// The compact encoding; non-finite numbers, which have none, show as `NaN`/`inf` for debugging.
    public var description: String {
        if let text = try? serialized() { return text }
        switch self {
        case .number(let value): return value.description
        case .array(let elements): return "[" + elements.map(\.description).joined(separator: ",") + "]"
        case .object(let members):
            let keys = members.keys.sorted(by: JSON.keyPrecedes)
            return "{" + keys.map { "\(JSON.string($0)):\(members[$0]!)" }.joined(separator: ",") + "}"
        default: return "?"
        }
    }
}
