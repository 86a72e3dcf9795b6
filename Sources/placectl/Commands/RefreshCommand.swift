import PlacectlKit

/// `placectl refresh`: makes placed load a newly imported database and rank again.
enum RefreshCommand: Command {
    static let spec = CommandSpec(
        name: "refresh",
        abstract: "load newly imported places and rank again",
        synopsis: "[--json] [CONNECTION]",
        discussion: """
            Asks placed to reload its place database if the file changed (after 'placectl import')
            and to rank the places at the current location again, then shows how many places it
            serves and the ranking it is at. A database placed cannot load fails the refresh with
            the reason (exit 1), and placed keeps serving the places it had. Refreshing needs root
            or membership of group placed.
            """,
        options: [.json],
        sharedGroups: [Option.connectionGroup])

    static func run(_ context: Context) throws {
        let client = try context.client()
        try client.refresh()
        let status = try client.status()
        try context.print(status, readable: Format.refreshed(status))
    }
}
