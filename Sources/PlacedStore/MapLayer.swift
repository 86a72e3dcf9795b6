import CSQLite
import PlacedCore

extension PlaceDatabase {
    /// The map features whose bounding box comes within `radius` metres of `center`, nearest box
    /// first (then in file order), at most `limit`: what a map of that circle draws. The R*Tree
    /// finds the boxes that overlap the circle's box; those farther than `radius` are dropped before
    /// any geometry is read. To learn whether more than `limit` were there, ask for `limit + 1`.
    ///
    /// Throws `.noMapLayer` for a file imported with `--no-map`, `.invalidMapQuery` for a radius or
    /// limit below 0 (or not finite) or an invalid centre, `.corrupt` for a row that does not decode.
    public func features(within radius: Double, of center: Coordinate, limit: Int) throws(PlaceDatabaseError)
        -> [MapFeature]
    {
        guard radius.isFinite, radius >= 0 else { throw .invalidMapQuery(reason: "radius \(radius) is not >= 0") }
        guard limit >= 0 else { throw .invalidMapQuery(reason: "limit \(limit) is not >= 0") }
        guard center.isValid else { throw .invalidMapQuery(reason: "centre \(center) is not a valid position") }
        guard hasMapLayer else { throw .noMapLayer(path: path) }
        guard limit > 0 else { return [] }
        let projection = LocalProjection(origin: center)
        let box = SearchBox(radius: radius, around: projection)
        do {
            return try database.reading { try features(box, projection, radius, limit) }
        } catch {
            throw Self.lift(error, path: path)
        }
    }

    private func features(
        _ searchBox: SearchBox, _ projection: LocalProjection, _ radius: Double, _ limit: Int
    ) throws -> [MapFeature] {
        if boundsStatement == nil {
            boundsStatement = try database.prepare(
                """
                SELECT id, min_lat, max_lat, min_lon, max_lon FROM map_bounds
                WHERE max_lat >= ?1 AND min_lat <= ?2 AND max_lon >= ?3 AND min_lon <= ?4
                """)
        }
        let boxes = boundsStatement!
        var near: [(distance: Double, rowid: Int64)] = []
        try searchBox.forEachArc { west, east in
            defer { boxes.reset() }
            try boxes.bind(BoundsCoding.down(searchBox.minLatitude), at: 1)
            try boxes.bind(BoundsCoding.up(searchBox.maxLatitude), at: 2)
            try boxes.bind(BoundsCoding.down(west), at: 3)
            try boxes.bind(BoundsCoding.up(east), at: 4)
            while try boxes.step() {
                let box = BoundingBox(
                    minLatitude: BoundsCoding.degrees(boxes.int64(at: 1)),
                    minLongitude: BoundsCoding.degrees(boxes.int64(at: 3)),
                    maxLatitude: BoundsCoding.degrees(boxes.int64(at: 2)),
                    maxLongitude: BoundsCoding.degrees(boxes.int64(at: 4)))
                let distance = box.distance(from: projection)
                if distance <= radius { near.append((distance, boxes.int64(at: 0))) }
            }
        }
        near.sort { ($0.distance, $0.rowid) < ($1.distance, $1.rowid) }
        // A box that meets both arcs was found by each: its two finds are neighbours now.
        near.removeAdjacentDuplicates { $0.rowid == $1.rowid }

        if featureStatement == nil {
            featureStatement = try database.prepare(
                "SELECT id, kind, class, name, names, geometry FROM map_features WHERE rowid = ?")
        }
        let row = featureStatement!
        var features: [MapFeature] = []
        features.reserveCapacity(min(limit, near.count))
        for (_, rowid) in near.prefix(limit) {
            defer { row.reset() }
            try row.bind(rowid, at: 1)
            guard try row.step(), let kind = MapFeature.Kind(rawValue: row.text(at: 1) ?? ""),
                let geometry = row.withBlob(at: 5, MapGeometryCoding.decode)
            else {
                throw PlaceDatabaseError.corrupt(path: path, detail: "map feature \(rowid) does not decode")
            }
            features.append(
                MapFeature(
                    id: row.text(at: 0) ?? "", kind: kind, featureClass: row.text(at: 2) ?? "",
                    name: row.text(at: 3), localizedNames: LocalizedNamesCoding.decode(row.text(at: 4)),
                    geometry: geometry))
        }
        return features
    }

