import PlacedDaemon
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

func usageFailure(_ error: any Error) -> Never {
    writeAll(2, "placed: \(error)\nTry 'placed --help'.\n")
    exit(2)
}

func main() -> Never {
    let loader = ConfigurationLoader(arguments: Array(CommandLine.arguments.dropFirst()))
    let command: PlacedCommand
    do {
        command = try loader.command()
    } catch let error as UsageError {
        usageFailure(error)
    } catch {
        writeAll(2, "placed: \(error)\n")
        exit(1)
    }
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
    case .run(let configuration):
        do {
            exit(try PlacedService(configuration: configuration, loader: loader).run())
        } catch let error as UsageError {
            usageFailure(error)
        } catch {
            Log.error("\(error)")
            exit(1)
        }
    }
}

main()
