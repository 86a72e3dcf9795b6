import PlacedJSON
import Testing

@testable import PlacedVarlink

@Suite struct VarlinkWireTests {
    @Test func callsAreCompactJSONEndedByNUL() throws {
        let bytes = try VarlinkWire.call("io.placed.Places.Current", parameters: ["limit": 3])
        #expect(bytes.last == 0)
        #expect(
            String(decoding: bytes.dropLast(), as: UTF8.self)
                == #"{"method":"io.placed.Places.Current","parameters":{"limit":3}}"#)
        let watch = try VarlinkWire.call("io.placed.Places.Watch", more: true)
        #expect(
            String(decoding: watch.dropLast(), as: UTF8.self)
                == #"{"method":"io.placed.Places.Watch","more":true,"parameters":{}}"#)
    }

    @Test func framerJoinsSplitMessagesAndSplitsJoinedOnes() throws {
        var framer = VarlinkWire.Framer()
        framer.append(Array(#"{"parameters":{"a":1}}"#.utf8) + [0] + Array(#"{"param"#.utf8))
        #expect(try framer.next() == ["parameters": ["a": 1]])
        #expect(try framer.next() == nil)
        framer.append(Array(#"eters":{}}"#.utf8) + [0])
        #expect(try framer.next() == ["parameters": [:]])
        #expect(try framer.next() == nil)
        #expect(framer.pendingCount == 0)
    }

    @Test func framerBoundsAMessageAndRejectsBadJSON() {
        var framer = VarlinkWire.Framer(maximumMessageSize: 16)
        framer.append(Array(repeating: UInt8(ascii: " "), count: 17))
        #expect(throws: VarlinkWire.ProtocolError(.tooLarge(limit: 16), "a message longer than 16 bytes")) {
            try framer.next()
        }
        var bad = VarlinkWire.Framer()
        bad.append(Array("{oops}".utf8) + [0])
        #expect(throws: VarlinkWire.ProtocolError.self) { try bad.next() }
    }

    @Test func repliesCarryParametersErrorsAndContinues() throws {
        let reply = try VarlinkWire.Reply(["parameters": ["generation": 2], "continues": true])
        #expect(reply == VarlinkWire.Reply(parameters: ["generation": 2], continues: true))
        let error = try VarlinkWire.Reply(["error": "io.placed.Places.UnknownPlace", "parameters": ["id": "x"]])
        #expect(error.error == "io.placed.Places.UnknownPlace")
        #expect(try VarlinkWire.Reply([:]).parameters.isEmpty)
        #expect(throws: VarlinkWire.ProtocolError.self) { try VarlinkWire.Reply([1]) }
        #expect(throws: VarlinkWire.ProtocolError.self) { try VarlinkWire.Reply(["parameters": [1]]) }
        #expect(throws: VarlinkWire.ProtocolError.self) { try VarlinkWire.Reply(["error": 3]) }
    }
}
