import PlacectlKit
import PlacedCore
import PlacedJSON
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// `placectl map`: the map around the device (or a given point) with the own places' outlines, the
/// fix, the ranked places and the marker, as SVG or PNG.
enum MapCommand: Command {
    static let defaultRadius = 150.0
    /// placed's bound on `Map`'s radius (etc/io.placed.Places.varlink).
    static let maximumQueryRadius = 1000.0

    static let spec = CommandSpec(
        name: "map",
        abstract: "draw the map around the device: the fix, the ranked places and the marker (SVG or PNG)",
        synopsis: "[--at LAT,LON] [--radius M] [--output FILE] [--size WxH] [--limit N] [--language LANG] [CONNECTION]",
        discussion: """
            Draws the streets, buildings, water and green areas placed imported around the current
            location (or LAT,LON), the own places' outlines (circles and polygons, holes left open)
            with their names, the fix with its accuracy circle (the 95 % radius), the ranked
            places as numbered pins with their likelihoods, and the marker with its title, address
            and hours ("open until 21:00"). Writes SVG to standard output, or to FILE: PNG when FILE ends in .png (through
            rsvg-convert, Debian package librsvg2-bin). Place and street names follow --language,
            else LC_ALL, LC_MESSAGES or LANG, else placed's Language=, falling back to each name
            tag. Needs the varlink socket (D-Bus has no map) and a places file imported with its
            map layer.
            """,
        options: [
            .value("at", "LAT,LON", help: "the map's centre (default: the current location)"),
            .value(
                "radius", "M", help: "metres from the centre to the top and bottom edges (default 150, at most 500)"),
            .value("output", "FILE", help: "write to FILE (.png: PNG, else SVG) instead of standard output"),
            .value("size", "WxH", help: "picture size in pixels (default 800x480)"),
            .limit, .language,
        ],
        sharedGroups: [Option.connectionGroup])

    static func run(_ context: Context) throws {
        let arguments = context.arguments
        let command = spec.qualifiedName
        let center = try arguments.value("at").map { text throws(UsageError) in try coordinate(text) }
        let radius = try arguments.number("radius", minimum: 10) ?? defaultRadius
        guard radius <= 500 else {
            throw UsageError("--radius expects at most 500 metres, not \(radius)", command: command)
        }
        let (width, height) = try size(arguments.value("size") ?? "800x480")
        let limit = try arguments.integer("limit", maximum: 20)
        guard let client = try context.client() as? VarlinkClient else {
            throw ClientError.unsupported("placectl map needs placed's varlink socket: D-Bus has no map")
        }
        let current = try client.current(limit: limit)
        let status = try client.status()
        let location = current["location"]
        guard
            let middle = center
                ?? location.flatMap({ location in
                    location["latitude"]?.double.flatMap { latitude in
                        location["longitude"]?.double.map { Coordinate(latitude: latitude, longitude: $0) }
                    }
                })
        else {
            throw CommandFailure(
                command: command, message: "placed has no location yet: give the centre with --at LAT,LON")
        }
        var parameters: [String: JSON] = [
            "latitude": .number(middle.latitude), "longitude": .number(middle.longitude),
            "radius": .number(
                min(MapScene.queryRadius(radius: radius, width: width, height: height), maximumQueryRadius)),
        ]
        if let language = client.language { parameters["language"] = .string(language) }
        let map = try client.call("Map", parameters)
        let queryRadius = parameters["radius"]?.double ?? radius
        let own = MapScene.ownPlaces(
            try client.ownPlaces()["places"]?.array ?? [], within: queryRadius, of: middle)
        // The marker's hours on its label; a placed without Details (or a place gone since) has none.
        let markerHours = status["marker"]?["place"]?["id"]?.string.flatMap { id in
            (try? client.details(id: id, time: nil)).flatMap {
                MapScene.Marker.hours(details: $0["place"], now: Int(time(nil)))
            }
        }
        let scene = try MapScene(
            current: current, status: status, map: map, center: middle, radius: radius, markerHours: markerHours,
            ownPlaces: own)
        let svg = SVGMap(scene: scene, width: width, height: height).render()

        guard let output = arguments.value("output") else {
            print(svg, terminator: "")
            return
        }
        do {
            if output.lowercased().hasSuffix(".png") {
                try MapPNG.write(svg: svg, width: width, height: height, to: output)
            } else {
                try write(svg, to: output)
            }
        } catch {
            throw CommandFailure(command: command, message: "\(error)")
        }
        print(
            "map written to \(output): \(width)×\(height), \(scene.features.count.grouped) features, "
                + (scene.ownPlaces.isEmpty ? "" : "\(scene.ownPlaces.count) own places, ")
                + "\(scene.places.count) places" + (scene.marker == nil ? "" : ", the marker"))
    }

    /// `60.17,24.94`.
    static func coordinate(_ text: String) throws(UsageError) -> Coordinate {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2, let latitude = Double(parts[0].filter { $0 != " " }),
            let longitude = Double(parts[1].filter { $0 != " " }),
            Coordinate(latitude: latitude, longitude: longitude).isValid
        else {
            throw UsageError(
                "--at expects LAT,LON in degrees (latitude within ±90, longitude within ±180), not '\(text)'",
                command: spec.qualifiedName)
        }
        return Coordinate(latitude: latitude, longitude: longitude)
    }

    /// `800x480`.
    static func size(_ text: String) throws(UsageError) -> (Int, Int) {
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let width = Int(parts[0]), let height = Int(parts[1]), (64...8192).contains(width),
            (64...8192).contains(height)
        else {
            throw UsageError("--size expects WxH, each 64 to 8192 pixels, not '\(text)'", command: spec.qualifiedName)
        }
        return (width, height)
    }

    static func write(_ text: String, to path: String) throws(MapPNG.Failure) {
        do throws(SystemError) {
            let fd = try checkPOSIX(open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644), "cannot write \(path)")
            defer { close(fd) }
            let bytes = Array(text.utf8)
            var done = 0
            while done < bytes.count {
                let n = try retryingOnInterrupt("cannot write \(path)") {
                    bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
                }
                guard n > 0 else { throw SystemError("cannot write \(path)", errno: EIO) }
                done += n
            }
        } catch {
            throw .system(error.description)
        }
    }
}