    /// Writes the map layer into a new file's open transaction from its spill: rows in the Hilbert
    /// order of their boxes' centres, so that a neighbourhood's rows share pages, each bound from its
    /// record's bytes on a thread of its own (`MapRowInserter`); their boxes, in the same order, as a
    /// packed Hilbert R-tree (`MapBoundsTreeWriter`), from a temporary file of them (16 bytes a
    /// feature) once the rows are in, so that one thread at a time uses the database. Memory: one of
    /// the spill's buckets (`bucketBytes`), then about a byte a feature for the tree. `progress` hears
    /// each step's name.
    static func writeMapLayer(
        _ spill: MapFeatureSpill, bucketBytes: Int, into database: Database, progress: ((String) -> Void)?
    ) throws {
        progress?("ordering \(spill.count) map features")
        let buckets = try spill.hilbertBuckets(bucketBytes: bucketBytes)
        let boxFile = try TemporaryFile(in: spill.directory)
        var boxWriter = FileWriter(descriptor: boxFile.descriptor, path: boxFile.name, offset: 0, buffer: 1 << 16)
        do {
            let rows = try MapRowInserter(into: database)
            defer { rows.stop() }
            progress?("writing \(spill.count) map features from \(counted(buckets.sizes.count, "bucket"))")
            try buckets.forEach { entry, record in
                try rows.add(record: record, feature: entry.number)
                try boxWriter.append(raw: entry.box)
            }
            try rows.finish()
        }
        try boxWriter.flush()
        let bounds = try MapBoundsTreeWriter(count: spill.count, into: database)
        progress?("writing the map's R*Tree (\(counted(bounds.tree.nodeCount, "node")))")
        let boxes = SpillReader(file: boxFile, size: boxWriter.offset)
        for _ in 0..<spill.count { try bounds.add(try boxes.read(as: PackedRTree.Box.self)) }
        try bounds.finish()
    }

    /// Bad input changes nothing: every feature is checked as it is added (`replace`: before a file is
    /// created; an import: before its file is renamed into place).
    static func validate(_ feature: MapFeature) throws(PlaceDatabaseError) {
        guard !feature.id.isEmpty else { throw .invalidFeature(id: "", reason: "empty id") }
        switch feature.geometry {
        case .line(let points):
            guard points.count >= 2 else { throw .invalidFeature(id: feature.id, reason: "a line of one point") }
        case .polygons(let polygons):
            guard !polygons.isEmpty, polygons.allSatisfy({ !$0.isEmpty }) else {
                throw .invalidFeature(id: feature.id, reason: "an area without rings")
            }
            for ring in polygons.joined() where ring.count < 4 || ring.first != ring.last {
                throw .invalidFeature(id: feature.id, reason: "a ring that is not closed or has under 3 corners")
            }
        }
        guard feature.geometry.allPoints.allSatisfy(\.isValid) else {
            throw .invalidFeature(id: feature.id, reason: "a coordinate that is not a valid position")
        }
    }
}

/// `map_bounds` (an `rtree_i32`): degrees as whole 1e-7 degrees, OSM's resolution, so a box is
/// exact; minima rounded down and maxima up, so the stored box never falls short of the feature.
enum BoundsCoding {
    static func down(_ degrees: Double) -> Int64 { Int64((degrees * 1e7).rounded(.down)) }
    static func up(_ degrees: Double) -> Int64 { Int64((degrees * 1e7).rounded(.up)) }
    static func degrees(_ stored: Int64) -> Double { Double(stored) / 1e7 }

    /// A valid position's box (within ±180°: 1.8e9 fits 32 bits), as stored.
    static func box(_ bounds: BoundingBox) -> PackedRTree.Box {
        PackedRTree.Box(
            minLatitude: Int32(down(bounds.minLatitude)), maxLatitude: Int32(up(bounds.maxLatitude)),
            minLongitude: Int32(down(bounds.minLongitude)), maxLongitude: Int32(up(bounds.maxLongitude)))
    }
}

/// A node of SQLite's R*Tree over two dimensions of 32-bit integers (`rtree_i32`), as rtree.c lays it
/// out: bytes 0–1 the tree's depth (in the root, node 1; zero elsewhere), 2–3 the cell count, then the
/// cells, each a 64-bit rowid or child node number and the four coordinates in the table's column
/// order (min_lat, max_lat, min_lon, max_lon), all big-endian; the rest zero.
enum RTreeNodeCoding {
    static let cellLength = 8 + 4 * 4

