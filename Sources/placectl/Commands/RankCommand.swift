import PlacectlKit

/// `placectl rank LAT LON`: a what-if ranking at any position; changes nothing.
enum RankCommand: Command {
    static let spec = CommandSpec(
        name: "rank",
        abstract: "rank the places around any position (a what-if query; changes nothing)",
        synopsis: "LAT LON [--accuracy M] [--limit N] [--language LANG] [--fields LIST] [--json] [CONNECTION]",
        discussion: """
            Ranks the places around LAT LON (decimal degrees, WGS 84; a negative number needs no
            '--') as placed would for a fix there, without changing its state. --fields as for
            'placectl places'.
            """,
        positionals: [
            Positional("LAT", help: "latitude in degrees, -90 to 90"),
            Positional("LON", help: "longitude in degrees, -180 to 180"),
        ],
        options: [
            .value(
                "accuracy", "M", help: "the fix's accuracy: the 95 % radius in metres (default: placed's assumption)"),
            .limit, .language, .fields, .json,
        ],
        sharedGroups: [Option.connectionGroup])

    static func run(_ context: Context) throws {
        let arguments = context.arguments
        func degrees(_ index: Int, _ name: String) throws(UsageError) -> Double {
            let text = arguments.positionals[index]
            guard let value = Double(text), value.isFinite else {
                throw UsageError("\(name) must be a number of degrees, not '\(text)'", command: spec.qualifiedName)
            }
            return value
        }
        let latitude = try degrees(0, "LAT")
        let longitude = try degrees(1, "LON")
        let accuracy = try arguments.number("accuracy", minimum: 0)
        let limit = try arguments.integer("limit")
        let reply = try context.client().rank(
            latitude: latitude, longitude: longitude, accuracy: accuracy, limit: limit)
        try context.print(reply, readable: Format.ranked(reply, fields: context.fields))
    }
}
