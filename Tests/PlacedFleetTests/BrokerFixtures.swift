import Foundation
import PlacedCore
import PlacedJSON
import PlacedFleet
import PlacedStore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

// Real brokers and subscribers for the fleet tests: mosquitto and mosquitto_sub from Debian, each in a
// directory of its own under /tmp, on a free loopback port. Tests that cannot start them fail with the
// reason.

struct FixtureError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A new empty directory under /tmp (mode 0700).
func makeTemporaryDirectory(_ prefix: String) -> String {
    var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
    return String(cString: mkdtemp(&template)!)
}

/// A TCP port nothing listens on now (bound, read, released).
func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw FixtureError("socket: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw FixtureError("bind: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A socket listening on a free loopback port, for the tests' own brokers: its descriptor and port.
func listenOnLoopback(_ what: String) throws -> (listener: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard fd >= 0, ok else { throw FixtureError("\(what): \(String(cString: strerror(errno)))") }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// The next MQTT packet `client` sends: its type (the header's high four bits) and its body; nil at the end.
func readMQTTPacket(_ client: Int32) -> (type: UInt8, body: [UInt8])? {
    func byte() -> UInt8? {
        var value: UInt8 = 0
        return read(client, &value, 1) == 1 ? value : nil
    }
    guard let header = byte() else { return nil }
    var length = 0
    var shift = 0
    while let digit = byte() {
        length |= Int(digit & 0x7F) << shift
        shift += 7
        if digit & 0x80 == 0 { break }
    }
    var body: [UInt8] = []
    for _ in 0..<length { body.append(byte() ?? 0) }
    return (header >> 4, body)
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
func isListening(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

/// Starts a program with the default signal mask and dispositions (the test runner blocks SIGTERM in
/// its threads, and a child would inherit that), output to files.
func spawn(_ arguments: [String], stdout: String, stderr: String) throws -> pid_t {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_APPEND, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o600)
    var pid: pid_t = 0
    let argv = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let rc = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, environ)
    guard rc == 0 else { throw FixtureError("cannot start \(arguments[0]): \(String(cString: strerror(rc)))") }
    return pid
}

/// Runs a program to its end; throws with its output when it fails.
@discardableResult
func runTool(_ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw FixtureError("\(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(text)")
    }
    return text
}

func waitForExit(_ pid: pid_t, seconds: Double = 10) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    var status: Int32 = 0
    while Date() < deadline {
        if waitpid(pid, &status, WNOHANG) == pid { return true }
        usleep(5_000)
    }
    return false
}

/// One mosquitto broker with persistence (what it acknowledged survives a SIGTERM restart) and no limit
/// on the messages it queues for an offline subscriber.
final class MosquittoBroker {
    struct TLS {
        var caFile: String
        var certFile: String
        var keyFile: String
        /// Clients need a certificate signed by the CA; its common name is their user name for the ACL.
        var requireCertificate = true
    }

    let directory: String
    let port: Int
    private(set) var pid: pid_t?
    var log: String { directory + "/mosquitto.log" }

