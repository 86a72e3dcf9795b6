import Foundation
import PlacedCore
import PlacedJSON
import PlacedTestSupport
import Testing

import PlacedSystem

@testable import PlacedVarlink

#if canImport(Glibc)
    import Glibc
#endif

// The server runs on an EventLoop driven from the test's own thread (`pump`), and clients are plain
// sockets read without blocking, so every test is single-threaded and deterministic.

private let testInterface = VarlinkInterface(
    description: """
        # A test interface.
        interface io.placed.Test

        method Echo(text: string, count: ?int) -> (text: string, count: int)
        method Watch() -> (n: int)
        method Slow() -> ()
        method Who() -> (uid: int, gid: int, groups: []int, pid: int)
        method Crash() -> ()
        method NotANumber() -> (x: float)
        method Unimplemented() -> ()

        error MessageTooLarge (limit: int)
        error InvalidMessage (reason: string)
        error InternalError ()
        """)!

private final class Harness {
    let directory: String
    let path: String
    let loop: EventLoop
    let server: VarlinkServer
    /// Calls the handler kept without answering (`Slow`), and every call seen.
    var held: [VarlinkCall] = []
    var seen: [String] = []
    var cancelled = 0

    init(
        maxQueuedBytes: Int = 256 * 1024, maxConnections: Int = 4096, maxConnectionsPerUser: Int = 1024,
        mode: mode_t = 0o660
    ) throws {
        directory = makeTemporaryDirectory("placed-varlink")
        path = directory + "/io.placed.Test"
        loop = try EventLoop()
        var configuration = VarlinkServer.Configuration(
            vendor: "placed", product: "placed test", version: "1", url: "https://placed.invalid",
            errorInterface: "io.placed.Test")
        configuration.maxQueuedBytes = maxQueuedBytes
        configuration.maxConnections = maxConnections
        configuration.maxConnectionsPerUser = maxConnectionsPerUser
        server = try VarlinkServer(loop: loop, path: path, mode: mode, configuration: configuration)
        server.register(testInterface) { [unowned self] call in try self.handle(call) }
    }

    deinit {
        server.close()
        rmdir(directory)
    }

    func handle(_ call: VarlinkCall) throws {
        seen.append(call.method)
        switch call.member {
        case "Echo":
            try call.rejectUnknownParameters(allowing: ["text", "count"])
            let text = try call.required("text", \.string)
            let count = try call.optional("count", \.int) ?? 1
            try call.reply(["text": .string(text), "count": .number(Double(count))])
        case "Watch":
            try call.requireMore()
            call.onCancel = { [weak self] in self?.cancelled += 1 }
            try call.reply(["n": 0], continues: true)
        case "Slow":
            call.onCancel = { [weak self] in self?.cancelled += 1 }
            held.append(call)
        case "Who":
            let c = call.credentials
            try call.reply([
                "uid": .number(Double(c.uid)), "gid": .number(Double(c.gid)),
                "groups": .array(c.groups.map { .number(Double($0)) }), "pid": .number(Double(c.pid ?? -1)),
            ])
        case "Crash":
            throw SystemError("something", errno: EIO)
        case "NotANumber":
            try call.reply(["x": .number(.nan)])
        default:
            throw VarlinkError.methodNotImplemented(call.method)
        }
    }

    @discardableResult
    func pump(seconds: Double = 10, until condition: () throws -> Bool) throws -> Bool {
        try loop.pump(seconds: seconds, until: condition)
    }

    /// Runs the loop for a while (to show that something does NOT happen).
    func idle(milliseconds: Int = 50) throws {
        let deadline = Date().addingTimeInterval(Double(milliseconds) / 1000)
        while Date() < deadline { try loop.runOnce(timeout: 5_000) }
    }

    func connect() throws -> Client { Client(fd: try UnixSocket.connect(path: path)) }

    /// Sends one call and pumps until its reply arrives.
    func call(_ client: Client, _ message: String) throws -> JSON {
        client.send(message)
        return try receive(client)
    }

    func receive(_ client: Client) throws -> JSON {
        try pump {
            client.poll()
            return !client.messages.isEmpty
        }
        return client.messages.isEmpty ? .null : client.messages.removeFirst()
    }
}

/// A blocking client socket, read without blocking.
private final class Client {
    let fd: Int32
    var buffer: [UInt8] = []
    var messages: [JSON] = []
    var isClosed = false

    /// Whether our end is still open: closed once, by `hangUp()` or at the end, never twice (a second
    /// close would close whatever descriptor another test running beside this one got that number for).
    private var isOpen = true

    init(fd: Int32) { self.fd = fd }
    deinit { hangUp() }

