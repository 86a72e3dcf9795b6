import PlacedCore

/// A hand-written argument parser in the shape of swift-argument-parser: a command declares its
/// options and positional arguments, the parser turns a command line into `ParsedArguments`, and
/// every mistake is a `UsageError` (exit status 2) that names the command it belongs to.

/// An option: a flag (`--json`) or an option with a value (`--limit N`, `--limit=N`, `-n N`).
public struct Option: Sendable, Hashable {
    /// Without the dashes: `limit` for `--limit`.
    public let name: String
    public let short: Character?
    /// Shown in help (`N`, `PATH`); nil for a flag.
    public let valueName: String?
    public let help: String

    public static func flag(_ name: String, short: Character? = nil, help: String) -> Option {
        Option(name: name, short: short, valueName: nil, help: help)
    }

    public static func value(_ name: String, _ valueName: String, short: Character? = nil, help: String)
        -> Option
    {
        Option(name: name, short: short, valueName: valueName, help: help)
    }

    public var takesValue: Bool { valueName != nil }

    /// `-n, --limit N` as help shows it.
    var label: String {
        let long = "--\(name)" + (valueName.map { " \($0)" } ?? "")
        return short.map { "-\($0), \(long)" } ?? "    \(long)"
    }

    /// Every command takes it; the parser answers it before anything else is checked.
    public static let help = Option.flag("help", short: "h", help: "show this help")
}

/// A positional argument, in the order the command takes them.
public struct Positional: Sendable, Hashable {
    public let name: String
    public let help: String
    public let isOptional: Bool

    public init(_ name: String, help: String, optional: Bool = false) {
        self.name = name
        self.help = help
        self.isOptional = optional
    }
}

/// What a (sub)command accepts, and the text its `--help` shows.
public struct CommandSpec: Sendable {
    /// Empty for the root command.
    public let name: String
    /// One line, for the root's list of commands.
    public let abstract: String
    /// After `usage: placectl NAME `: `FILE.osm.pbf [--db PATH]`.
    public let synopsis: String
    public let discussion: String
    /// The last paragraph of help.
    public let epilogue: String
    public let positionals: [Positional]
    /// Sections of options in help order, e.g. the command's own, then "connection".
    public let optionGroups: [(title: String, options: [Option])]
    /// For the root: the subcommands and their abstracts, listed in help.
    public var subcommands: [(name: String, abstract: String)] = []

    public init(
        name: String, abstract: String, synopsis: String, discussion: String = "",
        positionals: [Positional] = [], options: [Option] = [],
        sharedGroups: [(title: String, options: [Option])] = [],
        epilogue: String = "Exit status: 0 ok, 1 error (named on stderr), 2 usage."
    ) {
        self.name = name
        self.abstract = abstract
        self.synopsis = synopsis
        self.discussion = discussion
        self.epilogue = epilogue
        self.positionals = positionals
        self.optionGroups = [("options", options + [.help])] + sharedGroups
    }

    public var options: [Option] { optionGroups.flatMap(\.options) }

    /// `placectl places`, or `placectl` for the root.
    public var qualifiedName: String { name.isEmpty ? CommandSpec.program : "\(CommandSpec.program) \(name)" }

    public static let program = "placectl"

    public var usageLine: String { "usage: \(qualifiedName) \(synopsis)" }

    /// The full `--help` text.
    public var help: String {
        var text = usageLine + "\n"
        if !discussion.isEmpty { text += "\n" + discussion + "\n" }
        let labels = positionals.map(\.name) + options.map(\.label) + subcommands.map(\.name)
        let width = min((labels.map(\.count).max() ?? 0) + 2, 30)
        func row(_ label: String, _ help: String) -> String {
            let padding = label.count < width ? String(repeating: " ", count: width - label.count) : "  "
            return "  " + label + padding + help + "\n"
        }
        if !subcommands.isEmpty {
            text += "\ncommands:\n"
            for command in subcommands { text += row(command.name, command.abstract) }
        }
        if !positionals.isEmpty {
            text += "\narguments:\n"
            for positional in positionals { text += row(positional.name, positional.help) }
        }
        for group in optionGroups where !group.options.isEmpty {
            text += "\n\(group.title):\n"
            for option in group.options { text += row(option.label, option.help) }
        }
        if !epilogue.isEmpty { text += "\n" + epilogue + "\n" }
        return text
    }
}

/// A command line that cannot be understood: exit status 2.
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public let message: String
    /// `placectl places` or `placectl`: where to look for help.
    public let command: String

    public init(_ message: String, command: String = CommandSpec.program) {
        self.message = message
        self.command = command
    }

    /// `placectl places: unknown option '--frobnicate'`.
    public var description: String { "\(command): \(message)" }

    public var hint: String { "Try '\(command) --help'." }
}

/// The options and positional arguments of one command line, as given.
public struct ParsedArguments: Sendable, Equatable {
    public private(set) var flags: Set<String> = []
    public private(set) var values: [String: String] = [:]
    public private(set) var positionals: [String] = []
    /// For error messages: `placectl places`.
    public let command: String

    public init(command: String = CommandSpec.program) { self.command = command }

