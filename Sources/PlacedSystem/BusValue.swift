import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// The D-Bus values the daemon's interface uses: basic types, `as`, `a{sv}` and `aa{sv}`. Each case
/// has one signature, so a value alone says how it goes on the wire.
public indirect enum BusValue: Sendable, Equatable {
    case bool(Bool)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    /// `as`
    case strings([String])
    /// `au`
    case uint32s([UInt32])
    /// `a{sv}`: written with keys sorted, so equal dictionaries give equal messages.
    case dictionary([String: BusValue])
    /// `aa{sv}`
    case dictionaries([[String: BusValue]])

    public var signature: String {
        switch self {
        case .bool: "b"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .strings: "as"
        case .uint32s: "au"
        case .dictionary: "a{sv}"
        case .dictionaries: "aa{sv}"
        }
    }

    /// The complete types a signature is made of: `"taa{sv}"` is `["t", "aa{sv}"]`.
    public static func completeTypes(of signature: String) -> [String] {
        var types: [String] = []
        var current = ""
        var depth = 0
        for character in signature {
            current.append(character)
            switch character {
            case "a": continue  // an array's element type follows
            case "(", "{": depth += 1
            case ")", "}": depth -= 1
            default: break
            }
            if depth == 0 {
                types.append(current)
                current = ""
            }
        }
        return types
    }

    public var bool: Bool? { if case .bool(let v) = self { v } else { nil } }
    public var int32: Int32? { if case .int32(let v) = self { v } else { nil } }
    public var uint32: UInt32? { if case .uint32(let v) = self { v } else { nil } }
    public var int64: Int64? { if case .int64(let v) = self { v } else { nil } }
    public var uint64: UInt64? { if case .uint64(let v) = self { v } else { nil } }
    public var double: Double? { if case .double(let v) = self { v } else { nil } }
    public var string: String? {
        switch self {
        case .string(let v), .objectPath(let v): v
        default: nil
        }
    }
    public var strings: [String]? { if case .strings(let v) = self { v } else { nil } }
    public var uint32s: [UInt32]? { if case .uint32s(let v) = self { v } else { nil } }
    public var dictionary: [String: BusValue]? { if case .dictionary(let v) = self { v } else { nil } }
    public var dictionaries: [[String: BusValue]]? { if case .dictionaries(let v) = self { v } else { nil } }

    public subscript(key: String) -> BusValue? { dictionary?[key] }
}

/// Reading and writing a `sd_bus_message *` body, one `BusValue` at a time, with the non-variadic
/// sd-bus calls (Swift cannot call `sd_bus_message_append`/`read`).
struct BusMessageBody {
    let message: OpaquePointer

    // MARK: Writing

    func append(_ values: [BusValue]) throws(SystemError) {
        for value in values { try append(value) }
    }

    func append(_ value: BusValue) throws(SystemError) {
        switch value {
        case .bool(let v): try appendBasic("b", Int32(v ? 1 : 0))
        case .int32(let v): try appendBasic("i", v)
        case .uint32(let v): try appendBasic("u", v)
        case .int64(let v): try appendBasic("x", v)
        case .uint64(let v): try appendBasic("t", v)
        case .double(let v): try appendBasic("d", v)
        case .string(let v): try appendString("s", v)
        case .objectPath(let v): try appendString("o", v)
        case .strings(let v):
            try container("a", "s") { () throws(SystemError) in
                for string in v { try appendString("s", string) }
            }
        case .uint32s(let v):
            try container("a", "u") { () throws(SystemError) in
                for number in v { try appendBasic("u", number) }
            }
        case .dictionary(let v): try appendDictionary(v)
        case .dictionaries(let v):
            try container("a", "a{sv}") { () throws(SystemError) in
                for dictionary in v { try appendDictionary(dictionary) }
            }
        }
    }

    /// `value` wrapped in a variant (`v`), as Properties.Get replies.
    func appendVariant(_ value: BusValue) throws(SystemError) {
        try container("v", value.signature) { () throws(SystemError) in try append(value) }
    }

    private func appendDictionary(_ dictionary: [String: BusValue]) throws(SystemError) {
        try container("a", "{sv}") { () throws(SystemError) in
            for key in dictionary.keys.sorted() {
                let value = dictionary[key]!
                try container("e", "sv") { () throws(SystemError) in
                    try appendString("s", key)
                    try appendVariant(value)
                }
            }
        }
    }

    private func container(_ type: Unicode.Scalar, _ contents: String, _ body: () throws(SystemError) -> Void)
        throws(SystemError)
    {
        try checkSD(
            sd_bus_message_open_container(message, CChar(type.value), contents), "sd_bus_message_open_container")
        try body()
        try checkSD(sd_bus_message_close_container(message), "sd_bus_message_close_container")
    }

