import PlacectlKit
import PlacedCore
import PlacedOSM
import PlacedJSON
import PlacedStore
import PlacedTestSupport
import PlacedWire

// placed-bench map: the map layer of the Helsinki import: the store's query around random points,
// the Map reply's size, and placectl map's drawing to SVG and to PNG.
#if canImport(Glibc)
    import Glibc
#endif

/// `placed-bench map [--runs N] [FILE.osm.pbf]`.
func runMapBenchmark(_ arguments: [String]) throws {
    var runs = 200
    var file = helsinkiExtractPath()
    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
        if argument == "--runs", let value = remaining.popFirst(), let n = Int(value), n > 0 {
            runs = n
        } else {
            file = argument
        }
    }
    guard access(file, R_OK) == 0 else { throw BenchmarkFailure("no \(file) to import") }
    let database = "/tmp/placed-bench-map.db"
    defer { unlink(database) }
    let extract = try OSM.extractPlaces(path: file)
    let features = extract.features ?? []
    try PlaceDatabase.replace(at: database, with: extract.places, mapFeatures: features)
    let store = try PlaceDatabase.open(path: database)

    // Centres inside the extract, away from its edges (a map there would be half empty).
    let all = features.map(\.bounds)
    let south = all.map(\.minLatitude).min()!
    let north = all.map(\.maxLatitude).max()!
    let west = all.map(\.minLongitude).min()!
    let east = all.map(\.maxLongitude).max()!
    var random = SplitMix64(seed: 17)
    let centres = (0..<runs).map { _ in
        Coordinate(
            latitude: south + (0.25 + 0.5 * random.uniform(in: 0...1)) * (north - south),
            longitude: west + (0.25 + 0.5 * random.uniform(in: 0...1)) * (east - west))
    }

    print("map: \(features.count) features from \(file.split(separator: "/").last ?? ""), \(runs) random centres")
    print("radius m  features p50  vertices p50  reply kB p50  query p50 us  query p99 us  encode p50 us")
    let viewRadius = MapScene.queryRadius(radius: 150, width: 800, height: 480)
    for radius in [150.0, viewRadius.rounded(), 500, 1000] {
        var counts: [Double] = []
        var vertices: [Double] = []
        var bytes: [Double] = []
        var query: [Double] = []
        var encode: [Double] = []
        for centre in centres {
            let start = BenchClock.now()
            let found = try store.features(within: radius, of: centre, limit: 5001)
            query.append(BenchClock.microseconds(since: start))
            counts.append(Double(found.count))
            vertices.append(Double(found.reduce(0) { $0 + $1.geometry.pointCount }))
            let encodeStart = BenchClock.now()
            let reply = try JSON.object(["features": .array(found.map { $0.geoJSON(language: "sv") })]).encoded()
            encode.append(BenchClock.microseconds(since: encodeStart))
            bytes.append(Double(reply.count) / 1000)
        }
        print(
            BenchFormat.pad(radius.formatted(decimals: 0), 8),
            BenchFormat.column(Percentiles(counts).p50, 13, decimals: 0),
            BenchFormat.column(Percentiles(vertices).p50, 13, decimals: 0),
            BenchFormat.column(Percentiles(bytes).p50, 13, decimals: 1),
            BenchFormat.column(Percentiles(query).p50, 13, decimals: 0),
            BenchFormat.column(Percentiles(query).p99, 13, decimals: 0),
            BenchFormat.column(Percentiles(encode).p50, 14, decimals: 0))
    }

    // placectl map: the drawing from a Map reply's features (what placectl receives), at 800×480.
    let drawings = min(runs, 40)
    var svgTimes: [Double] = []
    var pngTimes: [Double] = []
    var svgBytes: [Double] = []
    var pngBytes: [Double] = []
    let png = "/tmp/placed-bench-map.png"
    defer { unlink(png) }
    for centre in centres.prefix(drawings) {
        let found = try store.features(within: viewRadius, of: centre, limit: 5000)
        let wire = found.compactMap { MapFeature(geoJSON: $0.geoJSON(language: "sv")) }
        let projection = LocalProjection(origin: centre)
        let places = (0..<5).map {
            MapScene.RankedPlace(
                id: "osm:node/\($0)", name: "Place \($0 + 1)",
                coordinate: projection.coordinate(east: Double($0) * 20 - 40, north: Double($0 % 2) * 15),
                likelihood: 0.4 / Double($0 + 1))
        }
        let scene = MapScene(
            center: centre, radius: 150, features: wire, fix: .init(coordinate: centre, accuracy: 15), places: places,
            marker: .init(
                title: "Place 1", address: "Mannerheimintie 1, 00100 Helsinki", coordinate: places[0].coordinate))
        var svg = ""
        let start = BenchClock.now()
        svg = SVGMap(scene: scene, width: 800, height: 480).render()
        svgTimes.append(BenchClock.seconds(since: start) * 1000)
        svgBytes.append(Double(svg.utf8.count) / 1000)
        let pngStart = BenchClock.now()
        try MapPNG.write(svg: svg, width: 800, height: 480, to: png)
        pngTimes.append(BenchClock.seconds(since: pngStart) * 1000 + svgTimes.last!)
        pngBytes.append(Double(fileSize(png)) / 1000)
    }
    print("placectl map drawing, 150 m at 800x480 (\(drawings) centres): p50 ms  p99 ms  size kB p50")
    print(
        "  features → SVG            ", BenchFormat.column(Percentiles(svgTimes).p50, 6, decimals: 1),
        BenchFormat.column(Percentiles(svgTimes).p99, 7, decimals: 1),
        BenchFormat.column(Percentiles(svgBytes).p50, 12, decimals: 0))
    print(
        "  features → SVG → PNG      ", BenchFormat.column(Percentiles(pngTimes).p50, 6, decimals: 1),
        BenchFormat.column(Percentiles(pngTimes).p99, 7, decimals: 1),
        BenchFormat.column(Percentiles(pngBytes).p50, 12, decimals: 0))

    // The layer's share of the file: imported again without it.
    let bare = "/tmp/placed-bench-map-bare.db"
    defer { unlink(bare) }
    try PlaceDatabase.replace(at: bare, with: extract.places)
    let layerBytes = fileSize(database) - fileSize(bare)
    let area = squareKilometres(all)
    let perSquareKilometre = Double(layerBytes) / area
    print(
        "map layer: \(layerBytes / 1000) kB of a \(fileSize(database) / 1000) kB file (\(fileSize(bare) / 1000) kB"
            + " without) over \(area.formatted(decimals: 2)) km² = \((perSquareKilometre / 1000).formatted(decimals: 0)) kB/km²,"
            + " \((Double(features.count) / area).formatted(decimals: 0)) features/km²")
    // Finland: 338,000 km², most of it forest and lakes; Statistics Finland's urban settlements
    // (taajamat) cover about 6,400 km². A city centre is the densest case, so this is a ceiling.
    let urban = 6_400.0
    print(
        "at this density, Finland's urban settlements (\(Int(urban)) km²) would take"
            + " \((perSquareKilometre * urban / 1e9).formatted(decimals: 1)) GB: a ceiling, city centres being the densest"
    )
}
