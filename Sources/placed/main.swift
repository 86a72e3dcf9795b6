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

func usageFailure(_ error: any Error) -> Never {
    writeAll(2, "placed: \(error)\nTry 'placed --help'.\n")
    exit(2)
}

func main() -> Never {
    let arguments = Array(CommandLine.arguments.dropFirst())
    let command: PlacedCommand
    do {
        command = try loadConfiguration(arguments)
    } catch let error as UsageError {
        usageFailure(error)
    } catch {
        writeAll(2, "placed: \(error)\n")
        exit(1)
    }
    guard case let .run(configuration) = command else {
        print(Configuration.usage)
        exit(0)
    }
    do {
        let daemon = try Daemon(configuration: configuration)
        daemon.configurationLoader = {
            guard case let .run(reloaded) = try loadConfiguration(arguments) else {
                throw UsageError("unexpected --help")
            }
            return reloaded
        }
        exit(try daemon.run())
    } catch let error as UsageError {
        usageFailure(error)
    } catch {
        Log.error("\(error)")
        exit(1)
    }
}

main()
