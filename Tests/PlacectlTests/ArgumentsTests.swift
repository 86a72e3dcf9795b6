import PlacectlKit
import Testing

/// A small interface shaped like placectl's: a default command, shared options, a command
/// without them.
private let places = CommandSpec(
    name: "places", abstract: "list", synopsis: "[--limit N]", options: [.limit, .json],
    sharedGroups: [Option.connectionGroup])
private let rank = CommandSpec(
    name: "rank", abstract: "rank", synopsis: "LAT LON",
    positionals: [Positional("LAT", help: ""), Positional("LON", help: "")],
    options: [.value("accuracy", "M", help: "")], sharedGroups: [Option.connectionGroup])
private let importSpec = CommandSpec(
    name: "import", abstract: "import", synopsis: "FILE.osm.pbf [--db PATH]",
    positionals: [Positional("FILE.osm.pbf", help: "")], options: [.value("db", "PATH", help: "")])
private let status = CommandSpec(
    name: "status", abstract: "status", synopsis: "", options: [.json], sharedGroups: [Option.connectionGroup])
private let root = CommandSpec(
    name: "", abstract: "", synopsis: "[COMMAND]", options: [.version],
    sharedGroups: [("output", [.json]), Option.connectionGroup])
private let cli = CommandLineInterface(
    root: root, commands: [status, places, rank, importSpec], defaultCommand: "status")

private func run(_ arguments: [String]) throws -> (String, ParsedArguments) {
    guard case let .run(command, parsed) = try cli.resolve(arguments) else {
        Issue.record("expected a command to run for \(arguments)")
        return ("", ParsedArguments())
    }
    return (command, parsed)
}

private func usageError(_ arguments: [String]) -> UsageError? {
    do {
        _ = try cli.resolve(arguments)
        return nil
    } catch {
        return error
    }
}

@Suite struct ArgumentParserTests {
    @Test func valuesFlagsAndPositionals() throws {
        var parsed = ParsedArguments()
        let rest = try ArgumentParser.parse(
            ["--limit", "3", "--json", "a", "--db=/x=y", "b"],
            options: [.limit, .json, .value("db", "PATH", help: "")],
            into: &parsed)
        #expect(rest.isEmpty)
        #expect(parsed.value("limit") == "3")
        #expect(parsed.value("db") == "/x=y")
        #expect(parsed.has("json"))
        #expect(!parsed.has("limit"))
        #expect(parsed.positionals == ["a", "b"])
    }

    @Test func shortOptionsSeparateAndAttached() throws {
        var parsed = ParsedArguments()
        _ = try ArgumentParser.parse(["-n", "4"], options: [.limit], into: &parsed)
        #expect(try parsed.integer("limit") == 4)
        _ = try ArgumentParser.parse(["-n7"], options: [.limit], into: &parsed)
        #expect(try parsed.integer("limit") == 7, "a later occurrence wins")
    }

    @Test func negativeNumbersAndDashAreArguments() throws {
        var parsed = ParsedArguments()
        _ = try ArgumentParser.parse(["-33.86", "-70", "-", "-.5"], options: [.limit], into: &parsed)
        #expect(parsed.positionals == ["-33.86", "-70", "-", "-.5"])
    }

    @Test func doubleDashEndsOptions() throws {
        var parsed = ParsedArguments()
        _ = try ArgumentParser.parse(["--json", "--", "--limit", "-x"], options: [.limit, .json], into: &parsed)
        #expect(parsed.has("json"))
        #expect(parsed.value("limit") == nil)
        #expect(parsed.positionals == ["--limit", "-x"])
    }

    @Test func mistakesAreNamed() {
        func message(_ arguments: [String]) -> String? {
            var parsed = ParsedArguments(command: "placectl places")
            do {
                _ = try ArgumentParser.parse(arguments, options: [.limit, .json], into: &parsed)
                return nil
            } catch {
                #expect(error.command == "placectl places")
                return error.message
            }
        }
        #expect(message(["--frobnicate"]) == "unknown option '--frobnicate'")
        #expect(message(["--frob=1"]) == "unknown option '--frob'")
        #expect(message(["-x"]) == "unknown option '-x'")
        #expect(message(["--json=yes"]) == "--json takes no value")
        #expect(message(["--limit"]) == "--limit needs a value (N)")
        #expect(message(["-jx"]) == "unknown option '-jx'")
    }

    @Test func typedValuesAreChecked() throws {
        var parsed = ParsedArguments(command: "placectl rank")
        _ = try ArgumentParser.parse(
            ["--limit", "0", "--accuracy", "-1"], options: [.limit, .value("accuracy", "M", help: "")], into: &parsed)
        #expect(
            throws: UsageError("--limit expects a whole number from 1 to 4294967295, not '0'", command: "placectl rank")
        ) {
            try parsed.integer("limit")
        }
        #expect(throws: UsageError.self) { try parsed.number("accuracy", minimum: 0) }
        #expect(try parsed.number("accuracy") == -1)
        #expect(try parsed.integer("absent") == nil)
    }

    @Test func helpIsFoundBeforeDoubleDash() {
        #expect(ArgumentParser.asksForHelp(["x", "-h"]))
        #expect(ArgumentParser.asksForHelp(["--help"]))
        #expect(!ArgumentParser.asksForHelp(["--", "--help"]))
        #expect(!ArgumentParser.asksForHelp(["--helpful"]))
    }
}

@Suite struct CommandLineInterfaceTests {
    @Test func noCommandIsTheDefault() throws {
        let (command, parsed) = try run([])
        #expect(command == "status")
        #expect(parsed.positionals.isEmpty)
        #expect(try run(["--json"]).0 == "status")
    }

