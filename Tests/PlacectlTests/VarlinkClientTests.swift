import Foundation
import PlacectlKit
import PlacedCore
import PlacedJSON
import PlacedSystem
import PlacedVarlink
import Testing

@Suite struct ClientErrorTests {
    @Test func daemonErrorsReadAsSentencesWithTheirName() {
        let unknown = ClientError.daemon(
            name: "io.placed.Places.UnknownPlace", parameters: ["id": "osm:node/1"], message: nil)
        #expect(unknown.description == "no place has the id 'osm:node/1' (io.placed.Places.UnknownPlace)")
        let limit = ClientError.daemon(
            name: "io.placed.Places.InvalidLimit", parameters: ["limit": 50, "maximum": 20], message: nil)
        #expect(limit.description == "invalid limit 50: ask for 1 to 20 (io.placed.Places.InvalidLimit)")
        let parameter = ClientError.daemon(
            name: "org.varlink.service.InvalidParameter", parameters: ["parameter": "limit"], message: nil)
        #expect(parameter.description == "placed rejected the parameter 'limit' (org.varlink.service.InvalidParameter)")
        let bus = ClientError.daemon(
            name: "io.placed.Placed1.Error.UnknownPlace", parameters: [:], message: "no place has the id 'x'")
        #expect(bus.description == "no place has the id 'x' (io.placed.Placed1.Error.UnknownPlace)")
        #expect(bus.name == "io.placed.Placed1.Error.UnknownPlace")
    }

    @Test func unreachableSocketGivesAHint() {
        #expect(
            throws: ClientError.unreachable(
                endpoint: "socket /nonexistent/s", reason: "No such file or directory", hint: "is placed running?")
        ) {
            _ = try VarlinkClient(socketPath: "/nonexistent/s")
        }
        let error = ClientError.unreachable(
            endpoint: "socket /s", reason: "No such file or directory", hint: "is placed running?")
        #expect(error.description == "is placed running? socket /s: No such file or directory")
    }
}

/// A varlink peer on a real socket that answers each call from a script, on its own thread.
private final class ScriptedServer: @unchecked Sendable {
    let path: String
    private let listener: Int32
    private let lock = NSLock()
    private var calls: [JSON] = []

    /// `answers[i]` is written after the i-th call, chunk by chunk, 20 ms apart; nil closes the
    /// connection instead.
    init(answers: [[[UInt8]]?]) throws {
        path = NSTemporaryDirectory() + "placectl-test-\(UUID().uuidString).sock"
        listener = try UnixSocket.listen(path: path)
        Thread { [self] in serve(answers) }.start()
    }

    deinit {
        close(listener)
        unlink(path)
    }

    var receivedCalls: [JSON] {
        lock.withLock { calls }
    }

    private func serve(_ answers: [[[UInt8]]?]) {
        var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, 5000) == 1 else { return }
        let client = accept(listener, nil, nil)
        guard client >= 0 else { return }
        defer { close(client) }
        var framer = VarlinkWire.Framer()
        var buffer = [UInt8](repeating: 0, count: 4096)
        for answer in answers {
            var call: JSON?
            while call == nil {
                let n = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
                if n <= 0 { return }
                framer.append(buffer[..<n])
                call = try? framer.next()
            }
            lock.withLock { calls.append(call!) }
            guard let answer else { return }
            for (index, chunk) in answer.enumerated() {
                if index > 0 { usleep(20_000) }
                _ = chunk.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            }
        }
        // Hold the connection open until the client goes.
        _ = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
    }

    static func frame(_ json: JSON) -> [UInt8] { (try! json.encoded()) + [0] }
}

@Suite struct VarlinkClientTests {
    @Test func callsSendParametersAndReturnTheReply() throws {
        let server = try ScriptedServer(answers: [
            [ScriptedServer.frame(["parameters": ["generation": 4, "stale": false, "places": []]])]
        ])
        let client = try VarlinkClient(socketPath: server.path)
        let reply = try client.current(limit: 3)
        #expect(reply["generation"] == 4)
        #expect(server.receivedCalls == [["method": "io.placed.Places.Current", "parameters": ["limit": 3]]])
    }

