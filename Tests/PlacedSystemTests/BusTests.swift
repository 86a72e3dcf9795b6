import Foundation
import PlacedTestSupport
import Testing

@testable import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

// Each test starts its own dbus-daemon on a private socket, so nothing depends on a system or
// session bus. The EventLoop is driven from the test thread while busctl/gdbus run as processes.

/// A dbus-daemon of our own: session-type, one socket, a policy open to every user.
private final class PrivateBus {
    let directory: String
    let address: String
    private let process = Process()

    init() throws {
        directory = makeTemporaryDirectory("placed-bus")
        chmod(directory, 0o755)
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(directory)/bus</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
              </policy>
            </busconfig>
            """
        try config.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(directory)/bus.conf", "--nofork", "--print-address"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // The address is printed once the socket listens.
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed += chunk
        }
        address = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Ends the daemon, as a crash or restart of the system bus would.
    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        // SIGKILL: the test runner's threads block SIGTERM, and children inherit that mask.
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

private final class BusHarness {
    let dbus: PrivateBus
    let loop: EventLoop
    let bus: Bus
    let object: BusObject
    var count: UInt32 = 7

    static let name = "io.placed.Test1"
    static let path = "/io/placed/Test1"
    /// A value of every kind, for a signal declared with their signatures.
    static let everything: [BusValue] = [
        .bool(false), .int32(.min), .uint32(.max), .int64(.min), .uint64(.max), .double(-0.5), .string(""),
        .string("ü\u{1}"), .objectPath("/"), .strings([]), .strings(["x", "yy"]), .dictionary([:]),
        .dictionary([
            "nested": .dictionary(["deeper": .dictionaries([["k": .bool(true)]])]), "list": .strings(["1"]),
        ]),
        .dictionaries([]),
    ]

    init() throws {
        dbus = try PrivateBus()
        loop = try EventLoop()
        bus = try Bus(.custom(dbus.address))
        try bus.attach(to: loop)
        try bus.requestName(BusHarness.name)
        object = BusObject(path: BusHarness.path, interface: BusHarness.name)
        object.addMethod("Echo", arguments: "s", returns: "a{sv}") { call in
            let text = try call.arguments()[0].string!
            return [
                .dictionary([
                    "text": .string(text), "length": .uint32(UInt32(text.count)), "ratio": .double(0.25),
                    "ok": .bool(true), "big": .uint64(1 << 40), "negative": .int64(-5), "small": .int32(-7),
                    "tags": .strings(["a", "b"]), "path": .objectPath("/x/y"),
                ])
            ]
        }
        object.addMethod(
            "List", arguments: [BusArgument("limit", "u")],
            returns: [BusArgument("generation", "t"), BusArgument("items", "aa{sv}")]
        ) { call in
            let limit = Int(try call.arguments()[0].uint32!)
            let items = (0..<limit).map { index -> [String: BusValue] in
                ["id": .string("osm:node/\(index)"), "likelihood": .double(1 / Double(index + 2))]
            }
            return [.uint64(42), .dictionaries(items)]
        }
        object.addMethod("Who", returns: "a{sv}") { call in
            let credentials = try call.credentials()
            return [
                .dictionary([
                    "uid": .uint32(credentials.uid), "gid": .uint32(credentials.gid),
                    "groups": .strings(credentials.groups.map(String.init)), "pid": .int32(credentials.pid ?? -1),
                ])
            ]
        }
        object.addMethod("Fail") { _ in throw BusError("io.placed.Test1.Error.Nope", "nope, not now") }
        object.addMethod("BadReply") { _ in [.string("not declared")] }
        object.addProperty("Count", signature: "u") { [unowned self] _ in .uint32(self.count) }
        object.addProperty("Location", signature: "a{sv}") { _ in .dictionary(["latitude": .double(60.17)]) }
        object.addSignal("Changed", arguments: [BusArgument("generation", "t"), BusArgument("items", "aa{sv}")])
        object.addSignal("Everything", signature: BusHarness.everything.map(\.signature).joined())
        try bus.register(object)
    }

    @discardableResult
    func pump(seconds: Double = 10, until condition: () throws -> Bool) throws -> Bool {
        try loop.pump(seconds: seconds, until: condition)
    }

    /// Runs a tool against the bus while this loop serves it.
    func run(_ arguments: [String]) throws -> ProcessResult { try PlacedTestSupport.run(arguments, pumping: loop) }

    func busctl(_ arguments: String...) throws -> ProcessResult {
        try run(["/usr/bin/busctl", "--address=\(dbus.address)"] + arguments)
    }

    /// `busctl --json=short call …`: the reply's `data` array.
    func busctlCall(_ interface: String, _ method: String, _ arguments: String...) throws -> [Any]? {
        let result = try run(
            [
                "/usr/bin/busctl", "--address=\(dbus.address)", "--json=short", "call", BusHarness.name,
                BusHarness.path,
                interface, method,
            ] + arguments)
        guard result.status == 0,
            let reply = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        else { return nil }
        return reply["data"] as? [Any]
    }

    func gdbus(_ method: String, _ arguments: String...) throws -> ProcessResult {
        try run(
            [
                "/usr/bin/gdbus", "call", "--address", dbus.address, "--dest", BusHarness.name, "--object-path",
                BusHarness.path, "--method", method,
            ] + arguments)
    }
}

private let gdbusAvailable = access("/usr/bin/gdbus", X_OK) == 0
private let toolsAvailable = access("/usr/bin/dbus-daemon", X_OK) == 0 && access("/usr/bin/busctl", X_OK) == 0

@Suite(.enabled(if: toolsAvailable, "needs dbus-daemon and busctl"))
struct BusTests {
    @Test func busctlCallsAMethodWithTypedReply() throws {
        let h = try BusHarness()
        #expect(h.bus.uniqueName?.hasPrefix(":1.") == true)
        let data = try #require(try h.busctlCall("io.placed.Test1", "Echo", "s", "grüße 😀"))
        let dictionary = try #require(data.first as? [String: [String: Any]])
        #expect(dictionary["text"]?["type"] as? String == "s")
        #expect(dictionary["text"]?["data"] as? String == "grüße 😀")
        #expect(dictionary["length"]?["data"] as? Int == 7)
        #expect(dictionary["ratio"]?["data"] as? Double == 0.25)
        #expect(dictionary["ok"]?["data"] as? Bool == true)
        #expect(dictionary["big"]?["type"] as? String == "t")
        #expect(dictionary["big"]?["data"] as? Int == 1 << 40)
        #expect(dictionary["negative"]?["data"] as? Int == -5)
        #expect(dictionary["small"]?["type"] as? String == "i")
        #expect(dictionary["tags"]?["data"] as? [String] == ["a", "b"])
        #expect(dictionary["path"]?["type"] as? String == "o")
    }

    @Test func arrayOfDictionariesAndTwoReturnValues() throws {
        let h = try BusHarness()
        let data = try #require(try h.busctlCall("io.placed.Test1", "List", "u", "3"))
        #expect(data.count == 2)
        #expect(data[0] as? Int == 42)
        let items = try #require(data[1] as? [[String: [String: Any]]])
        #expect(items.count == 3)
        #expect(items[2]["id"]?["data"] as? String == "osm:node/2")
        #expect(items[1]["likelihood"]?["data"] as? Double == 1.0 / 3)
        let empty = try #require(try h.busctlCall("io.placed.Test1", "List", "u", "0"))
        #expect((empty[1] as? [Any])?.isEmpty == true)
    }

    @Test(.enabled(if: gdbusAvailable, "needs gdbus")) func gdbusCallsAMethod() throws {
        let h = try BusHarness()
        let result = try h.gdbus("io.placed.Test1.Echo", "hello")
        #expect(result.status == 0, "\(result.errors)")
        #expect(result.output.contains("'text': <'hello'>"))
        #expect(result.output.contains("'length': <uint32 5>"))
    }

    @Test func introspectionIsGeneratedFromTheVTable() throws {
        let h = try BusHarness()
        let data = try #require(try h.busctlCall("org.freedesktop.DBus.Introspectable", "Introspect"))
        let xml = try #require(data.first as? String)
        #expect(xml.contains(#"<interface name="io.placed.Test1">"#))
        #expect(xml.contains(#"<method name="List">"#))
        #expect(xml.contains(#"<arg type="u" name="limit" direction="in"/>"#), "\(xml)")
        #expect(xml.contains(#"<arg type="aa{sv}" name="items" direction="out"/>"#))
        #expect(xml.contains(#"<property name="Count" type="u" access="read">"#))
        #expect(xml.contains(#"<signal name="Changed">"#))
        #expect(xml.contains(#"<interface name="org.freedesktop.DBus.Properties">"#))
        // busctl reads members from that XML; parent paths are introspectable through sd-bus.
        let members = try h.busctl("introspect", BusHarness.name, BusHarness.path, "io.placed.Test1")
        #expect(members.status == 0, "\(members.errors)")
        #expect(members.output.contains(".List"))
        #expect(members.output.contains(".Count"))
        let tree = try h.busctl("tree", BusHarness.name)
        #expect(tree.output.contains(BusHarness.path), "\(tree.output) \(tree.errors)")
    }

    @Test func propertiesGetAndGetAll() throws {
        let h = try BusHarness()
        h.count = 12
        let count = try h.busctl("get-property", BusHarness.name, BusHarness.path, "io.placed.Test1", "Count")
        #expect(count.output == "u 12\n", "\(count.errors)")
        let all = try #require(try h.busctlCall("org.freedesktop.DBus.Properties", "GetAll", "s", "io.placed.Test1"))
        let properties = try #require(all.first as? [String: [String: Any]])
        #expect(properties["Count"]?["data"] as? Int == 12)
        #expect(properties["Location"]?["type"] as? String == "a{sv}")
        let everything = try #require(try h.busctlCall("org.freedesktop.DBus.Properties", "GetAll", "s", ""))
        #expect((everything.first as? [String: Any])?.count == 2)
    }

    @Test(.enabled(if: gdbusAvailable, "needs gdbus")) func errorsAreNamed() throws {
        let h = try BusHarness()
        // gdbus types arguments from the introspection data, so it can only get the count wrong;
        // busctl (below) sends whatever type it is told. sd-bus checks the types against the vtable.
        let tooMany = try h.gdbus("io.placed.Test1.Echo", "a", "b")
        #expect(tooMany.status != 0)
        #expect(tooMany.errors.contains("org.freedesktop.DBus.Error.InvalidArgs"))
        #expect(tooMany.errors.contains("Invalid arguments 'ss' to call io.placed.Test1.Echo(), expecting 's'"))
        #expect(try h.gdbus("io.placed.Test1.Nope").errors.contains("org.freedesktop.DBus.Error.UnknownMethod"))
        // sd-bus names an unknown interface as it names an unknown method.
        #expect(
            try h.gdbus("io.placed.Other.Echo", "x").errors.contains(
                "org.freedesktop.DBus.Error.UnknownMethod: Unknown method Echo or interface io.placed.Other"))
        let readOnly = try h.gdbus("org.freedesktop.DBus.Properties.Set", "io.placed.Test1", "Count", "<uint32 5>")
        #expect(readOnly.errors.contains("org.freedesktop.DBus.Error.PropertyReadOnly"))
        #expect(h.count == 7)
        let unknown = try h.gdbus("org.freedesktop.DBus.Properties.Get", "io.placed.Test1", "Colour")
        #expect(unknown.errors.contains("org.freedesktop.DBus.Error.UnknownProperty"))
        let own = try h.gdbus("io.placed.Test1.Fail")
        #expect(own.errors.contains("io.placed.Test1.Error.Nope: nope, not now"))
        let bad = try h.gdbus("io.placed.Test1.BadReply")
        #expect(bad.errors.contains("org.freedesktop.DBus.Error.Failed"))
        // busctl shows the message text; the object still answers afterwards.
        let busctlWrong = try h.busctl("call", BusHarness.name, BusHarness.path, "io.placed.Test1", "Echo", "u", "5")
        #expect(busctlWrong.status != 0)
        #expect(busctlWrong.errors.contains("Invalid arguments 'u' to call io.placed.Test1.Echo(), expecting 's'"))
        #expect(try h.busctlCall("io.placed.Test1", "Echo", "s", "still here") != nil)
    }

    @Test func peerInterfaceIsAnsweredBySDBus() throws {
        let h = try BusHarness()
        let ping = try h.busctl("call", BusHarness.name, BusHarness.path, "org.freedesktop.DBus.Peer", "Ping")
        #expect(ping.status == 0, "\(ping.errors)")
    }

    @Test func signalsAndPropertiesChangedReachASubscriber() throws {
        let h = try BusHarness()
        let listener = try Bus(.custom(h.dbus.address))
        try listener.attach(to: h.loop)
        var received: [BusSignal] = []
        let subscription = try listener.subscribe(path: BusHarness.path) { received.append($0) }
        let items: [[String: BusValue]] = [
            ["id": .string("osm:way/1"), "likelihood": .double(0.5), "address": .string("Mannerheimintie 1")],
            [:],
        ]
        try h.object.emitSignal("Changed", [.uint64(9), .dictionaries(items)])
        h.count = 8
        try h.object.emitPropertiesChanged(["Count", "Location"])
        #expect(try h.pump { received.count == 2 })
        #expect(received[0].interface == "io.placed.Test1")
        #expect(received[0].member == "Changed")
        #expect(received[0].sender == h.bus.uniqueName)
        #expect(received[0].arguments == [.uint64(9), .dictionaries(items)])
        #expect(received[1].interface == "org.freedesktop.DBus.Properties")
        #expect(received[1].member == "PropertiesChanged")
        #expect(
            received[1].arguments == [
                .string("io.placed.Test1"),
                .dictionary(["Count": .uint32(8), "Location": .dictionary(["latitude": .double(60.17)])]),
                .strings([]),
            ])
        _ = subscription
    }

    @Test func everyValueKindSurvivesTheWire() throws {
        let h = try BusHarness()
        let listener = try Bus(.custom(h.dbus.address))
        try listener.attach(to: h.loop)
        var received: [BusValue]?
        let subscription = try listener.subscribe(member: "Everything") { received = $0.arguments }
        let values = BusHarness.everything
        try h.object.emitSignal("Everything", values)
        #expect(try h.pump { received != nil })
        #expect(received == values)
        _ = subscription
    }

    @Test func emittingRequiresDeclaredSignatures() throws {
        let h = try BusHarness()
        #expect(throws: SystemError.self) { try h.object.emitSignal("Changed", [.uint32(1)]) }
        #expect(throws: SystemError.self) { try h.object.emitSignal("Undeclared", []) }
        #expect(throws: SystemError.self) { try h.object.emitPropertiesChanged(["Colour"]) }
        #expect(throws: SystemError.self) {
            try h.object.emitSignal("Changed", [.uint64(1), .dictionaries([["k": .string("a\u{0}b")]])])
        }
        let unregistered = BusObject(path: "/x", interface: "x.Y")
        unregistered.addSignal("S", signature: "")
        #expect(throws: SystemError("/x: not registered on a bus", errno: ENOTCONN)) {
            try unregistered.emitSignal("S", [])
        }
    }

    @Test func unregisteredObjectIsGone() throws {
        let h = try BusHarness()
        h.bus.unregister(h.object)
        let result = try h.busctl("call", BusHarness.name, BusHarness.path, "io.placed.Test1", "Echo", "s", "x")
        #expect(result.status != 0)
        #expect(throws: SystemError.self) { try h.object.emitSignal("Changed", [.uint64(1), .dictionaries([])]) }
    }

    @Test func registeredMembersCanBeComparedWithTheXML() throws {
        let h = try BusHarness()
        let members = h.object.members
        #expect(members.methods["List"]! == ("u", "taa{sv}"))
        #expect(members.methods["Fail"]! == ("", ""))
        #expect(members.properties == ["Count": "u", "Location": "a{sv}"])
        #expect(
            members.signals == ["Changed": "taa{sv}", "Everything": BusHarness.everything.map(\.signature).joined()])
        #expect(Set(members.methods.keys) == ["Echo", "List", "Who", "Fail", "BadReply"])

    }

    @Test func lostBusConnectionEndsTheLoop() throws {
        let h = try BusHarness()
        try h.bus.exitLoopOnDisconnect()
        h.dbus.stop()
        #expect(try h.pump { h.loop.hasExited })
    }

    @Test func nameOwnedElsewhereIsRefused() throws {
        let h = try BusHarness()
        let second = try Bus(.custom(h.dbus.address))
        #expect(throws: SystemError.self) { try second.requestName(BusHarness.name) }
        #expect(throws: SystemError.self) { try Bus(.custom("unix:path=\(h.dbus.directory)/none")) }
    }

    @Test func senderCredentialsForRoot() throws {
        let h = try BusHarness()
        let data = try #require(try h.busctlCall("io.placed.Test1", "Who"))
        let who = try #require(data.first as? [String: [String: Any]])
        #expect(who["uid"]?["data"] as? Int == Int(getuid()))
        // The bus driver reports every group, the primary one among them.
        #expect((who["groups"]?["data"] as? [String] ?? []).contains(String(getgid())))
        #expect((who["pid"]?["data"] as? Int ?? 0) > 0)
    }

    /// Another user with supplementary groups: the daemon sees the bus driver's view of them, taken
    /// when the caller connected (GetConnectionCredentials), not from /proc, which a hardened service
    /// cannot read.
    @Test(.enabled(if: getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0, "needs root and setpriv"))
    func senderCredentialsForAnotherUser() throws {
        let h = try BusHarness()
        let result = try h.run(
            [
                "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--groups=4242,4343", "/usr/bin/busctl",
                "--address=\(h.dbus.address)", "--json=short", "call", BusHarness.name, BusHarness.path,
                "io.placed.Test1",
                "Who",
            ])
        #expect(result.status == 0, "\(result.errors)")
        let reply = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        let who = try #require((reply?["data"] as? [Any])?.first as? [String: [String: Any]])
        #expect(who["uid"]?["data"] as? Int == 65534)
        #expect(Set(who["groups"]?["data"] as? [String] ?? []) == ["65534", "4242", "4343"])
        let credentials = Credentials(
            uid: 65534, gid: 65534, groups: (who["groups"]?["data"] as? [String] ?? []).compactMap { gid_t($0) })
        #expect(credentials.isRootOrMember(of: 4242))
        #expect(!credentials.isRootOrMember(of: 990))
    }
}
