import PlacedCore
import PlacedJSON
import PlacedStore
import PlacedSystem
import PlacedVarlink

@testable import PlacedDaemon

let fuzzCentre = Coordinate(latitude: 60.1699, longitude: 24.9384)

/// A daemon as placed runs it, in this process: a static source at Helsinki, a places file of three
/// places and a small map layer, its varlink adapter on a socket in a directory of its own. The
/// varlink and placed-web targets serve their inputs against it.
public final class FuzzDaemon {
    public let directory = makeScratchDirectory("placed-fuzz-daemon")
    public let loop: EventLoop
    public let daemon: Daemon
    let source: StaticSource
    let adapter: VarlinkAdapter
    public var socketPath: String { directory + "/io.placed.Places" }

    public init() throws {
        Log.minimumPriority = .error
        let projection = LocalProjection(origin: fuzzCentre)
        let places = [
            Place(id: "osm:node/1", name: "Kahvila", kind: "amenity=cafe", coordinate: fuzzCentre),
            Place(
                id: "osm:node/2", name: "Kirjasto", kind: "amenity=library", address: "Kirjastokatu 1",
                coordinate: projection.coordinate(east: 12, north: 0), addressSource: .building,
                localizedNames: ["sv": "Bibliotek"]),
            Place(
                id: "osm:node/3", name: "Apteekki", kind: "amenity=pharmacy",
                coordinate: projection.coordinate(east: 0, north: 25)),
        ]
        let layer = [
            MapFeature(
                id: "osm:way/1", kind: .street, featureClass: "primary", name: "Mannerheimintie",
                localizedNames: ["sv": "Mannerheimvägen"],
                geometry: .line([projection.coordinate(east: -40, north: 0), projection.coordinate(east: 40, north: 0)])
            ),
            MapFeature(
                id: "osm:way/2", kind: .building, featureClass: "yes",
                geometry: .polygons([
                    [
                        [(0, 0), (10, 0), (10, 10), (0, 10), (0, 0)].map {
                            projection.coordinate(east: $0.0, north: $0.1)
                        }
                    ]
                ])),
        ]
        try PlaceDatabase.replace(at: directory + "/places.db", with: places, mapFeatures: layer)
        writeFile(directory + "/placed.conf", Array("[Location]\nDistanceFilter=50\n".utf8))
        let loader = ConfigurationLoader(arguments: [
            "--config", directory + "/placed.conf", "--db", directory + "/places.db", "--static",
            "\(fuzzCentre.latitude),\(fuzzCentre.longitude),8", "--bus", "none", "--socket",
            directory + "/io.placed.Places",
        ])
        let configuration = try loader.reload()
        loop = try EventLoop()
        daemon = try Daemon(configuration: configuration, loop: loop)
        source = StaticSource(loop: loop, coordinate: fuzzCentre, accuracy: 8)
        adapter = try VarlinkAdapter(service: daemon, loop: loop, listener: .path(directory + "/io.placed.Places"))
        daemon.subscribe(adapter)
        source.start(delivering: daemon)
        for _ in 0..<1000 where daemon.latestRanking == nil { try loop.runOnce(timeout: 10_000) }
        guard daemon.latestRanking != nil else { fatalError("the daemon ranked nothing") }
    }

    /// Client connections placed still holds.
    public var connectionCount: Int { adapter.server.connectionCount }
}