    @Test func sharedOptionsBeforeAndAfterTheCommand() throws {
        let (command, parsed) = try run(["--json", "--socket", "/tmp/s", "places", "--limit=2"])
        #expect(command == "places")
        #expect(parsed.has("json"))
        #expect(parsed.value("socket") == "/tmp/s")
        #expect(parsed.value("limit") == "2")
        #expect(parsed.command == "placectl places")
        #expect(try run(["places", "--json", "--bus"]).1.has("bus"))
    }

    @Test func positionalsAreCounted() throws {
        #expect(try run(["rank", "-33.86", "151.2"]).1.positionals == ["-33.86", "151.2"])
        #expect(usageError(["rank", "1"]) == UsageError("missing LON", command: "placectl rank"))
        #expect(usageError(["rank"]) == UsageError("missing LAT LON", command: "placectl rank"))
        #expect(usageError(["rank", "1", "2", "3"]) == UsageError("unexpected argument '3'", command: "placectl rank"))
        #expect(usageError(["places", "x"]) == UsageError("unexpected argument 'x'", command: "placectl places"))
    }

    @Test func usageErrorsNameTheCommand() {
        #expect(usageError(["frobnicate"]) == UsageError("unknown command 'frobnicate'"))
        #expect(
            usageError(["places", "--accuracy", "3"])
                == UsageError("unknown option '--accuracy'", command: "placectl places"))
        #expect(usageError(["--limit", "3"]) == UsageError("unknown option '--limit'"), "--limit is not global")
        #expect(
            usageError(["--json", "import", "x"])
                == UsageError("--json does not apply here", command: "placectl import"))
        #expect(usageError(["import", "x", "--socket", "/s"])?.message == "unknown option '--socket'")
        #expect(UsageError("x", command: "placectl places").hint == "Try 'placectl places --help'.")
    }

    @Test func helpAndVersion() throws {
        guard case .help(let text) = try cli.resolve(["places", "--limit", "--help"]) else {
            Issue.record("expected help")
            return
        }
        #expect(text.hasPrefix("usage: placectl places [--limit N]\n"))
        #expect(text.contains("  -n, --limit N"))
        #expect(text.contains("connection:\n"))
        #expect(text.hasSuffix("Exit status: 0 ok, 1 error (named on stderr), 2 usage.\n"))

        guard case .help(let rootHelp) = try cli.resolve(["--frobnicate", "-h"]) else {
            Issue.record("expected the root help")
            return
        }
        #expect(rootHelp.hasPrefix("usage: placectl [COMMAND]\n"))
        #expect(rootHelp.contains("commands:\n  status"))
        #expect(rootHelp.contains("  import "))

        guard case .help(let importHelp) = try cli.resolve(["--help", "import"]) else {
            Issue.record("expected import's help")
            return
        }
        #expect(importHelp.hasPrefix("usage: placectl import FILE.osm.pbf [--db PATH]\n"))
        #expect(!importHelp.contains("--socket"), "import takes no connection options")
        #expect(try cli.resolve(["--version", "places"]) == .version)
    }
}

@Suite struct EndpointTests {
    private func endpoint(_ arguments: [String]) throws -> Endpoint { try Endpoint(run(arguments).1) }

    @Test func theSocketByDefault() throws {
        #expect(try endpoint(["places"]) == .socket(path: "/run/placed/io.placed.Places"))
        #expect(try endpoint(["places", "--socket", "/tmp/p"]) == .socket(path: "/tmp/p"))
        #expect(Endpoint.socket(path: "/x").description == "socket /x")
    }

    @Test func busChoices() throws {
        #expect(try endpoint(["--bus"]) == .bus(.system))
        #expect(try endpoint(["--bus", "--user"]) == .bus(.user))
        #expect(try endpoint(["--user"]) == .bus(.user), "a bus choice implies --bus")
        #expect(try endpoint(["--address=unix:path=/tmp/b"]) == .bus(.address("unix:path=/tmp/b")))
    }

    @Test func contradictionsAreUsageErrors() {
        #expect(throws: UsageError.self) { try endpoint(["--bus", "--socket", "/s"]) }
        #expect(throws: UsageError.self) { try endpoint(["--system", "--user"]) }
        #expect(throws: UsageError.self) { try endpoint(["--socket="]) }
    }
}

@Suite struct ReaderLanguageTests {
    @Test func theOptionElseTheMessagesLocaleWhenItNamesALanguage() {
        let finnish = ["LANG": "fi_FI.UTF-8"]
        #expect(ReaderLanguage.chosen(option: "sv", environment: finnish) == "sv")
        #expect(ReaderLanguage.chosen(option: "C", environment: finnish) == "C", "C asks for the name tags")
        #expect(ReaderLanguage.chosen(option: nil, environment: finnish) == "fi_FI.UTF-8")
        // POSIX order: LC_ALL, then LC_MESSAGES, then LANG; an empty variable does not count.
        #expect(
            ReaderLanguage.chosen(option: nil, environment: ["LC_ALL": "", "LC_MESSAGES": "sv_SE", "LANG": "fi"])
                == "sv_SE")
        #expect(
            ReaderLanguage.chosen(option: nil, environment: ["LC_ALL": "en_GB.UTF-8", "LANG": "fi"]) == "en_GB.UTF-8")
        // A locale without a language leaves the choice to placed's Language=.
        for locale in ["C", "C.UTF-8", "POSIX"] {
            #expect(ReaderLanguage.chosen(option: nil, environment: ["LANG": locale]) == nil)
        }
        #expect(ReaderLanguage.chosen(option: nil, environment: [:]) == nil)
    }
}