    static func encode(_ cells: [PackedRTree.Cell], depth: Int, into blob: inout [UInt8]) {
        precondition(4 + cells.count * cellLength <= blob.count, "more cells than a node holds")
        blob.withUnsafeMutableBytes { node in
            node.initializeMemory(as: UInt8.self, repeating: 0)
            node.storeBytes(of: UInt16(depth).bigEndian, toByteOffset: 0, as: UInt16.self)
            node.storeBytes(of: UInt16(cells.count).bigEndian, toByteOffset: 2, as: UInt16.self)
            var offset = 4
            for cell in cells {
                node.storeBytes(of: UInt64(bitPattern: cell.reference).bigEndian, toByteOffset: offset, as: UInt64.self)
                func store(_ coordinate: Int32, at index: Int) {
                    node.storeBytes(
                        of: UInt32(bitPattern: coordinate).bigEndian, toByteOffset: offset + 8 + 4 * index,
                        as: UInt32.self)
                }
                store(cell.box.minLatitude, at: 0)
                store(cell.box.maxLatitude, at: 1)
                store(cell.box.minLongitude, at: 2)
                store(cell.box.maxLongitude, at: 3)
                offset += cellLength
            }
        }
    }
}

/// `map_features.geometry` BLOB: a type byte (1 line, 2 polygons); for polygons a varint count, and
/// per polygon a varint ring count; per line or ring a varint point count, then the points as
/// zigzag varint differences of (latitude, longitude) in 1e-7 degree, OSM's own resolution, each
/// from the point before (the first from 0, 0). After the 1 m simplification a vertex costs about
/// 4 bytes.
enum MapGeometryCoding {
    static func encode(_ geometry: MapFeature.Geometry) -> [UInt8] {
        var bytes: [UInt8] = []
        encode(geometry, into: &bytes)
        return bytes
    }

    /// Appends `geometry`'s bytes.
    static func encode(_ geometry: MapFeature.Geometry, into bytes: inout [UInt8]) {
        var previous = (latitude: Int64(0), longitude: Int64(0))
        func varint(_ value: UInt64) {
            var value = value
            while value >= 0x80 {
                bytes.append(UInt8(value & 0x7F) | 0x80)
                value >>= 7
            }
            bytes.append(UInt8(value))
        }
        func zigzag(_ delta: Int64) { varint(UInt64(bitPattern: (delta << 1) ^ (delta >> 63))) }
        func points(_ points: [Coordinate]) {
            varint(UInt64(points.count))
            for point in points {
                let latitude = Int64((point.latitude * 1e7).rounded())
                let longitude = Int64((point.longitude * 1e7).rounded())
                zigzag(latitude - previous.latitude)
                zigzag(longitude - previous.longitude)
                previous = (latitude, longitude)
            }
        }
        switch geometry {
        case .line(let line):
            bytes.append(1)
            points(line)
        case .polygons(let polygons):
            bytes.append(2)
            varint(UInt64(polygons.count))
            for rings in polygons {
                varint(UInt64(rings.count))
                rings.forEach(points)
            }
        }
    }

    /// Nil for bytes `encode` does not write.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> MapFeature.Geometry? {
        var position = 0
        func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while position < bytes.count, shift < 64 {
                let byte = bytes[position]
                position += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            return nil
        }
        var previous = (latitude: Int64(0), longitude: Int64(0))
        func points() -> [Coordinate]? {
            guard let count = varint(), count <= UInt64(bytes.count) else { return nil }
            var points: [Coordinate] = []
            points.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let latitude = varint(), let longitude = varint() else { return nil }
                previous.latitude &+= Int64(bitPattern: latitude >> 1) ^ -Int64(bitPattern: latitude & 1)
                previous.longitude &+= Int64(bitPattern: longitude >> 1) ^ -Int64(bitPattern: longitude & 1)
                points.append(
                    Coordinate(latitude: Double(previous.latitude) / 1e7, longitude: Double(previous.longitude) / 1e7))
            }
            return points
        }
        guard !bytes.isEmpty else { return nil }
        let type = bytes[0]
        position = 1
        let geometry: MapFeature.Geometry
        switch type {
        case 1:
            guard let line = points() else { return nil }
            geometry = .line(line)
        case 2:
            guard let count = varint(), count <= UInt64(bytes.count) else { return nil }
            var polygons: [[[Coordinate]]] = []
            for _ in 0..<count {
                guard let ringCount = varint(), ringCount <= UInt64(bytes.count) else { return nil }
                var rings: [[Coordinate]] = []
                for _ in 0..<ringCount {
                    guard let ring = points() else { return nil }
                    rings.append(ring)
                }
                polygons.append(rings)
            }
            geometry = .polygons(polygons)
        default:
            return nil
        }
        return position == bytes.count ? geometry : nil
    }
}
