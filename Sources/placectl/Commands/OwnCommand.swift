import PlacectlKit
import PlacedJSON
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// `placectl own ACTION ...`: the places the operator or user defines (add, remove, list, import,
/// export), over the varlink socket or D-Bus.
enum OwnCommand: Command {
    static let spec = CommandSpec(
        name: "own",
        abstract: "add, remove, list, import or export own places (sites you define)",
        synopsis: """
            add KEY NAME --at LAT,LON --radius M [--kind K] | remove ID... | list [--json] | \
            import FILE.geojson | export [FILE] [CONNECTION]
            """,
        discussion: """
            Own places are sites you define (a depot, a customer site, a gate), ranked with the
            OpenStreetMap places and kept by placed beside its selections, untouched by imports.
            Each has an id own:KEY (KEY: 1 to 64 of A-Z a-z 0-9 . _ -), a name and a kind, and is a
            circle (add, or a GeoJSON Point with properties.radius) or a polygon.
            add: puts one circle of radius M metres (1 to 10000). remove: deletes by id (own: may be
            left out). list: the own places (--json: the GeoJSON Features). import: puts every
            Feature of a GeoJSON FeatureCollection as one batch, all or nothing; a bad file is
            refused with the feature at fault and nothing is sent. export: writes the own places as
            a FeatureCollection to FILE, or to standard output. Changing needs root or group placed;
            listing and export also group placed-read.
            """,
        positionals: [
            Positional("ACTION", help: "add, remove, list, import or export"),
            Positional("ARGS...", help: "what the action takes", optional: true),
        ],
        options: [
            .value("at", "LAT,LON", help: "add: the centre, in degrees"),
            .value("radius", "M", help: "add: the radius in metres, 1 to 10000"),
            .value("kind", "K", help: "add: what the place is (default: own)"),
            .json,
        ],
        sharedGroups: [Option.connectionGroup],
        epilogue: "Exit status: 0 done, 1 refused or failed (nothing changed), 2 usage.")

    static func run(_ context: Context) throws {
        let arguments = context.arguments
        let action = arguments.positionals[0]
        let rest = Array(arguments.positionals.dropFirst())
        func usage(_ message: String) -> UsageError { UsageError(message, command: spec.qualifiedName) }
        func expect(_ range: ClosedRange<Int>, _ what: String) throws(UsageError) {
            guard range.contains(rest.count) else { throw usage("own \(action) takes \(what)") }
        }
        switch action {
        case "add":
            try expect(2...2, "KEY NAME")
            guard let at = arguments.value("at") else { throw usage("own add needs --at LAT,LON") }
            guard let radius = try arguments.number("radius") else { throw usage("own add needs --radius M") }
            let place = try OwnPlacesFile.place(
                key: rest[0], name: rest[1], at: at, radius: radius, kind: arguments.value("kind"))
            let reply = try context.client().putPlaces([place.geoJSON])
            try context.print(reply, readable: "put \(place.id)\n")
        case "remove":
            guard !rest.isEmpty else { throw usage("own remove takes ID...") }
            let reply = try context.client().deletePlaces(rest.map(OwnPlacesFile.id))
            let count = reply["count"]?.int ?? 0
            try context.print(reply, readable: "deleted \(count) of \(rest.count)\n")
        case "list":
            try expect(0...0, "no arguments")
            let reply = try context.client().ownPlaces()
            try context.print(reply, readable: OwnPlacesFile.listing(reply))
        case "import":
            try expect(1...1, "FILE.geojson")
            let places = try OwnPlacesFile.read(rest[0])
            let reply = try context.client().putPlaces(places.map(\.geoJSON))
            try context.print(reply, readable: "put \(reply["count"]?.int ?? 0) own places from \(rest[0])\n")
        case "export":
            try expect(0...1, "[FILE]")
            let reply = try context.client().ownPlaces()
            let collection: JSON = ["type": "FeatureCollection", "features": reply["places"] ?? .array([])]
            let text = try collection.serialized() + "\n"
            guard let path = rest.first, path != "-" else {
                print(text, terminator: "")
                return
            }
            do throws(SystemError) {
                let fd = try checkPOSIX(
                    open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644), "cannot write \(path)")
                defer { close(fd) }
                writeAll(fd, text)
            } catch {
                throw CommandFailure(command: spec.qualifiedName, message: error.description)
            }
        default:
            throw usage("unknown action '\(action)': add, remove, list, import or export")
        }
    }
}
