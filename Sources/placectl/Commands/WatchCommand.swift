import PlacectlKit
import PlacedCore
import PlacedJSON

#if canImport(Glibc)
    import Glibc
#endif

/// `placectl watch`: streams rankings and markers until interrupted.
enum WatchCommand: Command {
    static let spec = CommandSpec(
        name: "watch",
        abstract: "stream rankings and markers as they happen, until interrupted",
        synopsis: "[--table] [--language LANG] [--fields LIST] [--json] [CONNECTION]",
        discussion: """
            Prints the current state, then one line per new ranking (its top places) and per
            marker, each with the local time. With --json, one JSON object per line, as the
            daemon sent it. With --table, each ranking's places follow its line as in
            'placectl places'. --fields: the keys of each ranking's places (with --json or --table),
            as for 'placectl places'. Ends with exit status 0 on SIGINT (Ctrl-C) or SIGTERM, and 1 if
            placed goes away.
            """,
        options: [.table, .language, .fields, .json],
        sharedGroups: [Option.connectionGroup])

    static func run(_ context: Context) throws {
        let table = context.arguments.has("table")
        let fields = context.fields
        var failure: Error?
        try context.client().watch { update in
            do {
                try context.print(update, readable: Self.readable(update, table: table, fields: fields))
            } catch {
                failure = error
            }
            // Each line as it happens, also into a pipe (nil: every output stream, i.e. stdout).
            fflush(nil)
        }
        if let failure { throw failure }
    }

    /// One update's line, and with `--table` its ranking's places under it.
    private static func readable(_ update: [String: JSON], table: Bool, fields: [String]?) -> String {
        var text = Format.watchUpdate(update, clock: Format.clock())
        if table, let places = update["places"]?.array, !places.isEmpty {
            text +=
                fields.map { Format.placesWithFields(places, fields: $0) }
                ?? Format.placesTable(places.map(PlaceRecord.init))
        }
        return text
    }
}
