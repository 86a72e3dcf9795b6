import PlacectlKit
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// `placectl fleet-dropin [--config FILE] [--placed PATH] [--credentials DIR] [--write]`: the
/// placed.service drop-in that lets placed reach its fleet brokers and gives it its credentials.
enum FleetDropInCommand: Command {
    static let spec = CommandSpec(
        name: "fleet-dropin",
        abstract: "print (or --write) the placed.service drop-in a remote fleet broker needs",
        synopsis: "[--config FILE] [--placed PATH] [--credentials DIR] [--write]",
        discussion: """
            placed.service allows only localhost (IPAddressDeny=any, IPAddressAllow=localhost). Reads
            the [Fleet] settings as placed reads them ('placed --check-config'), resolves each broker
            now, and prints a drop-in with IPAddressAllow= for their addresses (and the DNS servers of
            /etc/resolv.conf when a broker is a host name) and LoadCredential= for the password
            (PasswordCredential=) and for a client key given as /run/credentials/placed.service/NAME.
            Put the credential files in the --credentials directory, readable by root only. With
            --write it goes to \(FleetDropIn.path); then run 'systemctl daemon-reload' and restart
            placed. Run it again when a broker's addresses change.
            """,
        options: [
            .value("config", "FILE", help: "placed's configuration file (default: placed's own default)"),
            .value("placed", "PATH", help: "the placed binary to ask (default: beside placectl, else /usr/bin/placed)"),
            .value(
                "credentials", "DIR",
                help: "where the credential files are (default \(FleetDropIn.credentialsDirectory))"),
            .flag("write", help: "write \(FleetDropIn.path) instead of printing it"),
        ],
        epilogue: "Exit status: 0 written, 1 error (no broker, one that does not resolve, ...), 2 usage.")

    static func run(_ context: Context) throws {
        let arguments = context.arguments
        var checkArguments = ["--check-config"]
        if let config = arguments.value("config") { checkArguments += ["--config", config] }
        let placed = arguments.value("placed") ?? defaultPlaced()
        let settings = FleetDropIn.fleetSettings(fromCheckConfig: try checkConfig(placed, checkArguments))
        let urls = settings.filter { $0.key == "Broker" }.flatMap { $0.value.split(separator: " ").map(String.init) }
        guard !urls.isEmpty else { throw failure("no Broker= in placed's [Fleet] settings: fleet export is off") }
        var brokers: [FleetDropIn.Broker] = []
        for url in urls {
            guard let host = FleetDropIn.host(ofBroker: url) else { throw failure("cannot read broker \(url)") }
            brokers.append(FleetDropIn.Broker(url: url, host: host, addresses: try resolve(host)))
        }
        let resolvConf = (try? readText("/etc/resolv.conf")) ?? ""
        let text = FleetDropIn.render(
            brokers: brokers, nameservers: FleetDropIn.nameservers(fromResolvConf: resolvConf),
            credentials: FleetDropIn.credentials(in: settings),
            directory: arguments.value("credentials") ?? FleetDropIn.credentialsDirectory)
        guard arguments.has("write") else {
            print(text, terminator: "")
            return
        }
        try write(text, to: FleetDropIn.path)
        print("wrote \(FleetDropIn.path); now: systemctl daemon-reload && systemctl restart placed")
    }

    private static func failure(_ message: String) -> CommandFailure {
        CommandFailure(command: spec.qualifiedName, message: message)
    }

    /// placed beside this placectl (an install, or a build directory), else the packaged one.
    private static func defaultPlaced() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if length > 0 {
            let own = buffer[0..<length].withUnsafeBufferPointer { String(decoding: $0.map(UInt8.init), as: UTF8.self) }
            if let slash = own.lastIndex(of: "/") {
                let beside = String(own[...slash]) + "placed"
                if access(beside, X_OK) == 0 { return beside }
            }
        }
        return "/usr/bin/placed"
    }

    /// `placed --check-config` (its own parser and checks): its stdout, or its complaint.
    private static func checkConfig(_ placed: String, _ arguments: [String]) throws -> String {
        var output: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        do {
            try checkPOSIX(pipe(&output), "pipe")
            try checkPOSIX(pipe(&errors), "pipe")
        } catch {
            throw failure(error.description)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
        for fd in output + errors { posix_spawn_file_actions_addclose(&actions, fd) }
        var cArguments = ([placed] + arguments).map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, placed, &actions, nil, &cArguments, environ)
        close(output[1])
        close(errors[1])
        defer {
            close(output[0])
            close(errors[0])
        }
        guard spawned == 0 else { throw failure("cannot run \(placed): \(String(cString: strerror(spawned)))") }
        // --check-config prints a few kB at most: stdout whole, then stderr, cannot fill a pipe both ways.
        let text = readAll(output[0])
        let complaint = readAll(errors[0])
        var status: Int32 = 0
        _ = try? retryingOnInterrupt("waitpid") { waitpid(pid, &status, 0) }
        guard status == 0 else {
            throw failure("placed --check-config: \(complaint.trimmingCharacters(in: "\n"))")
        }
        return text
    }

    private static func readAll(_ fd: Int32) -> String {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = try? retryingOnInterrupt("read") {
                chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            }
            guard let n, n > 0 else { break }
            bytes += chunk[..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func readText(_ path: String) throws -> String {
        let fd: Int32
        do {
            fd = try checkPOSIX(open(path, O_RDONLY | O_CLOEXEC), path)
        } catch {
            throw failure(error.description)
        }
        defer { close(fd) }
        return readAll(fd)
    }

    /// Every address `host` has now (a numeric host is its own).
    private static func resolve(_ host: String) throws -> [String] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &list)
        guard rc == 0 else { throw failure("cannot resolve broker host \(host): \(String(cString: gai_strerror(rc)))") }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var entry = list
        while let info = entry?.pointee {
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(info.ai_addr, info.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                let address = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
                if !addresses.contains(address) { addresses.append(address) }
            }
            entry = info.ai_next
        }
        return addresses
    }

    private static func write(_ text: String, to path: String) throws {
        let directory = String(path[..<path.lastIndex(of: "/")!])
        do {
            try checkPOSIX(mkdir(directory, 0o755), directory)
        } catch {
            guard error.errno == EEXIST else { throw failure(error.description) }
        }
        let temporary = path + ".tmp"
        let fd: Int32
        do {
            fd = try checkPOSIX(open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644), temporary)
        } catch {
            throw failure(error.description)
        }
        writeAll(fd, text)
        do {
            do {
                defer { close(fd) }
                try checkPOSIX(fsync(fd), path)
            }
            try checkPOSIX(rename(temporary, path), path)
        } catch {
            unlink(temporary)
            throw failure(error.description)
        }
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        var text = Substring(self)
        while text.last == set { text = text.dropLast() }
        return String(text)
    }
}
