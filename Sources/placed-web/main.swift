import PlacedSystem
import PlacedWeb

#if canImport(Glibc)
    import Glibc
#endif

// placed-web: parse, listen (on systemd's socket or our own), serve until SIGTERM.
Log.identifier = "placed-web"
if getenv("PLACED_WEB_DEBUG") != nil { Log.minimumPriority = .debug }
let arguments = Array(CommandLine.arguments.dropFirst())
let options: WebOptions
do {
    options = try WebOptions(arguments: arguments)
} catch {
    writeAll(2, "placed-web: \(error.description)\n\(WebOptions.usage)")
    exit(2)
}
if options.help {
    writeAll(1, WebOptions.usage)
    exit(0)
}
if options.version {
    writeAll(1, "placed-web \(placedWebVersion)\n")
    exit(0)
}

func fail(_ message: String) -> Never {
    Log.error(message)
    exit(1)
}

// sendfile to a page that left raises SIGPIPE; the write's EPIPE is enough.
signal(SIGPIPE, SIG_IGN)
do {
    let loop = try EventLoop()
    let stop = { loop.exit(0) }
    let signals = try [SIGTERM, SIGINT].map { try loop.onSignal($0, stop) }
    let socket: Int32
    let address: ListenAddress
    if let passed = try ListenSocket.passed() {
        socket = passed
        address = ListenSocket.boundAddress(of: passed) ?? options.listen
        if arguments.contains(where: { $0.hasPrefix("--listen") }) {
            Log.warning("--listen \(options.listen) is not used: systemd passed a socket on \(address)")
        }
    } else {
        socket = try ListenSocket.listen(on: options.listen)
        address = options.listen
    }
    if !address.isLoopback {
        Log.warning("serving on \(address), which is not loopback: other machines can reach the page")
    }
    let gateway = try Gateway(options: options, loop: loop, listeningSocket: socket, address: address)
    Log.info("serving http://\(address)/ for placed at \(options.socketPath)")
    ServiceNotifier.ready(status: "serving http://\(address)/")
    try loop.enableWatchdog()
    // The signal sources must outlive the loop: a release build would drop them after their last use.
    try withExtendedLifetime(signals) { () throws(SystemError) in _ = try loop.run() }
    ServiceNotifier.stopping()
    gateway.stop()
} catch {
    fail("\(error)")
}
