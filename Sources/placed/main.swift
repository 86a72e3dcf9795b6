import PlacedDaemon
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

let command: PlacedCommand
do {
    command = try Configuration.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    writeAll(2, "placed: \(error)\nTry 'placed --help'.\n")
    exit(2)
}

switch command {
case .help:
    print(Configuration.usage)
case .run(let configuration):
    do {
        let daemon = try Daemon(configuration: configuration)
        exit(try daemon.run())
    } catch {
        Log.error("\(error)")
        exit(1)
    }
}
