import PlacedJSON
import PlacedTestSupport
import Testing

@testable import PlacedJSON

private func parse(_ text: String) throws(JSONError) -> JSON { try JSON(parsing: text) }

private func reason(_ text: String) -> JSONError.Reason? {
    do {
        _ = try parse(text)
        return nil
    } catch {
        return error.reason
    }
}

@Suite struct JSONParsingTests {
    @Test func parsesEveryKindOfValue() throws {
        let value = try parse(
            #" { "a" : [1, -2.5, 3e2, true, false, null], "b": {"c": "d"}, "e": "" } "#)
        #expect(
            value
                == .object([
                    "a": .array([.number(1), .number(-2.5), .number(300), .bool(true), .bool(false), .null]),
                    "b": .object(["c": .string("d")]),
                    "e": .string(""),
                ]))
        #expect(value["b"]?["c"]?.string == "d")
        #expect(value["a"]?.array?.count == 6)
        #expect(value["missing"] == nil)
    }

    @Test func parsesScalarsAtTopLevel() throws {
        #expect(try parse("0") == .number(0))
        #expect(try parse("\"x\"") == .string("x"))
        #expect(try parse(" null\n") == .null)
        #expect(try parse("[]") == .array([]))
        #expect(try parse("{}") == .object([:]))
    }

    @Test func numbersFollowTheGrammar() throws {
        #expect(try parse("-0").double == 0)
        #expect(try parse("0.5").double == 0.5)
        #expect(try parse("1E-2").double == 0.01)
        #expect(try parse("1e+2").double == 100)
        #expect(try parse("9007199254740993").double == 9_007_199_254_740_992)  // nearest double
        #expect(try parse("123456789012345678901234567890").double == 1.2345678901234568e29)
        #expect(try parse("2.2250738585072014e-308").double == 2.2250738585072014e-308)
        for bad in ["01", "-", "1.", ".5", "1e", "1e+", "+1", "0x10", "1.e3", "-.5", "NaN", "Infinity"] {
            let why = reason(bad)
            #expect(why != nil, "\(bad) must be rejected")
        }
        #expect(reason("1e400") == .numberOutOfRange)
        #expect(reason("-1e400") == .numberOutOfRange)
        #expect(try parse("1e-400").double == 0)
    }

    @Test func intAccessorIsExact() throws {
        #expect(try parse("42").int == 42)
        #expect(try parse("-7").int == -7)
        #expect(try parse("4.0").int == 4)
        #expect(try parse("4.5").int == nil)
        #expect(try parse("1e300").int == nil)
        #expect(try parse("\"4\"").int == nil)
    }

    @Test func decodesEscapes() throws {
        #expect(try parse(#""a\"b\\c\/d\be\ff\ng\rh\ti""#) == .string("a\"b\\c/d\u{8}e\u{c}f\ng\rh\ti"))
        #expect(try parse(#""\u0041\u00e9\u20AC""#) == .string("Aé€"))
        #expect(try parse(#""\u0000""#) == .string("\u{0}"))
    }

    @Test func decodesSurrogatePairs() throws {
        #expect(try parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try parse(#""x\uD834\uDD1Ey""#) == .string("x𝄞y"))
        #expect(reason(#""\ud83d""#) == .invalidSurrogate)
        #expect(reason(#""\ud83dx""#) == .invalidSurrogate)
        #expect(reason(#""\ud83d\u0041""#) == .invalidSurrogate)
        #expect(reason(#""\ude00""#) == .invalidSurrogate)
    }

