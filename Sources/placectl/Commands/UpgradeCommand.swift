import PlacectlKit
import PlacedCore
import PlacedStore
import PlacedSystem

/// `placectl upgrade [--db PATH] [--no-refresh]`: rewrite a place database of the schema before this one
/// in this schema, in place, and have a running placed load it.
enum UpgradeCommand: Command {
    static let spec = CommandSpec(
        name: "upgrade",
        abstract: "rewrite a place database of an older placed in this version's format",
        synopsis: "[--db PATH] [--no-refresh] [CONNECTION]",
        discussion: """
            placed refuses a place database an older version wrote (schema 4 or 5) and ranks
            nothing until it is upgraded or imported again. This rewrites it in schema \(PlaceDatabase.schemaVersion)
            without the extract: the same places (their details come with the next import),
            written beside the database, synced and renamed over it with its mode and owner, so a
            failed upgrade leaves the database as it was.
            Then it asks placed to refresh (as 'placectl refresh' does), unless --no-refresh; a
            placed that is not running loads the file when it starts. A database of this schema
            is left alone. The Debian package's postinst runs it on an upgrade.
            """,
        options: [
            .value("db", "PATH", help: "the database to upgrade (default \(ImportCommand.defaultDatabasePath))"),
            .flag("no-refresh", help: "do not ask placed to load the upgraded database"),
        ],
        sharedGroups: [Option.connectionGroup],
        epilogue: "Exit status: 0 upgraded or already current, 1 error (named on stderr; nothing changed), 2 usage.")

    static func run(_ context: Context) throws {
        let database = context.arguments.value("db") ?? ImportCommand.defaultDatabasePath
        guard !database.isEmpty else { throw UsageError("--db needs a path", command: spec.qualifiedName) }
        let start = monotonicSeconds()
        let outcome: PlaceFileUpgrade.Outcome
        let temporary = PlaceFileUpgrade.temporaryPath(for: database)
        RemoveOnInterrupt.add(temporary)
        defer { RemoveOnInterrupt.remove(temporary) }
        do {
            outcome = try PlaceFileUpgrade.upgrade(inPlace: database)
        } catch {
            throw CommandFailure(command: spec.qualifiedName, message: "\(error); the database is as it was")
        }
        switch outcome {
        case .alreadyCurrent:
            print("\(database) is of schema \(PlaceDatabase.schemaVersion) already: nothing to do")
            return
        case .upgraded(let from):
            // Past the rename: an error here is not "as it was", so it is reported as it comes.
            let places = try PlaceDatabase.open(path: database).placeCount
            let seconds = monotonicSeconds() - start
            print(
                "upgraded \(database) from schema \(from) to \(PlaceDatabase.schemaVersion) "
                    + "(\(places.grouped) places) in \(seconds.formatted(decimals: 2)) s")
        }
        guard !context.arguments.has("no-refresh") else { return }
        do {
            let client = try context.client()
            try client.refresh()
            print(Format.refreshed(try client.status()), terminator: "")
        } catch ClientError.unreachable {
            print("placed is not running: it loads the upgraded database when it starts")
        } catch let error as ClientError {
            throw AdvisedError(
                error: error,
                advice: "the database is upgraded; placed loads it on 'placectl refresh' (as root or a member "
                    + "of group placed) or when it restarts")
        }
    }
}