    /// Closes our end, as a client that leaves does.
    func hangUp() {
        guard isOpen else { return }
        isOpen = false
        close(fd)
    }

    func send(_ text: String) { send(Array(text.utf8) + [0]) }

    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if n <= 0 { return }
            offset += n
        }
    }

    /// Reads what has arrived; records EOF or a reset as `isClosed`.
    func poll() {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if n > 0 {
                buffer += chunk[..<n]
                continue
            }
            if n == 0 || (errno != EAGAIN && errno != EINTR) { isClosed = true }
            break
        }
        while let end = buffer.firstIndex(of: 0) {
            messages.append((try? JSON(parsing: buffer[..<end])) ?? .string("unparsable"))
            buffer.removeSubrange(...end)
        }
    }
}

private func errorName(_ reply: JSON) -> String? { reply["error"]?.string }

@Suite struct VarlinkServerTests {
    @Test func getInfoListsTheService() throws {
        let h = try Harness()
        let client = try h.connect()
        let reply = try h.call(client, #"{"method":"org.varlink.service.GetInfo"}"#)
        #expect(
            reply
                == [
                    "parameters": [
                        "vendor": "placed", "product": "placed test", "version": "1",
                        "url": "https://placed.invalid",
                        "interfaces": ["org.varlink.service", "io.placed.Test"],
                    ]
                ])
    }

    @Test func getInterfaceDescriptionReturnsTheRegisteredText() throws {
        let h = try Harness()
        let client = try h.connect()
        let own = try h.call(
            client,
            #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"io.placed.Test"}}"#
        )
        #expect(own["parameters"]?["description"]?.string == testInterface.description)
        let service = try h.call(
            client,
            #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"org.varlink.service"}}"#
        )
        #expect(service["parameters"]?["description"]?.string?.contains("method GetInfo()") == true)
        let unknown = try h.call(
            client,
            #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"x.y"}}"#)
        #expect(
            unknown == [
                "error": "org.varlink.service.InterfaceNotFound", "parameters": ["interface": "x.y"],
            ])
        let missing = try h.call(client, #"{"method":"org.varlink.service.GetInterfaceDescription"}"#)
        #expect(
            missing == [
                "error": "org.varlink.service.InvalidParameter", "parameters": ["parameter": "interface"],
            ])
    }