    @Test func acceptsRawUTF8AndRejectsInvalidUTF8() throws {
        #expect(
            try parse("\"Mannerheimintie 1, Helsingfors – café 😀\"").string
                == "Mannerheimintie 1, Helsingfors – café 😀")
        let invalid: [[UInt8]] = [
            [0x22, 0xC3, 0x22],  // truncated two-byte sequence
            [0x22, 0xC0, 0xAF, 0x22],  // overlong "/"
            [0x22, 0xED, 0xA0, 0x80, 0x22],  // UTF-8-encoded surrogate
            [0x22, 0xFF, 0x22],
        ]
        for bytes in invalid {
            #expect(throws: JSONError.self) { try JSON(parsing: bytes) }
        }
        do {
            _ = try JSON(parsing: [0x22, 0x61, 0x62, 0xFF, 0x22] as [UInt8])
            Issue.record("accepted invalid UTF-8")
        } catch {
            #expect(error == JSONError(.invalidUTF8, offset: 3))
        }
        // Escaped strings are validated too.
        #expect(throws: JSONError.self) { try JSON(parsing: Array(#""\n"#.utf8) + [0xFF, 0x22]) }
    }

    @Test func rejectsMalformedInputWithOffsets() {
        let cases: [(String, JSONError)] = [
            ("", JSONError(.unexpectedEnd, offset: 0)),
            ("   ", JSONError(.unexpectedEnd, offset: 3)),
            ("[1,]", JSONError(.unexpectedByte(UInt8(ascii: "]")), offset: 3)),
            ("{\"a\":1,}", JSONError(.unexpectedByte(UInt8(ascii: "}")), offset: 7)),
            ("{\"a\" 1}", JSONError(.unexpectedByte(UInt8(ascii: "1")), offset: 5)),
            ("{a:1}", JSONError(.unexpectedByte(UInt8(ascii: "a")), offset: 1)),
            ("[1 2]", JSONError(.unexpectedByte(UInt8(ascii: "2")), offset: 3)),
            ("tru", JSONError(.unexpectedEnd, offset: 3)),
            ("trux", JSONError(.unexpectedByte(UInt8(ascii: "x")), offset: 3)),
            ("\"abc", JSONError(.unexpectedEnd, offset: 4)),
            ("\"a\\qb\"", JSONError(.invalidEscape, offset: 2)),
            ("\"\\u12G4\"", JSONError(.invalidEscape, offset: 5)),
            ("\"a\nb\"", JSONError(.controlCharacterInString, offset: 2)),
            ("\"a\u{1F}\"", JSONError(.controlCharacterInString, offset: 2)),
            ("{} {}", JSONError(.trailingData, offset: 3)),
            ("1 2", JSONError(.trailingData, offset: 2)),
            ("{\"k\":1,\"k\":2}", JSONError(.duplicateKey("k"), offset: 7)),
            ("[1] // comment", JSONError(.trailingData, offset: 4)),
            ("'a'", JSONError(.unexpectedByte(UInt8(ascii: "'")), offset: 0)),
        ]
        for (text, expected) in cases {
            #expect(reason(text) == expected.reason, "\(text.debugDescription)")
            do {
                _ = try parse(text)
            } catch {
                #expect(error == expected, "\(text.debugDescription): \(error)")
            }
        }
    }

    @Test func depthLimitStopsDeepNesting() throws {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(try parse(ok).array != nil)
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(reason(deep) == .tooDeep(limit: 64))
        let mixed = String(repeating: "{\"a\":[", count: 3) + "1" + String(repeating: "]}", count: 3)
        #expect(throws: JSONError(.tooDeep(limit: 5), offset: 17)) {
            try JSON(parsing: mixed, depthLimit: 5)
        }
        #expect(try JSON(parsing: mixed, depthLimit: 6)["a"] != nil)
        // Hostile input far beyond the limit fails cleanly instead of exhausting the stack.
        #expect(reason(String(repeating: "[", count: 1_000_000)) == .tooDeep(limit: 64))
    }

    @Test func errorsDescribeThemselves() {
        #expect(
            JSONError(.unexpectedByte(UInt8(ascii: "x")), offset: 3).description
                == "JSON: unexpected character 'x' at byte 3")
        #expect(
            JSONError(.unexpectedByte(0), offset: 0).description == "JSON: unexpected byte 0x00 at byte 0"
        )
        #expect(JSONError(.tooDeep(limit: 64), offset: 9).description.contains("64 levels"))
    }
}

