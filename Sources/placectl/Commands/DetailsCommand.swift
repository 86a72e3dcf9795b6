import PlacectlKit

/// `placectl details ID`: one place with its opening hours, contact and access, ranked or not.
enum DetailsCommand: Command {
    static let spec = CommandSpec(
        name: "details",
        abstract: "one place's details: opening hours, open now, phone, website, access",
        synopsis: "ID [--fields LIST] [--at TIME] [--language LANG] [--json] [CONNECTION]",
        discussion: """
            Shows the place with this id (osm:node/123, as 'placectl places' lists them), whether or
            not a ranking lists it: first whether it is open and when that changes, then one line
            per key: its OSM opening_hours, the day's open intervals, phone, website, email,
            wheelchair access, cuisine, brand, operator, level, description and the diet and payment
            tags. --fields names the keys to show (comma-separated; default every key). --at TIME:
            the instant the hours are evaluated at, RFC 3339 with a zone (2026-12-06T18:30:00+02:00);
            default now. The hours are evaluated in placed's zone (TimeZone=, else its TZ or
            /etc/localtime).
            """,
        positionals: [Positional("ID", help: "the place's id, e.g. osm:node/123")],
        options: [
            .fields,
            .value("at", "TIME", help: "evaluate the opening hours at TIME (RFC 3339 with a zone; default: now)"),
            .language, .json,
        ],
        sharedGroups: [Option.connectionGroup])

    static func run(_ context: Context) throws {
        let reply = try context.client().details(
            id: context.arguments.positionals[0], time: context.arguments.value("at"))
        try context.print(reply, readable: Format.details(reply, fields: context.fields))
    }
}
