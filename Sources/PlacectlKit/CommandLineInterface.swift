/// The root command: global options, then a subcommand (or the default one), then its options.
/// Options shared by several subcommands (connection, `--json`) may also come before the
/// subcommand's name, as in `placectl --json places`.
public struct CommandLineInterface: Sendable {
    public let root: CommandSpec
    public let commands: [CommandSpec]
    /// Run when the command line names none (`placectl` alone is `placectl status`).
    public let defaultCommand: String

    public enum Resolution: Equatable, Sendable {
        /// Print this text on stdout, exit 0.
        case help(String)
        case version
        case run(command: String, arguments: ParsedArguments)
    }

    public init(root: CommandSpec, commands: [CommandSpec], defaultCommand: String) {
        var root = root
        root.subcommands = commands.map { ($0.name, $0.abstract) }
        self.root = root
        self.commands = commands
        self.defaultCommand = defaultCommand
    }

    public func command(named name: String) -> CommandSpec? { commands.first { $0.name == name } }

    public func resolve(_ arguments: [String]) throws(UsageError) -> Resolution {
        var globals = ParsedArguments()
        let rest: [String]
        do {
            rest = try ArgumentParser.parse(
                arguments, options: root.options, into: &globals, stopAtFirstPositional: true)
        } catch {
            if ArgumentParser.asksForHelp(arguments) { return .help(root.help) }
            throw error
        }
        if globals.has("help") {
            return .help(rest.first.flatMap(command(named:))?.help ?? root.help)
        }
        if globals.has("version") { return .version }

        let name = rest.first ?? defaultCommand
        guard let spec = command(named: name) else {
            throw UsageError("unknown command '\(name)'")
        }
        let own = rest.dropFirst()
        if ArgumentParser.asksForHelp(own) { return .help(spec.help) }

        let accepted = Set(spec.options.map(\.name))
        if let stray = (globals.flags.union(globals.values.keys)).subtracting(accepted).sorted().first {
            throw UsageError("--\(stray) does not apply here", command: spec.qualifiedName)
        }
        var parsed = ParsedArguments(command: spec.qualifiedName, options: globals)
        _ = try ArgumentParser.parse(own, options: spec.options, into: &parsed)
        try ArgumentParser.checkPositionals(parsed, of: spec)
        return .run(command: spec.name, arguments: parsed)
    }
}