    init(tls: TLS? = nil, aclLines: [String]? = nil, passwords: [String: String]? = nil) throws {
        directory = makeTemporaryDirectory("placed-fleet-broker")
        port = try freePort()
        var config = [
            "listener \(port) 127.0.0.1", "persistence true", "persistence_location \(directory)/",
            "max_queued_messages 0", "max_inflight_messages 100", "log_dest stderr", "log_type all",
        ]
        // As root, mosquitto would switch to its own user, which cannot write this directory (its
        // persistence file) or read the test's keys.
        if getuid() == 0 { config.append("user root") }
        if let tls {
            config += [
                "cafile \(tls.caFile)", "certfile \(tls.certFile)", "keyfile \(tls.keyFile)",
                "require_certificate \(tls.requireCertificate)", "use_identity_as_username \(tls.requireCertificate)",
            ]
        }
        if let aclLines {
            try aclLines.joined(separator: "\n").appending("\n").write(
                toFile: directory + "/acl", atomically: true, encoding: .utf8)
            config.append("acl_file \(directory)/acl")
        }
        if let passwords {
            let file = directory + "/passwords"
            for (user, password) in passwords {
                try runTool(
                    ["mosquitto_passwd", "-b"] + (FileManager.default.fileExists(atPath: file) ? [] : ["-c"])
                        + [file, user, password])
            }
            config += ["password_file \(file)", "allow_anonymous false"]
        } else if tls == nil {
            config.append("allow_anonymous true")
        }
        try config.joined(separator: "\n").appending("\n").write(
            toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
        try start()
    }

    deinit {
        kill()
        removeTestDirectory(directory)
    }

    func start() throws {
        guard pid == nil else { return }
        let started = try spawn(
            ["mosquitto", "-c", directory + "/mosquitto.conf"], stdout: log, stderr: log)
        pid = started
        let deadline = Date().addingTimeInterval(10)
        while !isListening(port) {
            var status: Int32 = 0
            if waitpid(started, &status, WNOHANG) == started {
                pid = nil
                throw FixtureError("mosquitto exited at start: \(tail(of: log))")
            }
            guard Date() < deadline else { throw FixtureError("mosquitto did not listen on \(port)") }
            usleep(10_000)
        }
    }

    /// SIGTERM: mosquitto writes what it holds to its persistence file and exits.
    func stop() throws {
        guard let pid else { return }
        Glibc.kill(pid, SIGCONT)
        Glibc.kill(pid, SIGTERM)
        guard waitForExit(pid) else { throw FixtureError("mosquitto did not stop on SIGTERM") }
        self.pid = nil
    }

    /// SIGKILL: whatever mosquitto acknowledged since its last save is lost with it.
    func kill() {
        guard let pid else { return }
        Glibc.kill(pid, SIGKILL)
        _ = waitForExit(pid)
        self.pid = nil
    }

    /// SIGSTOP: the broker keeps its connections but answers nothing (a hung broker, a black-holed link).
    func pause() { if let pid { Glibc.kill(pid, SIGSTOP) } }
    func resume() { if let pid { Glibc.kill(pid, SIGCONT) } }

    var url: String { "mqtt://127.0.0.1:\(port)" }
}

/// One received message.
struct Received {
    var topic: String
    var payload: String
    var json: JSON? { try? JSON(parsing: Array(payload.utf8)) }
}

/// A persistent QoS 1 subscriber (mosquitto_sub: fixed client id, clean session off), which reconnects by
/// itself when the broker comes back. Every message is a line "topic payload" in its output file.
final class Subscriber {
    let output: String
    private var pid: pid_t?
    let clientID: String

    init(broker: MosquittoBroker, topic: String = "#", clientID: String = "fleet-test-consumer", extra: [String] = [])
        throws
    {
        output = broker.directory + "/\(clientID).out"
        self.clientID = clientID
        pid = try spawn(
            [
                "mosquitto_sub", "-h", "127.0.0.1", "-p", String(broker.port), "-i", clientID, "-c", "-q", "1", "-v",
                "-t", topic,
            ] + extra,
            stdout: output, stderr: broker.directory + "/\(clientID).err")
    }

    deinit { stop() }

    func stop() {
        guard let pid else { return }
        Glibc.kill(pid, SIGKILL)
        _ = waitForExit(pid)
        self.pid = nil
    }

    var messages: [Received] {
        guard let text = try? String(contentsOfFile: output, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line -> Received? in
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { return nil }
            return Received(topic: String(parts[0]), payload: String(parts[1]))
        }
    }
}

/// Removes a test's directory, unless PLACED_KEEP_TEST_FILES is set (to read the broker's log).
func removeTestDirectory(_ path: String) {
    guard getenv("PLACED_KEEP_TEST_FILES") == nil, path.hasPrefix("/tmp/placed-fleet-") else { return }
    try? FileManager.default.removeItem(atPath: path)
}

func tail(of path: String, lines: Int = 20) -> String {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return "(no \(path))" }
    return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
}

/// A CA and certificates made with openssl for one test: `server` for 127.0.0.1, clients by common name.
struct TestPKI {
    let directory: String
    let name: String

    init(name: String = "ca") throws {
        directory = makeTemporaryDirectory("placed-fleet-pki")
        self.name = name
        try runTool([
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=placed test \(name)",
            "-keyout", "\(directory)/\(name).key", "-out", caFile,
        ])
    }

    var caFile: String { "\(directory)/\(name).pem" }

