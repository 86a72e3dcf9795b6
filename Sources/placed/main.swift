import PlacedDaemon
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Flags are read twice: first to find --config, then over the loaded file, so flags win.
func loadConfiguration(_ arguments: [String]) throws -> PlacedCommand {
    guard case let .run(flagsOnly) = try Configuration.parse(arguments) else { return .help }
    var base = Configuration()
    let explicit = arguments.contains { $0 == "--config" || $0.hasPrefix("--config=") }
    if explicit, access(flagsOnly.configFile, F_OK) != 0 {
        throw UsageError("--config: \(flagsOnly.configFile): no such file")
    }
    try ConfigFile.load(flagsOnly.configFile, into: &base)
    base.configFile = flagsOnly.configFile
    return try Configuration.parse(arguments, over: base)
}

let command: PlacedCommand
do {
    command = try loadConfiguration(Array(CommandLine.arguments.dropFirst()))
} catch let error as UsageError {
    writeAll(2, "placed: \(error)\nTry 'placed --help'.\n")
    exit(2)
} catch {
    writeAll(2, "placed: \(error)\n")
    exit(1)
}

switch command {
case .help:
    print(Configuration.usage)
case let .run(configuration):
    do {
        let daemon = try Daemon(configuration: configuration)
        daemon.configurationLoader = {
            guard case let .run(reloaded) = try loadConfiguration(Array(CommandLine.arguments.dropFirst())) else {
                throw UsageError("unexpected --help")
            }
            return reloaded
        }
        exit(try daemon.run())
    } catch let error as UsageError {
        writeAll(2, "placed: \(error)\nTry 'placed --help'.\n")
        exit(2)
    } catch {
        Log.error("\(error)")
        exit(1)
    }
}