    private func appendBasic<T: BitwiseCopyable>(_ type: Unicode.Scalar, _ value: T) throws(SystemError) {
        var value = value
        try checkSD(sd_bus_message_append_basic(message, CChar(type.value), &value), "sd_bus_message_append_basic")
    }

    private func appendString(_ type: Unicode.Scalar, _ value: String) throws(SystemError) {
        // D-Bus strings cannot hold NUL; sd-bus would cut the string there, so refuse instead.
        guard !value.utf8.contains(0) else { throw SystemError("D-Bus string with NUL", errno: EINVAL) }
        try checkSD(
            value.withCString { sd_bus_message_append_basic(message, CChar(type.value), $0) },
            "sd_bus_message_append_basic")
    }

    // MARK: Reading

    /// Every remaining value of the body (or of the container entered).
    func readAll() throws(SystemError) -> [BusValue] {
        var values: [BusValue] = []
        while let value = try read() { values.append(value) }
        return values
    }

    /// The next value, or nil at the end. Types outside `BusValue` are `EOPNOTSUPP`.
    func read() throws(SystemError) -> BusValue? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        guard try checkSD(sd_bus_message_peek_type(message, &type, &contents), "sd_bus_message_peek_type") > 0 else {
            return nil
        }
        switch UInt8(bitPattern: type) {
        case UInt8(ascii: "b"): return .bool(try readBasic("b", Int32(0)) != 0)
        case UInt8(ascii: "i"): return .int32(try readBasic("i", Int32(0)))
        case UInt8(ascii: "u"): return .uint32(try readBasic("u", UInt32(0)))
        case UInt8(ascii: "x"): return .int64(try readBasic("x", Int64(0)))
        case UInt8(ascii: "t"): return .uint64(try readBasic("t", UInt64(0)))
        case UInt8(ascii: "d"): return .double(try readBasic("d", Double(0)))
        case UInt8(ascii: "s"): return .string(try readString("s"))
        case UInt8(ascii: "o"): return .objectPath(try readString("o"))
        case UInt8(ascii: "v"):
            let signature = String(cString: contents!)
            return try inside("v", signature) { () throws(SystemError) -> BusValue in
                guard let value = try read() else { throw SystemError("empty D-Bus variant", errno: EBADMSG) }
                return value
            }
        case UInt8(ascii: "a"):
            switch String(cString: contents!) {
            case "s":
                return .strings(
                    try inside("a", "s") { () throws(SystemError) in try readAll().map { $0.string! } })
            case "u":
                return .uint32s(
                    try inside("a", "u") { () throws(SystemError) in try readAll().map { $0.uint32! } })
            case "{sv}":
                return .dictionary(try readDictionary())
            case "a{sv}":
                return .dictionaries(
                    try inside("a", "a{sv}") { () throws(SystemError) -> [[String: BusValue]] in
                        var dictionaries: [[String: BusValue]] = []
                        while try checkSD(sd_bus_message_at_end(message, 0), "sd_bus_message_at_end") == 0 {
                            dictionaries.append(try readDictionary())
                        }
                        return dictionaries
                    })
            case let other:
                throw SystemError("unsupported D-Bus type a\(other)", errno: EOPNOTSUPP)
            }
        default:
            throw SystemError(
                "unsupported D-Bus type \(Character(Unicode.Scalar(UInt8(bitPattern: type))))", errno: EOPNOTSUPP)
        }
    }

    private func readDictionary() throws(SystemError) -> [String: BusValue] {
        try inside("a", "{sv}") { () throws(SystemError) -> [String: BusValue] in
            var dictionary: [String: BusValue] = [:]
            while try checkSD(sd_bus_message_at_end(message, 0), "sd_bus_message_at_end") == 0 {
                try inside("e", "sv") { () throws(SystemError) in
                    let key = try readString("s")
                    guard let value = try read() else { throw SystemError("D-Bus dict entry", errno: EBADMSG) }
                    dictionary[key] = value
                }
            }
            return dictionary
        }
    }

    private func inside<T>(_ type: Unicode.Scalar, _ contents: String, _ body: () throws(SystemError) -> T)
        throws(SystemError) -> T
    {
        try checkSD(
            sd_bus_message_enter_container(message, CChar(type.value), contents), "sd_bus_message_enter_container")
        let result = try body()
        try checkSD(sd_bus_message_exit_container(message), "sd_bus_message_exit_container")
        return result
    }

    private func readBasic<T: BitwiseCopyable>(_ type: Unicode.Scalar, _ initial: T) throws(SystemError) -> T {
        var value = initial
        try checkSD(sd_bus_message_read_basic(message, CChar(type.value), &value), "sd_bus_message_read_basic")
        return value
    }

    private func readString(_ type: Unicode.Scalar) throws(SystemError) -> String {
        var pointer: UnsafePointer<CChar>?
        try checkSD(sd_bus_message_read_basic(message, CChar(type.value), &pointer), "sd_bus_message_read_basic")
        return String(cString: pointer!)
    }
}