    /// A certificate signed by this CA; `subjectAltName` such as "IP:127.0.0.1".
    func issue(_ commonName: String, subjectAltName: String? = nil) throws -> (cert: String, key: String) {
        let base = "\(directory)/\(commonName)"
        try runTool([
            "openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=\(commonName)", "-keyout", base + ".key",
            "-out", base + ".csr",
        ])
        var arguments = [
            "openssl", "x509", "-req", "-in", base + ".csr", "-CA", caFile, "-CAkey", "\(directory)/\(name).key",
            "-CAcreateserial", "-days", "2", "-out", base + ".pem",
        ]
        if let subjectAltName {
            try "subjectAltName=\(subjectAltName)\n".write(toFile: base + ".ext", atomically: true, encoding: .utf8)
            arguments += ["-extfile", base + ".ext"]
        }
        try runTool(arguments)
        return (base + ".pem", base + ".key")
    }

    func remove() { removeTestDirectory(directory) }
}

// MARK: The publisher under test

extension EventLoop {
    /// Runs the loop until `condition` holds; false if it still does not after `seconds`.
    @discardableResult
    func pump(seconds: Double = 10, until condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while try !condition() {
            if Date() > deadline { return false }
            _ = try? runOnce(timeout: 5_000)
        }
        return true
    }

    /// Runs the loop for `seconds`.
    func pump(for seconds: Double) {
        pump(seconds: seconds) { false }
    }
}

/// A FleetExporter over a fresh selection log, with synthetic markers.
final class Publisher {
    let loop: EventLoop
    let selections: SelectionLog
    let exporter: FleetExporter
    let directory: String
    private(set) var markersMade = 0

    init(_ configure: (inout FleetSettings) throws -> Void, directory: String? = nil) throws {
        self.directory = directory ?? makeTemporaryDirectory("placed-fleet-publisher")
        var settings = FleetSettings()
        try configure(&settings)
        loop = try EventLoop()
        selections = try SelectionLog(path: self.directory + "/selections.db")
        exporter = try FleetExporter(loop: loop, settings: settings, selections: selections)
        markersMade = selections.count
        exporter.start()
    }

    deinit {
        exporter.stop()
        removeTestDirectory(directory)
    }

    /// Records the next marker, as the daemon's Select does.
    @discardableResult
    func select() throws -> Marker {
        markersMade += 1
        let index = markersMade
        let place = Place(
            id: "osm:node/\(index)", name: "Place \(index)", kind: "amenity=cafe", address: nil,
            coordinate: Coordinate(latitude: 60.1695, longitude: 24.9525))
        let fix = Fix(
            time: 1_700_000_000 + Double(index), coordinate: Coordinate(latitude: 60.1695, longitude: 24.9525),
            mode: .threeD, accuracy: 4)
        let marker = Marker(
            place: RankedPlace(place: place, distance: 5, likelihood: 0.5), location: fix, time: SystemClock.now(),
            generation: UInt64(index))
        return try exporter.append(marker, to: selections) { recorded in
            ["place": ["id": .string(recorded.place.place.id)], "selection": .number(Double(recorded.selection))]
        }
    }

    var isDrained: Bool { exporter.status.backlog == 0 && exporter.status.inFlight == 0 }
}

/// The markers a subscriber received, by selection number, with the checks every test makes: each
/// duplicate is byte for byte the first copy (same id, same payload), and first copies arrive in order.
struct MarkerLedger {
    var firstSeen: [Int: String] = [:]
    var order: [Int] = []
    var duplicates = 0
    var problems: [String] = []

    init(_ messages: [Received], device: String) {
        for message in messages where message.topic == "placed/\(device)/marker" {
            guard let json = message.json, let selection = json["selection"]?.int, let id = json["id"]?.string,
                let sequence = json["seq"]?.int
            else {
                problems.append("unreadable marker: \(message.payload)")
                continue
            }
            if id != "\(device):\(sequence)" { problems.append("id \(id) is not device:seq \(sequence)") }
            if let first = firstSeen[selection] {
                duplicates += 1
                if first != message.payload { problems.append("duplicate of \(selection) differs") }
            } else {
                firstSeen[selection] = message.payload
                order.append(selection)
            }
        }
        if order != order.sorted() { problems.append("markers out of order") }
    }

    func missing(of range: ClosedRange<Int>) -> [Int] { range.filter { firstSeen[$0] == nil } }
}