    /// The options of `other` under another command's name (global options given before it).
    init(command: String, options other: ParsedArguments) {
        self.command = command
        flags = other.flags
        values = other.values
    }

    public func has(_ flag: String) -> Bool { flags.contains(flag) }

    public func value(_ name: String) -> String? { values[name] }

    /// The value of `--NAME` as a whole number >= `minimum`; nil when the option is absent.
    public func integer(_ name: String, minimum: Int = 1, maximum: Int = Int(UInt32.max)) throws(UsageError)
        -> Int?
    {
        guard let text = values[name] else { return nil }
        guard let number = Int(text), number >= minimum, number <= maximum else {
            throw UsageError(
                "--\(name) expects a whole number from \(minimum) to \(maximum), not '\(text)'", command: command)
        }
        return number
    }

    /// The value of `--NAME` as a finite number >= `minimum`; nil when the option is absent.
    public func number(_ name: String, minimum: Double = -.infinity) throws(UsageError) -> Double? {
        guard let text = values[name] else { return nil }
        guard let number = Double(text), number.isFinite, number >= minimum else {
            let bound = minimum.isFinite ? " >= \(minimum.formatted(decimals: 0))" : ""
            throw UsageError("--\(name) expects a number\(bound), not '\(text)'", command: command)
        }
        return number
    }

    mutating func set(_ option: Option, _ value: String?) {
        if let value { values[option.name] = value } else { flags.insert(option.name) }
    }

    mutating func append(_ positional: String) { positionals.append(positional) }
}

public enum ArgumentParser {
    /// Parses `arguments` against `options`, adding to `parsed` (so global options given before the
    /// command name and the command's own end up together). A later occurrence of an option wins.
    ///
    /// `--` ends the options; `-` alone and negative numbers (`-33.86`) are positional, so a
    /// southern latitude needs no `--`.
    public static func parse(
        _ arguments: some Sequence<String>, options: [Option], into parsed: inout ParsedArguments,
        stopAtFirstPositional: Bool = false
    ) throws(UsageError) -> [String] {
        var rest = Array(arguments)[...]
        let command = parsed.command
        func find(_ predicate: (Option) -> Bool) -> Option? { options.first(where: predicate) }
        while let argument = rest.first {
            if argument == "--" {
                rest.removeFirst()
                if stopAtFirstPositional { return Array(rest) }
                rest.forEach { parsed.append($0) }
                return []
            }
            guard isOption(argument) else {
                if stopAtFirstPositional { return Array(rest) }
                parsed.append(rest.removeFirst())
                continue
            }
            rest.removeFirst()
            let option: Option
            var inlineValue: String?
            if argument.hasPrefix("--") {
                let body = argument.dropFirst(2)
                let name = body.firstIndex(of: "=").map { String(body[..<$0]) } ?? String(body)
                if let equals = body.firstIndex(of: "=") { inlineValue = String(body[body.index(after: equals)...]) }
                guard let found = find({ $0.name == name }) else {
                    throw UsageError("unknown option '--\(name)'", command: command)
                }
                option = found
            } else {
                let letter = argument[argument.index(after: argument.startIndex)]
                guard let found = find({ $0.short == letter }) else {
                    throw UsageError("unknown option '\(argument)'", command: command)
                }
                option = found
                let attached = argument.dropFirst(2)
                if !attached.isEmpty {
                    guard found.takesValue else { throw UsageError("unknown option '\(argument)'", command: command) }
                    inlineValue = String(attached)
                }
            }
            if option.takesValue {
                guard let value = inlineValue ?? rest.popFirst() else {
                    throw UsageError("--\(option.name) needs a value (\(option.valueName!))", command: command)
                }
                parsed.set(option, value)
            } else {
                if inlineValue != nil { throw UsageError("--\(option.name) takes no value", command: command) }
                parsed.set(option, nil)
            }
        }
        return []
    }

    /// Checks the count of positional arguments against what `spec` takes.
    public static func checkPositionals(_ parsed: ParsedArguments, of spec: CommandSpec) throws(UsageError) {
        let required = spec.positionals.filter { !$0.isOptional }
        if parsed.positionals.count < required.count {
            let missing = required[parsed.positionals.count...].map(\.name).joined(separator: " ")
            throw UsageError("missing \(missing)", command: spec.qualifiedName)
        }
        // A last positional named `NAME...` takes any number.
        let variadic = spec.positionals.last?.name.hasSuffix("...") ?? false
        if !variadic, parsed.positionals.count > spec.positionals.count {
            throw UsageError(
                "unexpected argument '\(parsed.positionals[spec.positionals.count])'", command: spec.qualifiedName)
        }
    }

    /// `-x`, `--xyz`, but not `-`, `--` (handled apart) or a negative number.
    static func isOption(_ argument: String) -> Bool {
        guard argument.hasPrefix("-"), argument.count > 1 else { return false }
        if Double(argument) != nil { return false }
        return true
    }

    /// Whether `--help`/`-h` appears before any `--`.
    public static func asksForHelp(_ arguments: some Sequence<String>) -> Bool {
        for argument in arguments {
            if argument == "--" { return false }
            if argument == "--help" || argument == "-h" { return true }
        }
        return false
    }
}
