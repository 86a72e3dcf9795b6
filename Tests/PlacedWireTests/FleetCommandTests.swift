import PlacedCore
import PlacedJSON
import Testing

@testable import PlacedWire

/// Fleet commands as the broker delivers them: placed's own form and OwnTracks' setWaypoints, read
/// whole or refused with a named error.
@Suite struct FleetCommandTests {
    static let feature = """
        {"type": "Feature", "properties": {"id": "own:depot", "name": "Depot", "radius": 40},
         "geometry": {"type": "Point", "coordinates": [24.95, 60.17]}}
        """

    func parse(_ text: String, _ origin: FleetCommand.Origin = .placed) throws(FleetCommandError) -> FleetCommand {
        try FleetCommand.parse(Array(text.utf8), origin: origin)
    }

    func refusal(_ text: String, _ origin: FleetCommand.Origin = .placed) -> FleetCommandError? {
        do {
            _ = try parse(text, origin)
            return nil
        } catch {
            return error
        }
    }

    @Test func placedsCommandPutsAndDeletes() throws {
        let command = try parse(#"{"id": "req-1", "put": [\#(Self.feature)], "delete": ["own:old"]}"#)
        #expect(command.origin == .placed && command.request == "req-1")
        #expect(command.put.map(\.id) == ["own:depot"] && command.delete == ["own:old"])
        #expect(command.put[0].geometry == .circle(centre: Coordinate(latitude: 60.17, longitude: 24.95), radius: 40))
        #expect(command.waypointTimes.isEmpty)
    }

    @Test func aMalformedPlacedCommandIsNamedAndKeepsItsRequestWhenItHasOne() {
        #expect(refusal("not json")?.kind == .malformed)
        #expect(refusal("[1]")?.kind == .malformed)
        #expect(refusal(#"{"put": []}"#)?.reason == "no id (the request id)")
        #expect(refusal(#"{"id": "", "delete": ["own:a"]}"#)?.kind == .malformed)
        #expect(refusal(#"{"id": "r\u0001", "delete": ["own:a"]}"#)?.kind == .malformed)
        let long = String(repeating: "x", count: FleetCommand.maximumRequestLength + 1)
        #expect(refusal(#"{"id": "\#(long)", "delete": ["own:a"]}"#)?.kind == .malformed)
        let empty = refusal(#"{"id": "r2"}"#)
        #expect(empty?.kind == .malformed && empty?.request == "r2")
        #expect(refusal(#"{"id": "r3", "delete": ["own:a"], "drop": 1}"#)?.reason.contains("drop") == true)
        #expect(refusal(#"{"id": "r4", "delete": "own:a"}"#)?.kind == .malformed)
        let badID = refusal(#"{"id": "r5", "delete": ["osm:node/1"]}"#)
        #expect(badID?.kind == .invalidOwnPlace && badID?.request == "r5")
        #expect(refusal(#"{"id": "r6", "delete": ["own:a", "own:a"]}"#)?.kind == .malformed)
        let both = refusal(#"{"id": "r7", "put": [\#(Self.feature)], "delete": ["own:depot"]}"#)
        #expect(both?.reason == "own:depot is both put and deleted")
        let radius = refusal(#"{"id": "r8", "put": [\#(Self.feature.replacing("40", with: "0"))]}"#)
        #expect(radius?.kind == .invalidOwnPlace && radius?.reason.contains("radius") == true)
    }

    @Test func anOversizedCommandIsRefusedBeforeItIsRead() {
        let big = [UInt8](repeating: UInt8(ascii: " "), count: FleetCommand.maximumSize + 1)
        #expect(throws: FleetCommandError(.tooLarge, "more than the 16777216 bytes a command may have")) {
            try FleetCommand.parse(big, origin: .placed)
        }
    }

    static let setWaypoints = """
        {"_type": "cmd", "action": "setWaypoints", "waypoints": {"_type": "waypoints", "waypoints": [
          {"_type": "waypoint", "desc": "Depot", "lat": 60.17, "lon": 24.94, "rad": 50, "tst": 1437552714,
           "rid": "Dp0t"},
          {"_type": "waypoint", "desc": "Yard", "lat": "60.18", "lon": "24.95", "rad": "30", "tst": 1437552799}]}}
        """

    @Test func setWaypointsBecomesCirclesKeyedByRidElseTst() throws {
        let command = try parse(Self.setWaypoints, .ownTracks)
        #expect(command.origin == .ownTracks)
        #expect(command.put.map(\.id) == ["own:Dp0t", "own:1437552799"])
        #expect(command.put.map(\.name) == ["Depot", "Yard"])
        #expect(command.put[1].geometry == .circle(centre: Coordinate(latitude: 60.18, longitude: 24.95), radius: 30))
        #expect(command.waypointTimes == ["own:Dp0t": 1_437_552_714, "own:1437552799": 1_437_552_799])
        // No `_id`: the request is the message's digest, the same for the same bytes.
        #expect(command.request.hasPrefix("owntracks:") && command.request.count == 26)
        #expect(try parse(Self.setWaypoints, .ownTracks).request == command.request)
        let edited = Self.setWaypoints.replacing("\"rad\": 50", with: "\"rad\": 51")
        #expect(try parse(edited, .ownTracks).request != command.request)
        let withID = Self.setWaypoints.replacing("\"action\"", with: "\"_id\": \"ot-9\", \"action\"")
        #expect(try parse(withID, .ownTracks).request == "ot-9")
    }

    @Test func setWaypointsTakesTheListBareOrUnderPayload() throws {
        let point = #"{"desc": "A", "lat": 60.1, "lon": 24.9, "rad": 10, "tst": 5, "rid": "a"}"#
        let bare = try parse(#"{"_type": "cmd", "action": "setWaypoints", "waypoints": [\#(point)]}"#, .ownTracks)
        let payload = try parse(
            #"{"_type": "cmd", "action": "setWaypoints", "payload": {"waypoints": [\#(point)]}}"#, .ownTracks)
        #expect(bare.put == payload.put && bare.put.map(\.id) == ["own:a"])
    }

    @Test func aBeaconWaypointIsLeftOutNotRefused() throws {
        // As an iOS device's exported list has them: a beacon region without a position.
        let point = #"{"desc": "A", "lat": 60.1, "lon": 24.9, "rad": 10, "tst": 5, "rid": "a"}"#
        let beacon =
            #"{"desc": "Door", "uuid": "CA271EAE-5FA8-4E80-8F08-2A302A95A959", "major": 1, "minor": 2, "tst": 6}"#
        let command = try parse(
            #"{"_type": "cmd", "action": "setWaypoints", "waypoints": [\#(point), \#(beacon)]}"#, .ownTracks)
        #expect(command.put.map(\.id) == ["own:a"])
        // A waypoint without a position and no uuid is still a bad one.
        #expect(
            refusal(#"{"_type": "cmd", "action": "setWaypoints", "waypoints": [{"desc": "B", "tst": 7}]}"#, .ownTracks)?
                .kind == .invalidOwnPlace)
    }

    @Test func aBadWaypointNamesItsNumberAndNothingIsTaken() {
        func waypoints(_ list: String) -> String {
            #"{"_type": "cmd", "action": "setWaypoints", "waypoints": [\#(list)]}"#
        }
        let good = #"{"desc": "A", "lat": 60.1, "lon": 24.9, "rad": 10, "tst": 5}"#
        #expect(refusal(#"{"_type": "cmd", "action": "reportLocation"}"#, .ownTracks)?.kind == .unsupported)
        #expect(refusal(#"{"_type": "location", "action": "setWaypoints"}"#, .ownTracks)?.kind == .malformed)
        #expect(refusal(waypoints(""), .ownTracks)?.kind == .malformed)
        let noRadius = refusal(waypoints(good + #", {"desc": "B", "lat": 1, "lon": 2, "tst": 6}"#), .ownTracks)
        #expect(noRadius?.kind == .invalidOwnPlace && noRadius?.reason == "waypoint 1: no rad (metres)")
        let badRid = refusal(
            waypoints(#"{"desc": "A", "lat": 1, "lon": 2, "rad": 5, "tst": 6, "rid": "a/b"}"#), .ownTracks)
        #expect(badRid?.reason.hasPrefix("waypoint 0: rid must be") == true)
        #expect(refusal(waypoints(#"{"desc": "A", "lat": 1, "lon": 2, "rad": 5, "tst": 6.5}"#), .ownTracks) != nil)
        let far = refusal(waypoints(#"{"desc": "A", "lat": 1, "lon": 2, "rad": 20000, "tst": 6}"#), .ownTracks)
        #expect(far?.reason.hasPrefix("waypoint 0 (own:6): radius 20000") == true)
        let twice = refusal(waypoints(good + "," + good), .ownTracks)
        #expect(twice?.reason.contains("the same id as feature 0") == true)
        let unnamed = refusal(waypoints(#"{"desc": " ", "lat": 1, "lon": 2, "rad": 5, "tst": 6}"#), .ownTracks)
        #expect(unnamed?.kind == .invalidOwnPlace)
    }

    @Test func theResultSaysWhatBecameOfTheCommand() {
        let applied = FleetCommandResult(request: "r1", origin: .placed, outcome: .applied(put: 2, deleted: 1)).record
        #expect(applied["ok"] == true && applied["put"]?.int == 2 && applied["deleted"]?.int == 1)
        #expect(applied["duplicate"] == false && applied["request"] == "r1" && applied["source"] == "placed")
        let again = FleetCommandResult(request: "r1", origin: .ownTracks, outcome: .duplicate(put: 2, deleted: 0))
        #expect(again.record["duplicate"] == true && again.record["source"] == "owntracks")
        let refused = FleetCommandResult(
            request: nil, origin: .placed, outcome: .refused(FleetCommandError(.malformed, "not JSON"))
        ).record
        #expect(refused["ok"] == false && refused["error"] == "malformed" && refused["reason"] == "not JSON")
        #expect(refused["request"] == .null && refused["put"] == nil)
    }
}
