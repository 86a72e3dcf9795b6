import PlacedDaemon
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Flags are read twice: first to find --config, then over the loaded file, so flags win.
func loadConfiguration(_ arguments: [String]) throws -> PlacedCommand {
    let flagsOnly: Configuration
    switch try Configuration.parse(arguments) {
    case .run(let c), .check(let c): flagsOnly = c
    case let other: return other
    }
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
    let configuration: Configuration
    switch command {
    case .help:
        print(Configuration.usage)
        exit(0)
    case .version:
        print("placed \(placedVersion)")
        exit(0)
    case .check(let checked):
        do {
            _ = try checked.resolvedSource()
        } catch {
            writeAll(2, "placed: \(error)\n")
            exit(1)
        }
        print("# \(checked.configFile), its drop-ins, then the flags: placed would run with")
        print(ConfigFile.effective(checked), terminator: "")
        exit(0)
    case .run(let c):
        configuration = c
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