@Suite struct JSONSerializingTests {
    @Test func writesCompactSortedOutput() throws {
        let value: JSON = ["zeta": 1, "alpha": [true, nil_, "x"], "mid": ["b": 2, "a": 1.5]]
        #expect(try value.serialized() == #"{"alpha":[true,null,"x"],"mid":{"a":1.5,"b":2},"zeta":1}"#)
    }

    @Test func integersHaveNoFraction() throws {
        #expect(try JSON.number(3).serialized() == "3")
        #expect(try JSON.number(-42).serialized() == "-42")
        #expect(try JSON.number(-0.0).serialized() == "0")
        #expect(try JSON.number(9_007_199_254_740_992).serialized() == "9007199254740992")
        #expect(try JSON.number(1e20).serialized() == "1e+20")
        #expect(try JSON.number(0.1).serialized() == "0.1")
        #expect(try JSON.number(60.1699).serialized() == "60.1699")
        #expect(try JSON.number(1e-7).serialized() == "1e-07")
        #expect(try JSON.number(.leastNonzeroMagnitude).serialized() == "5e-324")
    }

    @Test func rejectsNonFiniteNumbers() {
        #expect(throws: JSONError(.nonFiniteNumber, offset: 3)) {
            try JSON.array([.number(1), .number(.nan)]).encoded()
        }
        #expect(throws: JSONError.self) { try JSON.object(["x": .number(.infinity)]).encoded() }
        #expect(throws: JSONError.self) { try JSON.number(-.infinity).encoded() }
        #expect(JSON.array([.number(.nan)]).description == "[nan]")
    }

    @Test func escapesWhatJSONRequires() throws {
        let text = "q\"b\\s/n\nr\rt\tb\u{8}f\u{c}z\u{0}u\u{1F}é😀\u{7F}"
        let encoded = try JSON.string(text).serialized()
        #expect(encoded == #""q\"b\\s/n\nr\rt\tb\bf\fz\u0000u\u001fé😀"# + "\u{7F}\"")
        #expect(try parse(encoded) == .string(text))
    }

    @Test func roundTripsAreExact() throws {
        let values: [JSON] = [
            [
                "id": "osm:node/123", "name": "Café \"Ekberg\"", "latitude": 60.163_45,
                "longitude": 24.939_87,
                "likelihood": 0.312_5, "distance": 12.25, "address": nil_, "tags": ["a", "b"], "n": -17,
            ],
            [[], [:], [[[]]], "", 0, 1e300, -1e-300, 2.220446049250313e-16],
            .string(String(repeating: "€😀\n", count: 500)),
        ]
        for value in values {
            let bytes = try value.encoded()
            #expect(try JSON(parsing: bytes) == value)
            #expect(try JSON(parsing: bytes).encoded() == bytes, "stable bytes")
        }
        // Every double survives the text round trip bit for bit.
        var rng = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            let bits = rng.next()
            let number = Double(bitPattern: bits)
            guard number.isFinite else { continue }
            #expect(try parse(JSON.number(number).serialized()).double == number)
        }
    }

    @Test func parsesFromAnyByteSequence() throws {
        let slice = Array("xx[1,2]".utf8)[2...]
        #expect(try JSON(parsing: slice) == [1, 2])
        #expect(try JSON(parsing: AnySequence(Array("true".utf8))) == true)
    }
}

/// `nil` cannot be a JSON literal (it would be ambiguous with Optional), so tests spell null this way.
private let nil_ = JSON.null