    @Test func absentOptionalsAreLeftOut() throws {
        let server = try ScriptedServer(answers: [[ScriptedServer.frame(["parameters": ["places": []]])]])
        let client = try VarlinkClient(socketPath: server.path)
        _ = try client.rank(latitude: 60.1, longitude: -24.9, accuracy: nil, limit: nil)
        #expect(server.receivedCalls.first?["parameters"] == ["latitude": 60.1, "longitude": -24.9])
    }

    @Test func theReadersLanguageGoesWithTheCallsThatNamePlaces() throws {
        let server = try ScriptedServer(answers: [
            [ScriptedServer.frame(["parameters": ["generation": 1, "stale": false, "places": []]])],
            [ScriptedServer.frame(["parameters": ["places": []]])],
            [ScriptedServer.frame(["parameters": ["markers": []]])],
        ])
        let client = try Endpoint.socket(path: server.path).connect(language: "sv_FI.UTF-8")
        #expect(client.language == "sv_FI.UTF-8")
        _ = try client.current(limit: nil)
        _ = try client.rank(latitude: 60.1, longitude: 24.9, accuracy: nil, limit: 2)
        _ = try client.history(limit: nil, before: nil)  // names nothing: no language
        #expect(
            server.receivedCalls.map { $0["parameters"] } == [
                ["language": "sv_FI.UTF-8"],
                ["latitude": 60.1, "longitude": 24.9, "limit": 2, "language": "sv_FI.UTF-8"],
                [:],
            ])
    }

    @Test func errorRepliesThrowTheirName() throws {
        let server = try ScriptedServer(answers: [
            [ScriptedServer.frame(["error": "io.placed.Places.UnknownPlace", "parameters": ["id": "nope"]])]
        ])
        let client = try VarlinkClient(socketPath: server.path)
        #expect(
            throws: ClientError.daemon(name: "io.placed.Places.UnknownPlace", parameters: ["id": "nope"], message: nil)
        ) {
            try client.select(id: "nope")
        }
    }

    @Test func aReplySplitAcrossWritesIsJoined() throws {
        let whole = ScriptedServer.frame(["parameters": ["markers": []]])
        let server = try ScriptedServer(answers: [[Array(whole[..<5]), Array(whole[5...])]])
        let client = try VarlinkClient(socketPath: server.path)
        #expect(try client.history(limit: 2, before: 9) == ["markers": []])
        #expect(server.receivedCalls.first?["parameters"] == ["limit": 2, "before": 9])
    }

    @Test func aClosedConnectionIsNamed() throws {
        let server = try ScriptedServer(answers: [nil])
        let client = try VarlinkClient(socketPath: server.path)
        #expect(throws: ClientError.disconnected(endpoint: "socket \(server.path)")) { try client.status() }
    }

    @Test func silenceTimesOut() throws {
        // The server reads the call and never answers.
        let server = try ScriptedServer(answers: [[[]]])
        let client = try VarlinkClient(socketPath: server.path, timeout: 0.2)
        #expect(throws: ClientError.timedOut(endpoint: "socket \(server.path)", seconds: 0.2)) { try client.status() }
    }

    @Test func watchDeliversEachReplyUntilTheStreamEnds() throws {
        let server = try ScriptedServer(answers: [
            [
                ScriptedServer.frame(["parameters": ["generation": 1, "places": []], "continues": true])
                    + ScriptedServer.frame([
                        "parameters": ["generation": 1, "marker": ["place": [:]]], "continues": true,
                    ]),
                ScriptedServer.frame(["error": "io.placed.Places.MessageTooLarge", "parameters": ["limit": 1]]),
            ]
        ])
        let client = try VarlinkClient(socketPath: server.path)
        var updates: [[String: JSON]] = []
        #expect(
            throws: ClientError.daemon(name: "io.placed.Places.MessageTooLarge", parameters: ["limit": 1], message: nil)
        ) {
            try client.watch { updates.append($0) }
        }
        #expect(updates.count == 2)
        #expect(updates.last?["marker"] != nil)
        #expect(server.receivedCalls == [["method": "io.placed.Places.Watch", "more": true, "parameters": [:]]])
    }
}
