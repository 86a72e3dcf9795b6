import PlacectlKit
import PlacedCore
import PlacedJSON
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// `placectl places`: the latest ranking, best first; remembers the rows for `select ROW`.
enum PlacesCommand: Command {
    static let spec = CommandSpec(
        name: "places",
        abstract: "the latest ranking: the places this device is most likely at",
        synopsis: "[--limit N] [--language LANG] [--fields LIST] [--json] [CONNECTION]",
        discussion: """
            Lists the places of the latest ranking, most likely first: row, likelihood, distance
            from the fix, name, kind and id. The ids are remembered (in $XDG_RUNTIME_DIR/placectl)
            so that 'placectl select ROW' picks the place shown on that row. Names follow
            --language, else LC_ALL, LC_MESSAGES or LANG, else placed's Language=, falling back to
            each place's name tag. With --fields, each place's keys named there (id, name, open_now,
            phone…, * for all: see 'placectl details') instead of the table.
            """,
        options: [.limit, .language, .fields, .json],
        sharedGroups: [Option.connectionGroup])

    static func run(_ context: Context) throws {
        let limit = try context.arguments.integer("limit")
        let reply = try context.client().current(limit: limit)
        remember(reply)
        try context.print(reply, readable: Format.current(reply, fields: context.fields))
    }

    /// Saves the listed ids for `select ROW`; a failure is worth a warning, not the listing.
    private static func remember(_ reply: [String: JSON]) {
        guard let cache = ListingCache(environment: ListingCache.processEnvironment) else { return }
        let ids = (reply["places"]?.array ?? []).compactMap { $0["id"]?.string }
        do {
            try cache.save(ids)
        } catch {
            writeAll(2, "placectl: warning: \(error)\n")
        }
    }
}