@Suite struct JSONNumberParsingTests {
    /// The fast path for short decimals (Clinger's) must give the double strtod gives, bit for bit.
    @Test func shortDecimalsParseAsStrtodDoes() throws {
        var rng = SplitMix64(seed: 23)
        var texts: [String] = [
            "60.1699123", "-0.0", "0.0", "-0.000", "0.1", "0.2", "0.3", "2.5e-3", "1e22", "1e23", "1.5e-22",
            "1.5e-23", "123456789012345.6", "1234567890123456.7", "0.000000000000000000000001", "9007199254740993.0",
            "4.35e+2", "1E5", "-7.0e-0", "100.5", "0e500", "0.0e-400", "1e-400", "12345678901234567890e-5",
        ]
        for _ in 0..<50_000 {
            let significand = rng.next() >> UInt64(rng.next() % 64)
            let digits = String(significand)
            let point = Int(rng.next() % UInt64(digits.count + 1))
            var text = String(digits.prefix(point)) + "." + String(digits.dropFirst(point))
            if text.hasPrefix(".") { text = "0" + text }
            if text.hasSuffix(".") { text += "0" }
            if rng.next() % 3 == 0 { text += "e\(Int(rng.next() % 61) - 30)" }
            if rng.next() % 2 == 0 { text = "-" + text }
            texts.append(text)
        }
        for _ in 0..<20_000 {
            texts.append(String(Double(Int64.random(in: -1_800_000_000...1_800_000_000, using: &rng)) / 1e7))
        }
        for text in texts {
            let expected = Double(text)!
            let parsed = try JSON(parsing: text).double
            #expect(parsed?.bitPattern == expected.bitPattern, "\(text)")
        }
    }

    @Test func parsesSlicesAndArraysOfBytes() throws {
        let bytes = Array(#"xx{"latitude":60.1699123,"limit":20}"#.utf8)
        #expect(try JSON(parsing: bytes[2...]) == ["latitude": 60.1699123, "limit": 20])
        #expect(try JSON(parsing: Array(bytes[2...])) == ["latitude": 60.1699123, "limit": 20])
        #expect(throws: JSONError.self) { try JSON(parsing: Array("1 2 ".utf8)[...]) }
    }
}

@Suite struct JSONStringWritingTests {
    /// The escaper, byte by byte, as the writer was before it looked at eight bytes at a time.
    private func reference(_ string: String) -> [UInt8] {
        var output: [UInt8] = [UInt8(ascii: "\"")]
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output += Array(#"\""#.utf8)
            case UInt8(ascii: "\\"): output += Array(#"\\"#.utf8)
            case 0x0A: output += Array(#"\n"#.utf8)
            case 0x0D: output += Array(#"\r"#.utf8)
            case 0x09: output += Array(#"\t"#.utf8)
            case 0x08: output += Array(#"\b"#.utf8)
            case 0x0C: output += Array(#"\f"#.utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                output += Array(#"\u00"#.utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
        return output
    }

    @Test func escapesAtEveryPositionOfLongAndShortStrings() {
        var rng = SplitMix64(seed: 25)
        let pieces = ["a", "Z", "ä", "€", "😀", "\"", "\\", "\n", "\u{1}", "\u{1F}", " ", "\u{7F}", "~", "!", "]"]
        for _ in 0..<20_000 {
            let string = (0..<Int(rng.next() % 40)).map { _ in
                rng.next() % 4 == 0 ? pieces[Int(rng.next() % UInt64(pieces.count))] : "abcdefgh"
            }.joined()
            var written: [UInt8] = []
            JSON.encode(string: string, into: &written)
            #expect(written == reference(string), "\(string.debugDescription)")
        }
        for length in 0..<20 {
            for special in ["\"", "\\", "\u{0}", "\u{1F}", " ", "\u{20}", "!", "#", "[", "]"] {
                for position in 0...length {
                    let string =
                        String(repeating: "x", count: position) + special
                        + String(repeating: "y", count: length - position)
                    var written: [UInt8] = []
                    JSON.encode(string: string, into: &written)
                    #expect(written == reference(string), "\(string.debugDescription)")
                }
            }
        }
    }
}
