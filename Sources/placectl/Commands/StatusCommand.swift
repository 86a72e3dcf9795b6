import PlacectlKit

/// `placectl status` (the default): source state, location, fix age, ranking, marker, visit, fleet export.
enum StatusCommand: Command {
    static let spec = CommandSpec(
        name: "status",
        abstract: "placed's state: position source, location, fix age, ranking, marker, fleet (the default)",
        synopsis: "[--json] [CONNECTION]",
        discussion: """
            Shows the position source (gpsd's state or static), the last location and how old its
            fix is, the ranking generation (stale when the source is lost), how many places are
            loaded, the distance filter, the last marker, the open visit, and when fleet export is
            configured its state: the broker connected to or being tried, the backlog of events
            not yet acknowledged, what was dropped or refused, and the last error.
            """,
        options: [.json],
        sharedGroups: [Option.connectionGroup])

    static func run(_ context: Context) throws {
        let reply = try context.client().status()
        try context.print(reply, readable: Format.status(reply))
    }
}
