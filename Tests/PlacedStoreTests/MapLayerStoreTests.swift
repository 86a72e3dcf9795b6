import CSQLite
import Foundation
import PlacedCore
import PlacedTestSupport
import Testing

@testable import PlacedStore

/// The places file's map layer: what `features(within:of:limit:)` returns and leaves out, the
/// geometry and name encodings, localized names and address sources, and files without a layer.
@Suite struct MapLayerStoreTests {
    static let centre = Coordinate(latitude: 60.17, longitude: 24.94)
    static let projection = LocalProjection(origin: centre)

    static func at(_ east: Double, _ north: Double) -> Coordinate { projection.coordinate(east: east, north: north) }

    /// A building whose nearest corner is `east` metres east of the centre, 10 m on a side, its middle
    /// `north` metres north of it.
    static func building(_ number: Int, east: Double, north: Double = 0) -> MapFeature {
        let (south, top) = (north - 5, north + 5)
        let ring = [at(east, south), at(east + 10, south), at(east + 10, top), at(east, top), at(east, south)]
        return MapFeature(
            id: "osm:way/\(number)", kind: .building, featureClass: "yes", geometry: .polygons([[ring]]))
    }

    static let street = MapFeature(
        id: "osm:way/500", kind: .street, featureClass: "primary", name: "Mannerheimintie",
        localizedNames: ["sv": "Mannerheimvägen"], geometry: .line([at(-400, -3), at(400, -3)]))
    static let courtyard = MapFeature(
        id: "osm:relation/9", kind: .building, featureClass: "university",
        geometry: .polygons([
            [
                [at(-60, 20), at(-20, 20), at(-20, 60), at(-60, 60), at(-60, 20)],
                [at(-50, 30), at(-50, 50), at(-30, 50), at(-30, 30), at(-50, 30)],
            ],
            [[at(-80, 80), at(-70, 80), at(-70, 90), at(-80, 80)]],
        ]))
    /// Buildings every 50 m east: the nth's box is 50·n metres away.
    static let row = (0..<30).map { building($0 + 1, east: Double($0) * 50) }

    static func write(_ features: [MapFeature]?, places: [Place] = []) throws -> (PlaceDatabase, String) {
        let directory = NSTemporaryDirectory() + "placed-map-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/places.db"
        try PlaceDatabase.replace(at: path, with: places, mapFeatures: features)
        return (try PlaceDatabase.open(path: path), directory)
    }

