import PlacectlKit
import PlacedCore
import PlacedJSON
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A placectl subcommand: what it accepts, and what it does with a parsed command line.
protocol Command {
    static var spec: CommandSpec { get }
    /// Throws `UsageError` (exit 2), `ClientError` or `CommandFailure` (exit 1).
    static func run(_ context: Context) throws
}

/// What a command works with: its arguments, and the ways to reach placed and the terminal.
struct Context {
    let arguments: ParsedArguments

    var json: Bool { arguments.has("json") }

    /// Connects to placed where the connection options say, for a reader of `--language` or the locale.
    func client() throws -> any PlacesClient {
        let client = try Endpoint(arguments).connect(
            language: ReaderLanguage.chosen(
                option: arguments.value("language"), environment: ListingCache.processEnvironment))
        client.fields = fieldList(arguments.value("fields"))
        return client
    }

    /// The keys `--fields` asks for, to print them in that order; nil: not given.
    var fields: [String]? { fieldList(arguments.value("fields")) }

    /// Prints a reply: one compact JSON document with `--json`, else the readable `text`.
    func print(_ reply: [String: JSON], readable text: @autoclosure () -> String) throws {
        if json {
            Swift.print(try JSON.object(reply).serialized())
        } else {
            Swift.print(text(), terminator: "")
        }
    }
}

/// A failure a command explains itself: `placectl import: not an OSM PBF file` (`command` is qualified).
struct CommandFailure: Error, CustomStringConvertible {
    let command: String
    let message: String
    var description: String { "\(command): \(message)" }
}

/// A client error with advice on what to do about it, printed on a second line.
struct AdvisedError: Error {
    let error: ClientError
    let advice: String
}

enum Placectl {
    static var commands: [any Command.Type] {
        [
            StatusCommand.self, PlacesCommand.self, SelectCommand.self, WatchCommand.self, HistoryCommand.self,
            RankCommand.self, DetailsCommand.self, RefreshCommand.self, MapCommand.self, ImportCommand.self,
            UpgradeCommand.self,
            FleetDropInCommand.self,
        ]
    }

    static let root = CommandSpec(
        name: "",
        abstract: "placed's command-line client",
        synopsis:
            "[--socket PATH | --bus [--system | --user | --address ADDR]] [--json] [--language LANG] [COMMAND [ARGS]]",
        discussion: """
            Reads the places placed ranks, selects one, and imports OpenStreetMap data. Without a
            command, shows the status. 'placectl COMMAND --help' tells more about each command.
            """,
        options: [.version],
        sharedGroups: [("output", [.json, .language]), Option.connectionGroup])

    static let interface = CommandLineInterface(
        root: root, commands: commands.map { $0.spec }, defaultCommand: StatusCommand.spec.name)

    /// Runs the command line; returns the exit status.
    static func main(_ arguments: [String]) -> Int32 {
        do {
            switch try interface.resolve(arguments) {
            case .help(let text):
                print(text, terminator: "")
                return 0
            case .version:
                print("placectl \(placectlVersion)")
                return 0
            case let .run(name, parsed):
                let command = commands.first { $0.spec.name == name }!
                try command.run(Context(arguments: parsed))
                return 0
            }
        } catch let error as UsageError {
            let usage = interface.commands.first { $0.qualifiedName == error.command }?.usageLine ?? root.usageLine
            writeAll(2, "\(error)\n\(usage)\n\(error.hint)\n")
            return 2
        } catch let error as ClientError {
            writeAll(2, "placectl: \(error)\n")
            return 1
        } catch let error as AdvisedError {
            writeAll(2, "placectl: \(error.error)\nplacectl: \(error.advice)\n")
            return 1
        } catch let error as CommandFailure {
            writeAll(2, "\(error)\n")
            return 1
        } catch {
            writeAll(2, "placectl: \(error)\n")
            return 1
        }
    }
}
