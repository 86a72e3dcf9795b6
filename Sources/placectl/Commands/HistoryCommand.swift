import PlacectlKit

/// `placectl history`: past selections, newest first.
enum HistoryCommand: Command {
    static let spec = CommandSpec(
        name: "history",
        abstract: "past selections, newest first",
        synopsis: "[--limit N] [--before SELECTION] [--json] [CONNECTION]",
        discussion: """
            Lists the recorded selections, newest first: selection number, time (UTC), place and
            the ranking it came from. --before pages back (varlink only).
            """,
        options: [
            .value("limit", "N", short: "n", help: "how many selections (default 20, at most 1000)"),
            .value("before", "SELECTION", help: "only selections older than this selection number"),
            .json,
        ],
        sharedGroups: [Option.connectionGroup])

    static func run(_ context: Context) throws {
        let limit = try context.arguments.integer("limit")
        let before = try context.arguments.integer("before", minimum: 1, maximum: Int.max)
        let reply = try context.client().history(limit: limit, before: before)
        try context.print(reply, readable: Format.history(reply))
    }
}