    /// At a pole a degree of longitude is almost no metres: the box of a circle there was ±1e13 degrees,
    /// and turning it into whole 1e-7 degrees trapped (a `Map` call at latitude 90 stopped placed).
    /// On the antimeridian the circle's box is two arcs, a feature on the other side found.
    @Test func featuresAtThePolesAndAcrossTheAntimeridian() throws {
        func dot(_ number: Int, _ latitude: Double, _ longitude: Double) -> MapFeature {
            let corner = Coordinate(latitude: latitude, longitude: longitude)
            return MapFeature(
                id: "osm:way/\(number)", kind: .street, featureClass: "path", geometry: .line([corner, corner]))
        }
        let (database, directory) = try Self.write([
            dot(1, 89.9999, 135), dot(2, -89.9999, 0), dot(3, 0, 179.9999), dot(4, 0, -179.9999), dot(5, 0, 179.9),
        ])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(
            try database.features(within: 100, of: Coordinate(latitude: 90, longitude: 0), limit: 10).map(\.id) == [
                "osm:way/1"
            ])
        #expect(
            try database.features(within: 100, of: Coordinate(latitude: -90, longitude: 0), limit: 10).map(\.id) == [
                "osm:way/2"
            ])
        for longitude in [180.0, -180] {
            let ids = try database.features(within: 100, of: Coordinate(latitude: 0, longitude: longitude), limit: 10)
                .map(\.id)
            #expect(ids.sorted() == ["osm:way/3", "osm:way/4"], "both sides, 11 m away, once each; not 11 km away")
        }
    }

    @Test func featuresWithinTheRadiusNearestFirst() throws {
        let (database, directory) = try Self.write(Self.row + [Self.street, Self.courtyard])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(database.hasMapLayer && database.mapFeatureCount == 32)

        let found = try database.features(within: 175, of: Self.centre, limit: 100)
        let ids = found.map(\.id)
        // Boxes within 175 m: the street and the first building (0 m), buildings 2…4 (50, 100, 150 m),
        // the courtyard building (its box 20 m west, 20 m north).
        #expect(Set(ids) == Set(["osm:way/500", "osm:way/1", "osm:way/2", "osm:way/3", "osm:way/4", "osm:relation/9"]))
        #expect(Array(ids.prefix(2)).sorted() == ["osm:way/1", "osm:way/500"], "those at 0 m first")
        #expect(ids.suffix(3) == ["osm:way/2", "osm:way/3", "osm:way/4"])
        #expect(!ids.contains("osm:way/5"), "200 m away")

        #expect(try database.features(within: 175, of: Self.centre, limit: 3).count == 3)
        #expect(try database.features(within: 175, of: Self.centre, limit: 0).isEmpty)
        #expect(try database.features(within: 5000, of: Self.centre, limit: 1000).count == 32)
        #expect(try database.features(within: 100, of: Coordinate(latitude: 61, longitude: 25), limit: 10).isEmpty)

        // What was written comes back: kind, class, names, rings and holes, to OSM's 1e-7 degree.
        let street = try #require(found.first { $0.id == "osm:way/500" })
        #expect(street.kind == .street && street.featureClass == "primary")
        #expect(street.name(forLanguage: "sv_FI.UTF-8") == "Mannerheimvägen")
        #expect(street.name(forLanguage: "de") == "Mannerheimintie")
        let courtyard = try #require(found.first { $0.id == "osm:relation/9" })
        guard case .polygons(let polygons) = courtyard.geometry, case .polygons(let written) = Self.courtyard.geometry
        else {
            Issue.record("the courtyard building is an area")
            return
        }
        #expect(polygons.map(\.count) == [2, 1])
        for (ring, original) in zip(polygons.joined(), written.joined()) {
            #expect(ring.count == original.count)
            for (a, b) in zip(ring, original) {
                #expect(abs(a.latitude - b.latitude) <= 0.5e-7 && abs(a.longitude - b.longitude) <= 0.5e-7)
            }
        }
    }

    /// The stored boxes of `map_bounds` that overlap a box, by the R*Tree, as (id, box) sorted.
    static func rtreeQuery(_ database: Database, _ box: [Int64]) throws -> [[Int64]] {
        let query = try database.prepare(
            """
            SELECT id, min_lat, max_lat, min_lon, max_lon FROM map_bounds
            WHERE max_lat >= ?1 AND min_lat <= ?2 AND max_lon >= ?3 AND min_lon <= ?4 ORDER BY id
            """)
        for (index, value) in box.enumerated() { try query.bind(value, at: Int32(index + 1)) }
        var rows: [[Int64]] = []
        while try query.step() { rows.append((0..<5).map { query.int64(at: Int32($0)) }) }
        return rows
    }

    /// The packed tree written into the R*Tree's shadow tables is one SQLite's module checks, searches
    /// and keeps changing as its own: `rtreecheck` passes, its searches equal a scan of the same rows,
    /// and after SQLite's own deletes and inserts on a copy both still hold. 3,000 features: three
    /// levels at 51 cells a node.
    @Test func theBoundsTreeIsOneSQLitesModuleReadsAndChanges() throws {
        var random = SplitMix64(seed: 11)
        let features = (0..<3_000).map { number in
            Self.building(
                number + 1, east: random.uniform(in: -3_000...3_000), north: random.uniform(in: -3_000...3_000))
        }
        let (written, directory) = try Self.write(features)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let copy = directory + "/copy.db"
        try FileManager.default.copyItem(atPath: written.path, toPath: copy)
        let database = try Database(path: copy, mode: .readWrite)
        func scalarText(_ sql: String) throws -> String? {
            let statement = try database.prepare(sql)
            return try statement.step() ? statement.text(at: 0) : nil
        }
        #expect(try scalarText("SELECT rtreecheck('map_bounds')") == "ok")
        #expect(try database.scalarInt64("SELECT count(*) FROM map_bounds") == 3_000)
        // 59 leaves of 50 or 51, two nodes above them, the root: depth 2, in the root's first two bytes.
        #expect(try database.scalarInt64("SELECT count(*) FROM map_bounds_node") == 62)
        #expect(try scalarText("SELECT hex(substr(data, 1, 4)) FROM map_bounds_node WHERE nodeno = 1") == "00020002")
        // Packed in the rows' order: leaf n (nodes 4 … 62 under 2 and 3) holds a run of consecutive rows.
        let leaves = try database.prepare(
            """
            SELECT r.nodeno, min(r.rowid), max(r.rowid), count(*), p.parentnode FROM map_bounds_rowid r
            JOIN map_bounds_parent p ON p.nodeno = r.nodeno GROUP BY r.nodeno ORDER BY r.nodeno
            """)
        var nextRow: Int64 = 1
        var leafNumbers: [Int64] = []
        while try leaves.step() {
            leafNumbers.append(leaves.int64(at: 0))
            #expect(leaves.int64(at: 1) == nextRow && leaves.int64(at: 2) == nextRow + leaves.int64(at: 3) - 1)
            #expect([50, 51].contains(leaves.int64(at: 3)) && [2, 3].contains(leaves.int64(at: 4)))
            nextRow += leaves.int64(at: 3)
        }
        #expect(leafNumbers == Array(4...62) && nextRow == 3_001)

        // Every row with its box: the tree searched with a box holding the world.
        func allRows() throws -> [[Int64]] {
            try Self.rtreeQuery(database, [-900_000_000, 900_000_000, -1_800_000_000, 1_800_000_000])
        }
        func compareSearches(_ rows: [[Int64]], seed: UInt64) throws {
            var random = SplitMix64(seed: seed)
            let lower = Self.centre.latitude * 1e7, left = Self.centre.longitude * 1e7
            var found = 0
            for _ in 0..<200 {
                let latitude = Int64(lower + random.uniform(in: -300_000...300_000))
                let longitude = Int64(left + random.uniform(in: -600_000...600_000))
                let size = Int64(random.uniform(in: 0...80_000))
                let box = [latitude, latitude + size, longitude, longitude + size]
                let scan = rows.filter { $0[2] >= box[0] && $0[1] <= box[1] && $0[4] >= box[2] && $0[3] <= box[3] }
                #expect(try Self.rtreeQuery(database, box) == scan)
                found += scan.count
            }
            #expect(found > 200, "the searches found boxes to compare")
        }
        let rows = try allRows()
        #expect(rows.map { $0[0] } == Array(1...3_000))
        // Each feature's box, its ends rounded outward to the 1e-7 degree.
        let featureOfRow = try database.prepare("SELECT id FROM map_features WHERE rowid = ?")
        let bounds = Dictionary(uniqueKeysWithValues: features.map { ($0.id, $0.bounds) })
        for row in rows {
            try featureOfRow.bind(row[0], at: 1)
            #expect(try featureOfRow.step())
            let box = try #require(bounds[featureOfRow.text(at: 0) ?? ""])
            featureOfRow.reset()
            for (stored, degrees, outward) in [
                (row[1], box.minLatitude, -1.0), (row[2], box.maxLatitude, 1.0), (row[3], box.minLongitude, -1.0),
                (row[4], box.maxLongitude, 1.0),
            ] {
                let exact = degrees * 1e7
                #expect((Double(stored) - exact) * outward >= 0 && abs(Double(stored) - exact) < 1)
            }
        }
        try compareSearches(rows, seed: 12)

        // SQLite's own changes to the packed tree: a third deleted (nodes fall below its minimum and
        // are dissolved), new boxes inserted (nodes split).
        try database.execute("DELETE FROM map_bounds WHERE id % 3 = 0")
        try database.execute(
            """
            INSERT INTO map_bounds(id, min_lat, max_lat, min_lon, max_lon)
            SELECT id + 10000, min_lat + 500, max_lat + 600, min_lon - 700, max_lon FROM map_bounds WHERE id % 3 = 1
            """)
        #expect(try scalarText("SELECT rtreecheck('map_bounds')") == "ok")
        let changed = try allRows()
        let kept: [Int64] = (1...3_000).filter { $0 % 3 != 0 }
        let added: [Int64] = (1...3_000).filter { $0 % 3 == 1 }.map { $0 + 10_000 }
        #expect(changed.map { $0[0] } == kept + added)
        try compareSearches(changed, seed: 13)
    }

    /// Every row is its feature's, in the Hilbert order of the boxes' centres, numbered from 1: rows
    /// go in on a thread of their own in batches of 1,024, 64 an INSERT, so 12,353 features make twelve
    /// whole batches and a thirteenth of one whole statement and a tail of one row alone. With the
    /// least memory limit (1 MB) the spill orders them in two buckets (10,922 at most each); the file is the
    /// same.
    @Test(arguments: [PlaceFileWriter.defaultMemoryLimit, 1])
    func everyRowIsItsFeaturesInHilbertOrder(memoryLimit: Int) throws {
        var random = SplitMix64(seed: 29)
        let features = (0..<12_353).map { number in
            let east = random.uniform(in: -2_000...2_000), north = random.uniform(in: -2_000...2_000)
            switch number % 3 {
            case 0: return Self.building(number + 1, east: east, north: north)
            case 1:
                return MapFeature(
                    id: "osm:way/\(number + 1)", kind: .street, featureClass: "residential", name: "Katu \(number)",
                    localizedNames: number % 2 == 0 ? ["sv": "Gatan \(number)"] : [:],
                    geometry: .line([Self.at(east, north), Self.at(east + 30, north + 4)]))
            default:
                return MapFeature(
                    id: "osm:relation/\(number + 1)", kind: .water, featureClass: "pond", name: "",
                    geometry: Self.building(number, east: east, north: north).geometry)
            }
        }
        let directory = TemporaryDirectory()
        let path = directory.path + "/places.db"
        let writer = try PlaceFileWriter(path: path, memoryLimit: memoryLimit, mapLayer: true)
        for feature in features { writer.add(feature) }
        try writer.finish()
        let database = try Database(path: path, mode: .readOnly)
        let rows = try database.prepare(
            "SELECT rowid, id, kind, class, name, names, geometry FROM map_features ORDER BY rowid")
        let order = Self.hilbertOrder(features.map { BoundsCoding.box($0.bounds) })
        var count = 0
        while try rows.step() {
            let feature = features[order[count]]
            #expect(rows.int64(at: 0) == Int64(count + 1))
            #expect(rows.text(at: 1) == feature.id)
            #expect(rows.text(at: 2) == feature.kind.rawValue)
            #expect(rows.text(at: 3) == feature.featureClass)
            #expect(rows.text(at: 4) == feature.name)
            #expect(LocalizedNamesCoding.decode(rows.text(at: 5)) == feature.localizedNames)
            #expect(rows.withBlob(at: 6) { Array($0) } == MapGeometryCoding.encode(feature.geometry))
            count += 1
        }
        #expect(count == features.count)
    }

    /// The model of the rows' order: the boxes' indices sorted by their centres' place on the curve
    /// over all of them, ties by index.
    static func hilbertOrder(_ boxes: [PackedRTree.Box]) -> [Int] {
        var order = HilbertOrder()
        for box in boxes { order.include(box) }
        return boxes.indices.sorted { (order.code(of: boxes[$0]), $0) < (order.code(of: boxes[$1]), $1) }
    }

    /// Rows going into a `map_features` table alone in a new file, and a street's record, for `body`.
    static func withRowsIntoATable(_ body: (Database, MapRowInserter, [UInt8]) throws -> Void) throws {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.path + "/rows.db", mode: .readWriteCreate)
        try database.execute(
            "CREATE TABLE map_features(id TEXT, kind TEXT, class TEXT, name TEXT, names TEXT, geometry BLOB)")
        let rows = try MapRowInserter(into: database)
        defer { rows.stop() }
        var record: [UInt8] = []
        MapFeatureRecord.encode(Self.street, into: &record)
        try body(database, rows, record)
    }

    /// A record that does not decode fails the rows on their thread as the damage it is, naming the
    /// feature; the rows stop there (the import then throws its file away).
    @Test func aRecordThatDoesNotDecodeIsNamedByItsFeature() throws {
        try Self.withRowsIntoATable { database, rows, record in
            for feature in 0..<UInt32(1_500) {
                let bytes = feature == 1_100 ? Array(record.dropLast()) : record
                try bytes.withUnsafeBytes { try rows.add(record: $0, feature: feature * 2) }
            }
            #expect {
                try rows.finish()
            } throws: { error in
                let error = error as? SQLiteError
                return error?.code == SQLITE_CORRUPT
                    && error?.message == "map feature 2200's spilled row does not decode"
            }
            // The first batch and the second's first statement of 64 are in; none from the bad row's on.
            #expect(try database.scalarInt64("SELECT count(*) FROM map_features") == 1_024 + 64)
        }
    }

    /// Once the rows' thread has failed, adding more throws its failure within a few batches (at the
    /// latest with the fifth after the failed one: four may wait and one run while the next is handed
    /// over), so that an import stops reading records no row will take; no row from the failed
    /// statement on is in.
    @Test func aFailureStopsTheRowsBeingAddedSoon() throws {
        try Self.withRowsIntoATable { database, rows, record in
            let cut = Array(record.dropLast())
            var added = 0
            #expect {
                for feature in 0..<UInt32(100_000) {
                    try (feature == 10 ? cut : record).withUnsafeBytes { try rows.add(record: $0, feature: feature) }
                    added += 1
                }
            } throws: { error in
                (error as? SQLiteError)?.message == "map feature 10's spilled row does not decode"
            }
            #expect(added < 6 * MapRowInserter.batchSize, "\(added) rows added")
            #expect(throws: SQLiteError.self) { try rows.finish() }
            let inserted = try database.scalarInt64("SELECT count(*) FROM map_features")
            #expect(inserted == 0)
        }
    }

    /// A tree of more nodes than one batch of parent rows (60,000 boxes: 1,177 leaves, 24 nodes above,
    /// the root), written alone into an R*Tree: `rtreecheck` passes, every entry and node is mapped once,
    /// and the world's box finds every entry.
    @Test func aTreeOfManyNodesIsOneSQLiteChecks() throws {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.path + "/tree.db", mode: .readWriteCreate)
        try database.execute("CREATE VIRTUAL TABLE map_bounds USING rtree_i32(id, min_lat, max_lat, min_lon, max_lon)")
        try database.execute("BEGIN")
        var random = SplitMix64(seed: 43)
        let bounds = try MapBoundsTreeWriter(count: 60_000, into: database)
        #expect(bounds.tree.levels == [1_177, 24, 1])
        for _ in 0..<60_000 {
            let latitude = Int32.random(in: 600_000_000...610_000_000, using: &random)
            let longitude = Int32.random(in: 240_000_000...250_000_000, using: &random)
            try bounds.add(
                PackedRTree.Box(
                    minLatitude: latitude, maxLatitude: latitude + 900, minLongitude: longitude,
                    maxLongitude: longitude + 1_800))
        }
        try bounds.finish()
        try database.execute("COMMIT")
        let check = try database.prepare("SELECT rtreecheck('map_bounds')")
        #expect(try check.step() && check.text(at: 0) == "ok")
        #expect(try database.scalarInt64("SELECT count(*) FROM map_bounds_node") == 1_202)
        #expect(try database.scalarInt64("SELECT count(DISTINCT nodeno) FROM map_bounds_parent") == 1_201)
        #expect(try database.scalarInt64("SELECT count(DISTINCT rowid) FROM map_bounds_rowid") == 60_000)
        let found = try Self.rtreeQuery(database, [-900_000_000, 900_000_000, -1_800_000_000, 1_800_000_000])
        #expect(found.map { $0[0] } == Array(1...60_000))
    }

    /// Trees of one node and of two levels, and none: `rtreecheck` passes, the nodes and depth are
    /// those of a packed tree at 51 cells a node, and a search finds every box.
    @Test(arguments: [(0, 1, 0), (1, 1, 0), (51, 1, 0), (52, 3, 1)])
    func smallBoundsTrees(features count: Int, nodes: Int64, depth: Int) throws {
        let features = (0..<count).map {
            Self.building($0 + 1, east: Double($0 % 10) * 30, north: Double($0 / 10) * 30)
        }
        let (written, directory) = try Self.write(features)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(written.hasMapLayer && written.mapFeatureCount == count)
        let database = try Database(path: written.path, mode: .readOnly)
        let check = try database.prepare(
            "SELECT rtreecheck('map_bounds'), (SELECT hex(substr(data, 1, 2)) FROM map_bounds_node WHERE nodeno = 1)")
        #expect(try check.step())
        #expect(check.text(at: 0) == "ok")
        #expect(check.text(at: 1) == String(format: "%04X", depth))
        #expect(try database.scalarInt64("SELECT count(*) FROM map_bounds_node") == nodes)
        let found = try Self.rtreeQuery(database, [-900_000_000, 900_000_000, -1_800_000_000, 1_800_000_000])
        #expect(found.map { $0[0] } == Array(0..<Int64(count)).map { $0 + 1 })
    }

    @Test func badQueriesAndFilesWithoutALayerAreNamed() throws {
        let (database, directory) = try Self.write(Self.row)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for radius in [-1, Double.nan, .infinity] {
            #expect {
                try database.features(within: radius, of: Self.centre, limit: 10)
            } throws: { error in
                guard case .invalidMapQuery = error as? PlaceDatabaseError else { return false }
                return true
            }
        }
        #expect(throws: PlaceDatabaseError.self) {
            try database.features(within: 10, of: Coordinate(latitude: 91, longitude: 0), limit: 10)
        }
        #expect(throws: PlaceDatabaseError.self) { try database.features(within: 10, of: Self.centre, limit: -1) }

        let (bare, bareDirectory) = try Self.write(nil)
        defer { try? FileManager.default.removeItem(atPath: bareDirectory) }
        #expect(!bare.hasMapLayer && bare.mapFeatureCount == 0)
        #expect(throws: PlaceDatabaseError.noMapLayer(path: bare.path)) {
            try bare.features(within: 100, of: Self.centre, limit: 10)
        }
    }

    @Test func invalidFeaturesWriteNothing() throws {
        let (database, directory) = try Self.write(Self.row)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let open = MapFeature(
            id: "osm:way/1", kind: .building, featureClass: "yes",
            geometry: .polygons([[[Self.at(0, 0), Self.at(1, 0), Self.at(1, 1), Self.at(0, 1)]]]))
        let dot = MapFeature(id: "osm:way/2", kind: .path, featureClass: "footway", geometry: .line([Self.at(0, 0)]))
        for bad in [open, dot] {
            #expect {
                try PlaceDatabase.replace(at: database.path, with: [], mapFeatures: [bad])
            } throws: { error in
                guard case .invalidFeature(let id, _) = error as? PlaceDatabaseError else { return false }
                return id == bad.id
            }
        }
        #expect(try PlaceDatabase.open(path: database.path).mapFeatureCount == Self.row.count)
    }

    /// Features given to the writer one by one (as an import streams them) are checked as they come:
    /// a bad one, or any to a writer made without a map layer, is what `finish` throws, and the file
    /// already there stays as it was, no temporary file left.
    @Test func theWriterChecksEachFeatureAsItComes() throws {
        let (database, directory) = try Self.write(Self.row)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let dot = MapFeature(id: "osm:way/2", kind: .path, featureClass: "footway", geometry: .line([Self.at(0, 0)]))
        for (mapLayer, features, bad, reason) in [
            (
                true,
                [
                    Self.row[0], dot, Self.row[1],
                    MapFeature(id: "", kind: .path, featureClass: "", geometry: .line([])),
                ],
                dot, "a line of one point"
            ),
            (false, [Self.street, Self.row[0]], Self.street, "the file is written without a map layer"),
        ] {
            let writer = try PlaceFileWriter(path: database.path, mapLayer: mapLayer)
            for feature in features { writer.add(feature) }
            #expect(throws: PlaceDatabaseError.invalidFeature(id: bad.id, reason: reason)) { try writer.finish() }
        }
        #expect(try PlaceDatabase.open(path: database.path).mapFeatureCount == Self.row.count)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".new-") }
        #expect(leftovers.isEmpty)
    }

    /// Spilled features read back in the rows' order, each entry with its box and number and each
    /// record the row it was made from, names and all: in one bucket, and with the least bucket size
    /// in five (6,000 features, 1,365 at most a bucket). A cut or lengthened
    /// record does not decode.
    @Test func spilledRecordsReadBackInTheRowsOrder() throws {
        let directory = TemporaryDirectory()
        let named = MapFeature(
            id: "osm:way/7", kind: .street, featureClass: "residential", name: "Åkervägen \"A\"",
            localizedNames: ["fi": "Peltotie", "sv": "Åkervägen"], geometry: .line([Self.at(0, 0), Self.at(3, 4)]))
        let unnamed = MapFeature(
            id: "osm:relation/9", kind: .water, featureClass: "", name: "",
            geometry: MapLayerStoreTests.courtyard.geometry)
        var random = SplitMix64(seed: 31)
        let scattered = (0..<5_966).map {
            Self.building($0 + 100, east: random.uniform(in: -5_000...5_000), north: random.uniform(in: -5_000...5_000))
        }
        let features = [named, unnamed, Self.street, Self.courtyard] + Self.row + scattered
        #expect(features.count == 6_000)
        let boxes = features.map { BoundsCoding.box($0.bounds) }
        let order = Self.hilbertOrder(boxes)
        for (bucketBytes, bucketCount) in [(1 << 27, 1), (1 << 16, 5)] {
            let spill = try MapFeatureSpill(in: directory.path)
            for feature in features { try spill.add(feature) }
            #expect(spill.count == features.count)
            var visited: [Int] = []
            let buckets = try spill.hilbertBuckets(bucketBytes: bucketBytes)
            #expect(buckets.sizes.count == bucketCount && buckets.sizes.reduce(0, +) == features.count)
            try buckets.forEach { entry, bytes in
                let number = Int(entry.number)
                visited.append(number)
                let feature = features[number]
                #expect(entry.box == boxes[number])
                let record = try #require(MapFeatureRecord(bytes))
                #expect(record.kind == feature.kind)
                #expect(String(decoding: record.id, as: UTF8.self) == feature.id)
                #expect(String(decoding: record.featureClass, as: UTF8.self) == feature.featureClass)
                #expect(record.name.map { String(decoding: $0, as: UTF8.self) } == feature.name)
                let names = record.names.map { String(decoding: $0, as: UTF8.self) }
                #expect(LocalizedNamesCoding.decode(names) == feature.localizedNames)
                #expect((names == nil) == feature.localizedNames.isEmpty)
                #expect(Array(record.geometry) == MapGeometryCoding.encode(feature.geometry))
            }
            #expect(visited.count == order.count)
            let firstOutOfOrder = zip(visited, order).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            #expect(firstOutOfOrder == nil, "buckets of \(bucketBytes) bytes")
        }
        #expect(MemoryLayout<MapFeatureSpill.Entry>.size == 32)
        var bytes: [UInt8] = []
        MapFeatureRecord.encode(named, into: &bytes)
        #expect(bytes.withUnsafeBytes { MapFeatureRecord($0) } != nil)
        #expect(Array(bytes.dropLast()).withUnsafeBytes { MapFeatureRecord($0) } == nil, "a cut record")
        #expect((bytes + [0]).withUnsafeBytes { MapFeatureRecord($0) } == nil, "a byte too many")
        #expect(([99] + bytes.dropFirst()).withUnsafeBytes { MapFeatureRecord($0) } == nil, "an unknown kind")
        // An id, a class or a geometry marked absent (only a name and names may be).
        func record(absentAt field: Int) -> [UInt8] {
            var bytes: [UInt8] = [0]
            for index in 0..<5 {
                let value: [UInt8] = index == 4 ? MapGeometryCoding.encode(Self.street.geometry) : Array("x".utf8)
                let length = index == field ? UInt32.max : UInt32(value.count)
                withUnsafeBytes(of: length.littleEndian) { bytes.append(contentsOf: $0) }
                if index != field { bytes.append(contentsOf: value) }
            }
            return bytes
        }
        for field in 0..<5 {
            let decoded = record(absentAt: field).withUnsafeBytes { MapFeatureRecord($0) != nil }
            #expect(decoded == (field == 2 || field == 3), "field \(field) absent")
        }
    }

    /// Buckets along the curve: as few as the limit allows, each stretch in one, in order; at most
    /// 256; a crowded stretch stays whole.
    @Test func bucketsAreConsecutiveStretchesOfTheCurve() {
        typealias Plan = MapFeatureSpill.BucketPlan
        var random = SplitMix64(seed: 41)
        var counts = [Int](repeating: 0, count: Plan.stretches)
        for _ in 0..<6_000 { counts[Int(random.next() % UInt64(Plan.stretches))] += 1 }
        let plan = Plan(counts: counts, perBucketLimit: 1_365)
        #expect(plan.sizes.count == 5 && plan.sizes.reduce(0, +) == 6_000)
        #expect(plan.sizes.dropLast().allSatisfy { (1_200..<1_210).contains($0) }, "\(plan.sizes)")
        #expect(zip(plan.bucketOfStretch, plan.bucketOfStretch.dropFirst()).allSatisfy { $0 <= $1 })
        for bucket in plan.sizes.indices {
            let held = plan.bucketOfStretch.indices.filter { plan.bucketOfStretch[$0] == bucket }.map { counts[$0] }
            #expect(held.reduce(0, +) == plan.sizes[bucket])
        }
        #expect(Plan(counts: counts, perBucketLimit: 6_000).sizes == [6_000])

        var spread = [Int](repeating: 0, count: Plan.stretches)
        for stretch in 0..<1_024 { spread[stretch * 63] = 1 }
        let most = Plan(counts: spread, perBucketLimit: 1)
        // 256 buckets, not 1,024: four entries each where the limit is one.
        #expect(most.sizes == Array(repeating: 4, count: 256) && most.bucketOfStretch.last == 255)

        var crowded = [Int](repeating: 0, count: Plan.stretches)
        crowded[77] = 5_000
        crowded[78] = 1
        #expect(Plan(counts: crowded, perBucketLimit: 1_000).sizes == [5_000, 1])
    }

    @Test func placesKeepTheirAddressSourceAndNames() throws {
        let helsinki = Place(
            id: "osm:node/25389429", name: "Helsinki", kind: "public_transport=station", address: "near Kaivokatu",
            coordinate: Self.centre, addressSource: .street,
            localizedNames: ["fi": "Helsingin päärautatieasema", "sv": "Helsingfors centralstation", "zh-hant": "赫爾辛基"])
        let plain = Place(id: "osm:node/2", name: "Kiosk", kind: "shop=kiosk", coordinate: Self.at(10, 10))
        let (database, directory) = try Self.write(nil, places: [helsinki, plain])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let set = try database.load()
        let number = try #require(try set.placeIndex(ofID: helsinki.id))
        #expect(try set.place(at: number) == helsinki)
        #expect(try set.name(of: number, language: "sv-FI") == "Helsingfors centralstation")
        #expect(try set.name(of: number, language: "sv_FI.UTF-8") == "Helsingfors centralstation")
        #expect(try set.name(of: number, language: "zh-Hant-TW") == "赫爾辛基")
        #expect(try set.name(of: number, language: "en") == "Helsinki", "no name:en: the name tag")
        #expect(try set.name(of: number, language: "C") == "Helsinki")
        #expect(try set.name(of: number, language: nil) == "Helsinki")
        let kiosk = try set.place(at: try #require(try set.placeIndex(ofID: plain.id)))
        #expect(kiosk.addressSource == AddressSource.none && kiosk.localizedNames.isEmpty)

        var bad = plain
        bad.localizedNames = ["sv": "a\u{1E}b"]
        #expect(throws: PlaceDatabaseError.self) { try PlaceDatabase.replace(at: database.path, with: [bad]) }
    }

    @Test func aSchema2FileIsRefusedByName() throws {
        let (database, directory) = try Self.write(nil, places: [])
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Database(path: database.path, mode: .readWrite).execute(
            "UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        #expect(throws: PlaceDatabaseError.unsupportedSchema(path: database.path, version: "2")) {
            try PlaceDatabase.open(path: database.path)
        }
        #expect(
            PlaceDatabaseError.unsupportedSchema(path: "p", version: "2").description
                == "p is not a place database of schema version \(PlaceDatabase.schemaVersion) (found 2)")
    }

    @Test(arguments: [
        MapFeature.Geometry.line([
            Coordinate(latitude: -33.8688197, longitude: 151.2092955),
            Coordinate(latitude: 60.1699, longitude: -0.0000001),
        ]),
        .polygons([
            [
                [
                    Coordinate(latitude: 0, longitude: 0), Coordinate(latitude: 0, longitude: 179.9999999),
                    Coordinate(latitude: -89.9999999, longitude: 179.9999999), Coordinate(latitude: 0, longitude: 0),
                ]
            ]
        ]),
    ])
    func geometryCodingRoundTripsOSMCoordinatesExactly(geometry: MapFeature.Geometry) throws {
        let bytes = MapGeometryCoding.encode(geometry)
        #expect(bytes.withUnsafeBytes(MapGeometryCoding.decode) == geometry)
        #expect(Array(bytes.dropLast()).withUnsafeBytes(MapGeometryCoding.decode) == nil, "a cut BLOB")
        #expect((bytes + [0]).withUnsafeBytes(MapGeometryCoding.decode) == nil, "trailing bytes")
    }
}
