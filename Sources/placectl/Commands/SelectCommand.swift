import PlacectlKit
import PlacedCore
import PlacedJSON

/// `placectl select ID|ROW`: records that the device is at a place of a recent ranking.
enum SelectCommand: Command {
    static let spec = CommandSpec(
        name: "select",
        abstract: "record that the device is at a place (by id, or by row of the last listing)",
        synopsis: "ID|ROW [--json] [CONNECTION]",
        discussion: """
            Records the selection durably and places a marker. The place must be in the current
            ranking or one of the last few. ROW is a row number of the last 'placectl places'
            listing: an argument made only of digits is taken as a row when such a listing exists
            and has that row; anything else is sent as a place id (ids look like osm:node/123).
            Selecting needs root or membership of group placed.
            """,
        positionals: [Positional("ID|ROW", help: "a place id, or a row of the last 'placectl places' listing")],
        options: [.json],
        sharedGroups: [Option.connectionGroup])

    static func run(_ context: Context) throws {
        let argument = context.arguments.positionals[0]
        guard !argument.isEmpty else { throw UsageError("the place id is empty", command: spec.qualifiedName) }
        let listing = ListingCache(environment: ListingCache.processEnvironment)?.load()
        let target = ListingCache.target(of: argument, listing: listing)
        let reply: [String: JSON]
        do {
            reply = try context.client().select(id: target.id)
        } catch let error as ClientError where error.name?.hasSuffix(".UnknownPlace") == true {
            guard argument.allSatisfy({ $0.isASCII && $0.isNumber }) else { throw error }
            let rows = listing.map { "it has \($0.count) rows" } ?? "there is none"
            throw AdvisedError(
                error: error, advice: "'\(argument)' is not a row of the last 'placectl places' listing (\(rows))")
        }
        try context.print(reply, readable: Format.selected(reply))
    }
}