    @Test func interfaceDescriptionIsScannedForNameAndMethods() {
        #expect(testInterface.name == "io.placed.Test")
        #expect(
            testInterface.methods == [
                "Echo", "Watch", "Slow", "Who", "Crash", "NotANumber", "Unimplemented",
            ])
        #expect(VarlinkInterface(description: "# no name\nmethod X() -> ()") == nil)
        let text =
            "# naïve ± σ\ninterface a.b\n  method\tX(y: int) -> ()\nmethod Y ()\n# method Z()\n"
            + "interface c.d\nmethodical W()\nmethod\n\tmethod  Ü(x: string) -> ()"
        #expect(VarlinkInterface(description: text)?.name == "a.b", "the first interface line names it")
        #expect(VarlinkInterface(description: text)?.methods == ["X", "Y", "Ü"])
    }

    @Test func methodCallsGetTheirReplies() throws {
        let h = try Harness()
        let client = try h.connect()
        let reply = try h.call(
            client, #"{"method":"io.placed.Test.Echo","parameters":{"text":"héllo\n😀","count":3}}"#)
        #expect(reply == ["parameters": ["text": "héllo\n😀", "count": 3]])
        let defaulted = try h.call(
            client, #"{"method":"io.placed.Test.Echo","parameters":{"text":"a","count":null}}"#)
        #expect(defaulted["parameters"]?["count"] == 1)
        #expect(h.seen == ["io.placed.Test.Echo", "io.placed.Test.Echo"])
    }

    @Test func wrongParametersAreInvalidParameter() throws {
        let h = try Harness()
        let client = try h.connect()
        for (parameters, name) in [
            (#"{"text":5}"#, "text"), (#"{}"#, "text"), (#"{"text":"a","count":"3"}"#, "count"),
            (#"{"text":"a","count":1.5}"#, "count"), (#"{"text":"a","colour":"red"}"#, "colour"),
            (#"{"zz":1,"text":"a","colour":"red","m":0}"#, "colour"),  // the first unknown name in name order
        ] {
            let reply = try h.call(
                client, #"{"method":"io.placed.Test.Echo","parameters":"# + parameters + "}")
            #expect(
                reply == [
                    "error": "org.varlink.service.InvalidParameter",
                    "parameters": ["parameter": .string(name)],
                ])
        }
        // The connection is still usable after errors.
        #expect(
            try h.call(client, #"{"method":"io.placed.Test.Echo","parameters":{"text":"ok"}}"#)[
                "parameters"] != nil)
    }

    @Test func unknownNamesGetTheStandardErrors() throws {
        let h = try Harness()
        let client = try h.connect()
        #expect(
            try h.call(client, #"{"method":"io.placed.Test.Nope"}"#)
                == [
                    "error": "org.varlink.service.MethodNotFound",
                    "parameters": ["method": "io.placed.Test.Nope"],
                ])
        #expect(
            try h.call(client, #"{"method":"io.placed.Other.Echo"}"#)
                == [
                    "error": "org.varlink.service.InterfaceNotFound",
                    "parameters": ["interface": "io.placed.Other"],
                ])
        #expect(
            errorName(try h.call(client, #"{"method":"NoDot"}"#))
                == "org.varlink.service.InterfaceNotFound")
        #expect(
            errorName(try h.call(client, #"{"method":"org.varlink.service.Nope"}"#))
                == "org.varlink.service.MethodNotFound")
        #expect(
            try h.call(client, #"{"method":"io.placed.Test.Unimplemented"}"#)
                == [
                    "error": "org.varlink.service.MethodNotImplemented",
                    "parameters": ["method": "io.placed.Test.Unimplemented"],
                ])
        #expect(h.seen == ["io.placed.Test.Unimplemented"], "unknown names never reach the handler")
    }

    @Test func handlerFailuresBecomeNamedErrors() throws {
        let h = try Harness()
        let client = try h.connect()
        #expect(
            try h.call(client, #"{"method":"io.placed.Test.Crash"}"#) == [
                "error": "io.placed.Test.InternalError", "parameters": [:],
            ])
        #expect(
            errorName(try h.call(client, #"{"method":"io.placed.Test.NotANumber"}"#))
                == "io.placed.Test.InternalError")
        #expect(
            try h.call(client, #"{"method":"io.placed.Test.Echo","parameters":{"text":"still"}}"#)[
                "parameters"]?["text"] == "still")
    }

    @Test func moreStreamsCarryBroadcasts() throws {
        let h = try Harness()
        let watcher = try h.connect()
        let first = try h.call(watcher, #"{"method":"io.placed.Test.Watch","more":true}"#)
        #expect(first == ["continues": true, "parameters": ["n": 0]])
        #expect(h.server.openStreams(of: "io.placed.Test.Watch").count == 1)
        #expect(h.server.openStreams(of: "io.placed.Test.Echo").isEmpty)
        for n in 1...3 {
            #expect(
                try h.server.broadcast(["n": .number(Double(n))], toStreamsOf: "io.placed.Test.Watch") == 1)
        }
        for n in 1...3 {
            #expect(
                try h.receive(watcher) == ["continues": true, "parameters": ["n": .number(Double(n))]])
        }
        // A call may end its stream with a final reply.
        let stream = h.server.openStreams(of: "io.placed.Test.Watch")[0]
        try stream.reply(["n": 4])
        #expect(try h.receive(watcher) == ["parameters": ["n": 4]])
        #expect(h.server.openStreams(of: "io.placed.Test.Watch").isEmpty)
        #expect(try h.server.broadcast(["n": 5], toStreamsOf: "io.placed.Test.Watch") == 0)
        #expect(try stream.reply(["n": 6]) == false, "a finished call sends nothing")
        // The connection serves the next call.
        #expect(
            try h.call(watcher, #"{"method":"io.placed.Test.Echo","parameters":{"text":"x"}}"#)[
                "parameters"] != nil)
    }

    @Test func streamEndsWhenTheWatcherLeaves() throws {
        let h = try Harness()
        var watcher: Client? = try h.connect()
        _ = try h.call(watcher!, #"{"method":"io.placed.Test.Watch","more":true}"#)
        #expect(h.server.openStreams(of: "io.placed.Test.Watch").count == 1)
        watcher = nil
        #expect(try h.pump { h.server.connectionCount == 0 })
        #expect(h.cancelled == 1)
        #expect(h.server.openStreams(of: "io.placed.Test.Watch").isEmpty)
    }

    @Test func watchWithoutMoreIsExpectedMore() throws {
        let h = try Harness()
        let client = try h.connect()
        #expect(
            try h.call(client, #"{"method":"io.placed.Test.Watch"}"#) == [
                "error": "org.varlink.service.ExpectedMore", "parameters": [:],
            ])
    }

    @Test func pipelinedCallsAreAnsweredInOrder() throws {
        let h = try Harness()
        let client = try h.connect()
        client.send(
            Array(#"{"method":"io.placed.Test.Echo","parameters":{"text":"1"}}"#.utf8) + [0]
                + Array(#"{"method":"io.placed.Test.Slow"}"#.utf8) + [0]
                + Array(#"{"method":"io.placed.Test.Echo","parameters":{"text":"2"}}"#.utf8) + [0])
        #expect(try h.receive(client)["parameters"]?["text"] == "1")
        // The held call blocks the connection's next call, as the protocol orders replies.
        try h.idle()
        client.poll()
        #expect(client.messages.isEmpty)
        #expect(h.seen == ["io.placed.Test.Echo", "io.placed.Test.Slow"])
        try h.held[0].reply()
        #expect(try h.receive(client) == ["parameters": [:]])
        #expect(try h.receive(client)["parameters"]?["text"] == "2")
    }

    @Test func onewayCallsRunWithoutReply() throws {
        let h = try Harness()
        let client = try h.connect()
        client.send(#"{"method":"io.placed.Test.Echo","parameters":{"text":"quiet"},"oneway":true}"#)
        let reply = try h.call(
            client, #"{"method":"io.placed.Test.Echo","parameters":{"text":"loud"}}"#)
        #expect(reply["parameters"]?["text"] == "loud")
        #expect(h.seen.count == 2)
    }

    @Test func halfClosedClientStillGetsItsReply() throws {
        let h = try Harness()
        let client = try h.connect()
        client.send(#"{"method":"io.placed.Test.Echo","parameters":{"text":"bye"}}"#)
        shutdown(client.fd, Int32(SHUT_WR))
        #expect(try h.receive(client)["parameters"]?["text"] == "bye")
        #expect(
            try h.pump {
                client.poll()
                return client.isClosed
            })
        #expect(h.server.connectionCount == 0)
    }

    @Test func messagesUpToTheLimitAreAccepted() throws {
        let h = try Harness()
        let client = try h.connect()
        let frame = #"{"method":"io.placed.Test.Echo","parameters":{"text":""}}"#
        let text = String(repeating: "x", count: 64 * 1024 - frame.utf8.count)
        let message = #"{"method":"io.placed.Test.Echo","parameters":{"text":""# + text + #""}}"#
        #expect(message.utf8.count == 65536)
        #expect(try h.call(client, message)["parameters"]?["text"]?.string?.count == text.count)
    }

    @Test func oversizedMessageGetsAnErrorThenDisconnect() throws {
        let h = try Harness()
        let bystander = try h.connect()
        for terminated in [true, false] {
            let client = try h.connect()
            let text = String(repeating: "y", count: 65536)
            let message = Array(
                (#"{"method":"io.placed.Test.Echo","parameters":{"text":""# + text + #""}}"#).utf8)
            client.send(terminated ? message + [0] : message)
            #expect(
                try h.receive(client) == [
                    "error": "io.placed.Test.MessageTooLarge", "parameters": ["limit": 65536],
                ])
            #expect(
                try h.pump {
                    client.poll()
                    return client.isClosed
                })
        }
        #expect(h.seen.isEmpty)
        #expect(
            try h.call(bystander, #"{"method":"io.placed.Test.Echo","parameters":{"text":"fine"}}"#)[
                "parameters"] != nil)
        #expect(h.server.connectionCount == 1)
    }

    @Test func aFlagThatIsNotABooleanIsNamed() throws {
        let h = try Harness()
        for (flags, named) in [
            (#""more":"yes""#, "more"), (#""oneway":1"#, "oneway"), (#""upgrade":[]"#, "upgrade"),
            (#""more":true,"oneway":0"#, "oneway"), (#""oneway":false,"upgrade":"no""#, "upgrade"),
        ] {
            let client = try h.connect()
            let reply = try h.call(client, #"{"method":"io.placed.Test.Echo","# + flags + "}")
            #expect(errorName(reply) == "io.placed.Test.InvalidMessage", "\(flags)")
            #expect(reply["parameters"]?["reason"]?.string == "\(named) must be a boolean", "\(flags)")
        }
        #expect(h.seen.isEmpty)
        // null and absent flags are false.
        let client = try h.connect()
        let reply = try h.call(
            client, #"{"method":"io.placed.Test.Echo","parameters":{"text":"a"},"more":null,"upgrade":false}"#)
        #expect(reply["parameters"]?["text"] != nil)
    }

    @Test func malformedMessagesGetAnErrorThenDisconnect() throws {
        let h = try Harness()
        let bystander = try h.connect()
        for bad in [
            #"{"method":"io.placed.Test.Echo""#, "not json", "[1,2]", #"{"parameters":{}}"#,
            #"{"method":5}"#,
            #"{"method":"io.placed.Test.Echo","parameters":[1]}"#,
            #"{"method":"io.placed.Test.Echo","more":"yes"}"#, "",
            "{\"method\":\"io.placed.Test.Echo\",\"parameters\":{\"text\":\"\u{1}\"}}",
        ] {
            let client = try h.connect()
            let reply = try h.call(client, bad)
            #expect(errorName(reply) == "io.placed.Test.InvalidMessage", "\(bad)")
            #expect(reply["parameters"]?["reason"]?.string != nil)
            #expect(
                try h.pump {
                    client.poll()
                    return client.isClosed
                }, "\(bad)")
        }
        let invalidUTF8 = try h.connect()
        invalidUTF8.send(
            Array(#"{"method":"io.placed.Test.Echo","parameters":{"text":""#.utf8) + [
                0xFF, 0x22, 0x7D, 0x7D, 0,
            ])
        #expect(errorName(try h.receive(invalidUTF8)) == "io.placed.Test.InvalidMessage")
        #expect(h.seen.isEmpty)
        #expect(
            try h.call(bystander, #"{"method":"io.placed.Test.Echo","parameters":{"text":"fine"}}"#)[
                "parameters"] != nil)
    }

    @Test func clientThatStopsReadingIsDroppedOthersAreNot() throws {
        let h = try Harness(maxQueuedBytes: 64 * 1024)
        let sluggard = try h.connect()
        let reader = try h.connect()
        sluggard.send(#"{"method":"io.placed.Test.Watch","more":true}"#)
        reader.send(#"{"method":"io.placed.Test.Watch","more":true}"#)
        #expect(try h.pump { h.server.openStreams(of: "io.placed.Test.Watch").count == 2 })
        let payload: [String: JSON] = [
            "n": 1, "padding": .string(String(repeating: "p", count: 16 * 1024)),
        ]
        var broadcasts = 0
        // The sluggard's socket buffer fills, then its queue; it is dropped within a bounded number
        // of broadcasts while the reader, who keeps reading, receives every one.
        while h.server.connectionCount == 2, broadcasts < 1000 {
            try h.server.broadcast(payload, toStreamsOf: "io.placed.Test.Watch")
            broadcasts += 1
            try h.pump {
                reader.poll()
                return reader.messages.count == broadcasts + 1
            }
        }
        #expect(h.server.connectionCount == 1)
        #expect(broadcasts < 1000)
        #expect(h.cancelled == 1)
        #expect(reader.messages.count == broadcasts + 1)
        #expect(
            reader.messages.dropFirst().allSatisfy {
                $0["continues"] == true && $0["parameters"]?["n"] == 1
            })
        // The sluggard finds whole messages, then the end of the stream: never a torn message.
        #expect(
            try h.pump {
                sluggard.poll()
                return sluggard.isClosed
            })
        #expect(sluggard.messages.count < broadcasts + 1)
        #expect(!sluggard.messages.contains(.string("unparsable")))
        let newcomer = try h.connect()
        #expect(
            try h.call(newcomer, #"{"method":"io.placed.Test.Echo","parameters":{"text":"hi"}}"#)[
                "parameters"]?["text"] == "hi")
    }

    /// A stream's first reply, sent inside its handler, may overflow the queue: the client is dropped at
    /// once, and the call, still open when the handler returns, is cancelled.
    @Test func aStreamDroppedByItsOwnFirstReplyIsCancelled() throws {
        let h = try Harness(maxQueuedBytes: 64 * 1024)
        var delivered: Bool?
        var cancelled = 0
        let big = VarlinkInterface(description: "interface io.placed.Big\nmethod Watch() -> (text: string)")!
        h.server.register(big) { call in
            call.onCancel = { cancelled += 1 }
            delivered = try call.reply(["text": .string(String(repeating: "b", count: 4 << 20))], continues: true)
        }
        let client = try h.connect()
        client.send(#"{"method":"io.placed.Big.Watch","more":true}"#)
        #expect(try h.pump { cancelled > 0 })
        #expect(delivered == false)
        #expect(cancelled == 1)
        #expect(h.server.connectionCount == 0)
        #expect(h.server.openStreams(of: "io.placed.Big.Watch").isEmpty)
    }

    @Test func thousandConcurrentClientsAreAllAnswered() throws {
        let h = try Harness()
        let clients = try (0..<1000).map { _ in try h.connect() }
        for (index, client) in clients.enumerated() {
            client.send(#"{"method":"io.placed.Test.Echo","parameters":{"text":"\#(index)"}}"#)
        }
        #expect(
            try h.pump(seconds: 30) {
                clients.allSatisfy { client in
                    if client.messages.isEmpty { client.poll() }
                    return !client.messages.isEmpty
                }
            })
        #expect(h.server.connectionCount == 1000)
        for (index, client) in clients.enumerated() {
            #expect(client.messages.first?["parameters"]?["text"]?.string == String(index))
        }
    }

    @Test func peerCredentialsComeFromTheKernel() throws {
        let h = try Harness()
        let client = try h.connect()
        let reply = try h.call(client, #"{"method":"io.placed.Test.Who"}"#)
        let parameters = try #require(reply["parameters"])
        #expect(parameters["uid"]?.int == Int(getuid()))
        #expect(parameters["gid"]?.int == Int(getgid()))
        #expect(parameters["pid"]?.int == Int(getpid()))
        var groups = [gid_t](repeating: 0, count: 256)
        let count = getgroups(Int32(groups.count), &groups)
        #expect(
            Set(parameters["groups"]?.array?.compactMap(\.int) ?? [-1])
                == Set(groups.prefix(Int(count)).map(Int.init)))
    }

    @Test func manyPipelinedCallsAreAllAnsweredInOrder() throws {
        let h = try Harness()
        let client = try h.connect()
        var batch: [UInt8] = []
        for index in 0..<3000 {
            batch += Array(#"{"method":"io.placed.Test.Echo","parameters":{"text":"\#(index)"}}"#.utf8) + [0]
        }
        #expect(batch.count > 150_000, "several reads' worth, so messages straddle read boundaries")
        client.send(batch)
        #expect(
            try h.pump {
                client.poll(); return client.messages.count == 3000
            })
        #expect(client.messages.map { $0["parameters"]?["text"]?.string } == (0..<3000).map { String($0) })
    }

    /// Beyond the server's limit, or beyond one user's share of it though the server has room (the
    /// tests' clients are all one user), a connection is closed; one that leaves makes room.
    @Test(arguments: [(total: 2, perUser: 1024), (total: 10, perUser: 2)])
    func connectionsBeyondTheLimitsAreClosed(limits: (total: Int, perUser: Int)) throws {
        let h = try Harness(maxConnections: limits.total, maxConnectionsPerUser: limits.perUser)
        let first = try h.connect()
        let second = try h.connect()
        #expect(try h.pump { h.server.connectionCount == 2 })
        let third = try h.connect()
        #expect(
            try h.pump {
                third.poll(); return third.isClosed
            })
        #expect(h.server.connectionCount == 2)
        first.hangUp()
        #expect(try h.pump { h.server.connectionCount == 1 })
        let fourth = try h.connect()
        #expect(try h.pump { h.server.connectionCount == 2 })
        for client in [second, fourth] {
            #expect(
                try h.call(client, #"{"method":"io.placed.Test.Echo","parameters":{"text":"in"}}"#)["parameters"] != nil
            )
        }
    }

    @Test func releasingTheServerEndsEverything() throws {
        let loop = try EventLoop()
        let directory = makeTemporaryDirectory("placed-varlink")
        defer { rmdir(directory) }
        var server: VarlinkServer? = try VarlinkServer(
            loop: loop, path: directory + "/s",
            configuration: .init(vendor: "v", product: "p", version: "1", url: "u", errorInterface: "io.placed.Test"))
        var cancelled = false
        server!.register(testInterface) { call in
            call.onCancel = { cancelled = true }
            try call.reply(["n": 0], continues: true)
        }
        let client = Client(fd: try UnixSocket.connect(path: directory + "/s"))
        client.send(#"{"method":"io.placed.Test.Watch","more":true}"#)
        while client.messages.isEmpty {
            try loop.runOnce(timeout: 5_000)
            client.poll()
        }
        server = nil
        #expect(cancelled)
        #expect(access(directory + "/s", F_OK) == -1)
        client.poll()
        #expect(client.isClosed)
    }

    @Test func closingTheServerDisconnectsClientsAndRemovesTheSocket() throws {
        let h = try Harness()
        let client = try h.connect()
        _ = try h.call(client, #"{"method":"io.placed.Test.Watch","more":true}"#)
        h.server.close()
        #expect(h.cancelled == 1)
        #expect(access(h.path, F_OK) == -1)
        #expect(
            try h.pump {
                client.poll()
                return client.isClosed
            })
    }
}

@Suite struct UnixSocketTests {
    @Test func socketGetsTheRequestedMode() throws {
        let directory = makeTemporaryDirectory("placed-socket")
        defer { rmdir(directory) }
        for mode: mode_t in [0o660, 0o600, 0o666] {
            let path = directory + "/s"
            let fd = try UnixSocket.listen(path: path, mode: mode)
            var status = stat()
            #expect(lstat(path, &status) == 0)
            #expect(status.st_mode & 0o777 == mode)
            #expect(status.st_mode & S_IFMT == S_IFSOCK)
            close(fd)
            unlink(path)
        }
    }

    @Test func aBoundFileIsRemovedOnlyWhileItIsStillOurs() throws {
        let directory = makeTemporaryDirectory("placed-socket")
        defer { rmdir(directory) }
        let path = directory + "/s"
        let ours = try UnixSocket.listen(path: path)
        let bound = try #require(UnixSocket.BoundFile(path: path))
        unlink(path)  // as systemd does before binding placed.socket at the same path
        let theirs = try UnixSocket.listen(path: path)
        bound.remove()
        #expect(access(path, F_OK) == 0, "another listener's file stays")
        close(ours)
        try #require(UnixSocket.BoundFile(path: path)).remove()
        #expect(access(path, F_OK) != 0, "our own file goes")
        close(theirs)
        #expect(UnixSocket.BoundFile(path: directory) == nil, "a directory is no socket file")
    }

    /// What socket activation checks of a passed descriptor before serving on it.
    @Test func onlyAListeningUnixStreamSocketPasses() throws {
        let directory = makeTemporaryDirectory("placed-socket")
        defer { rmdir(directory) }
        let path = directory + "/s"
        let listener = try UnixSocket.listen(path: path)
        defer {
            close(listener)
            unlink(path)
        }
        #expect(UnixSocket.isListeningStream(listener))
        #expect(UnixSocket.boundPath(of: listener) == path)

        let client = try UnixSocket.connect(path: path)
        defer { close(client) }
        #expect(!UnixSocket.isListeningStream(client), "connected, not listening")
        #expect(UnixSocket.boundPath(of: client) == nil, "a client socket is bound to no path")

        let datagram = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(datagram) }
        #expect(!UnixSocket.isListeningStream(datagram))
        var pipeEnds: [Int32] = [0, 0]
        #expect(pipe(&pipeEnds) == 0)
        #expect(!UnixSocket.isListeningStream(pipeEnds[0]), "not a socket")
        close(pipeEnds[0])
        close(pipeEnds[1])
    }

    @Test func staleSocketIsReplacedLiveOneAndOtherFilesAreNot() throws {
        let directory = makeTemporaryDirectory("placed-socket")
        defer { rmdir(directory) }
        let path = directory + "/s"
        let first = try UnixSocket.listen(path: path)
        #expect(throws: SystemError("\(path): in use", errno: EADDRINUSE)) {
            try UnixSocket.listen(path: path)
        }
        close(first)  // the file stays: a crashed daemon leaves exactly this
        let second = try UnixSocket.listen(path: path)
        let client = try UnixSocket.connect(path: path)
        close(client)
        close(second)
        unlink(path)

        let file = open(path, O_CREAT | O_WRONLY, 0o644)
        close(file)
        #expect(throws: SystemError("\(path): not a socket", errno: EEXIST)) {
            try UnixSocket.listen(path: path)
        }
        #expect(access(path, F_OK) == 0, "a regular file is never deleted")
        unlink(path)
        #expect(throws: SystemError.self) {
            try UnixSocket.listen(path: directory + "/" + String(repeating: "n", count: 120))
        }
    }

    @Test func openFileLimitIsRaisedToTheHardLimit() throws {
        let soft = try ProcessLimits.raiseOpenFileLimit()
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        #expect(soft == UInt64(limit.rlim_cur))
        #expect(limit.rlim_cur == limit.rlim_max)
    }
}

@Suite struct CredentialsTests {
    @Test func privilegeRuleIsRootOrGroupMember() {
        let root = Credentials(uid: 0, gid: 0)
        let member = Credentials(uid: 1000, gid: 1000, groups: [27, 990])
        let primary = Credentials(uid: 1001, gid: 990)
        let stranger = Credentials(uid: 1002, gid: 1002, groups: [100])
        #expect(root.isRootOrMember(of: 990))
        #expect(root.isRootOrMember(of: nil))
        #expect(member.isRootOrMember(of: 990))
        #expect(primary.isRootOrMember(of: 990))
        #expect(!stranger.isRootOrMember(of: 990))
        #expect(!member.isRootOrMember(of: nil))
        #expect(stranger.description == "uid=1002 gid=1002 groups=100")
    }

    @Test func userDatabaseLookups() {
        #expect(UserDatabase.groupID(named: "root") == 0)
        #expect(UserDatabase.groupID(named: "no-such-group-placed") == nil)
        #expect(UserDatabase.userName(of: 0) == "root")
        #expect(UserDatabase.groups(ofUser: 0, primaryGroup: 0)?.contains(0) == true)
        #expect(UserDatabase.groups(ofUser: 4_000_000_000, primaryGroup: 0) == nil)
    }

    @Test func socketPairPeerIsThisProcess() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let peer = try Credentials(peerOf: fds[0])
        #expect(peer.uid == getuid())
        #expect(peer.gid == getgid())
        #expect(peer.pid == getpid())
    }
}

/// A Python with the PyPI `varlink` package: the venv scripts/test builds, else python3 on PATH.
private let pythonWithVarlink: String? = {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    for candidate in [root.path + "/.build/venv/bin/python", "/usr/bin/env"] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: candidate)
        process.arguments = (candidate.hasSuffix("env") ? ["python3"] : []) + ["-c", "import varlink"]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { continue }
        process.waitUntilExit()
        if process.terminationStatus == 0 { return candidate.hasSuffix("env") ? "python3" : candidate }
    }
    return nil
}()

@Suite struct VarlinkRealClientTests {
    /// The PyPI varlink client: introspection, a call, a `more` stream and error mapping.
    @Test(.enabled(if: pythonWithVarlink != nil, "needs Python with the varlink package"))
    func pythonVarlinkClientTalksToTheServer() throws {
        let h = try Harness()
        let script = """
            import json, sys, varlink
            out = {}
            with varlink.Client("unix:" + sys.argv[1]) as client:
                out["interfaces"] = client.get_interfaces()
                with client.open("io.placed.Test") as c:
                    out["echo"] = c.Echo("grüße 😀", 2)
                    out["watch"] = [m["n"] for m in c.Watch(_more=True)]
                with client.open("io.placed.Test") as c:
                    try:
                        c.Unimplemented()
                    except varlink.VarlinkError as e:
                        out["error"] = [e.error(), e.parameters()]
            print(json.dumps(out))
            """
        let python = pythonWithVarlink!
        let command = python.hasPrefix("/") ? [python] : ["/usr/bin/env", python]
        var step = 0
        let result = try run(command + ["-c", script, h.path], pumping: h.loop) {
            // Feed the stream once the client watches: two broadcasts, then the final reply.
            guard step < 3, let stream = h.server.openStreams(of: "io.placed.Test.Watch").first else {
                return
            }
            step += 1
            if step < 3 {
                try h.server.broadcast(["n": .number(Double(step))], toStreamsOf: "io.placed.Test.Watch")
            } else {
                try stream.reply(["n": 3])
            }
        }
        #expect(result.status == 0, "\(result.errors)")
        let parsed = try JSON(parsing: result.output)
        #expect(parsed["interfaces"] == ["org.varlink.service", "io.placed.Test"])
        #expect(parsed["echo"] == ["text": "grüße 😀", "count": 2])
        #expect(parsed["watch"] == [0, 1, 2, 3])
        #expect(
            parsed["error"]
                == ["org.varlink.service.MethodNotImplemented", ["method": "io.placed.Test.Unimplemented"]])
    }

    /// Mode 0660 keeps other users out; a member of the socket's group gets in, and the server sees
    /// its uid and supplementary groups (SO_PEERGROUPS) as the kernel has them.
    @Test(
        .enabled(if: getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0, "needs root and setpriv"))
    func socketModeAndPeerGroupsForAnotherUser() throws {
        let h = try Harness()
        chmod(h.directory, 0o755)
        #expect(chown(h.path, 0, 4242) == 0)
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(sys.argv[1])
            except PermissionError:
                print("denied"); sys.exit(3)
            s.sendall(b'{"method":"io.placed.Test.Who"}\\0')
            data = b""
            while not data.endswith(b"\\0"):
                data += s.recv(4096)
            print(data[:-1].decode())
            """
        let nobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534"]
        let outsider = try run(
            nobody + ["--clear-groups", "/usr/bin/python3", "-c", script, h.path], pumping: h.loop)
        #expect(outsider.status == 3)
        #expect(outsider.output == "denied\n")
        let member = try run(
            nobody + ["--groups=4242,4343", "/usr/bin/python3", "-c", script, h.path], pumping: h.loop)
        #expect(member.status == 0, "\(member.errors)")
        let who = try JSON(parsing: member.output)["parameters"]
        #expect(who?["uid"] == 65534)
        #expect(who?["gid"] == 65534)
        #expect(who?["groups"] == [4242, 4343])
    }
}
