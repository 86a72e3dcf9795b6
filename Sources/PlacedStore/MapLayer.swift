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
        let southWest = projection.coordinate(east: -radius, north: -radius)
        let northEast = projection.coordinate(east: radius, north: radius)
        do {
            return try database.reading { try features(southWest, northEast, projection, radius, limit) }
        } catch {
            throw Self.lift(error, path: path)
        }
    }

    private func features(
        _ southWest: Coordinate, _ northEast: Coordinate, _ projection: LocalProjection, _ radius: Double, _ limit: Int
    ) throws -> [MapFeature] {
        if boundsStatement == nil {
            boundsStatement = try database.prepare(
                """
                SELECT id, min_lat, max_lat, min_lon, max_lon FROM map_bounds
                WHERE max_lat >= ?1 AND min_lat <= ?2 AND max_lon >= ?3 AND min_lon <= ?4
                """)
        }
        let boxes = boundsStatement!
        defer { boxes.reset() }
        try boxes.bind(BoundsCoding.down(southWest.latitude), at: 1)
        try boxes.bind(BoundsCoding.up(northEast.latitude), at: 2)
        try boxes.bind(BoundsCoding.down(southWest.longitude), at: 3)
        try boxes.bind(BoundsCoding.up(northEast.longitude), at: 4)
        var near: [(distance: Double, rowid: Int64)] = []
        while try boxes.step() {
            let box = BoundingBox(
                minLatitude: BoundsCoding.degrees(boxes.int64(at: 1)),
                minLongitude: BoundsCoding.degrees(boxes.int64(at: 3)),
                maxLatitude: BoundsCoding.degrees(boxes.int64(at: 2)),
                maxLongitude: BoundsCoding.degrees(boxes.int64(at: 4)))
            let distance = box.distance(from: projection)
            if distance <= radius { near.append((distance, boxes.int64(at: 0))) }
        }
        near.sort { ($0.distance, $0.rowid) < ($1.distance, $1.rowid) }

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

    /// Writes the map layer into a new file's open transaction from its spill: rows in Z-order of their
    /// boxes' centres, so that a neighbourhood's rows share pages, each bound from its record's bytes;
    /// their boxes as a packed R-tree (`writeBounds`). Memory beyond the spill's 24 bytes a feature:
    /// the Z-order's sort keys (8 and the sort's scratch) and then its 4, and the tree's
    /// (`PackedRTree`), built once the spill's record starts and the order are given back.
    static func writeMapLayer(_ spill: MapFeatureSpill, into database: Database) throws {
        var boxes: [PackedRTree.Box]
        do {
            let order = zOrder(spill.boxes)
            try writeRows(spill, in: order, into: database)
            boxes = spill.takeBoxes()
            permute(&boxes, by: order)
        }
        try writeBounds(boxes, into: database)
    }

    /// `map_features`' rows, row n + 1 the spilled feature `order[n]`: read here, inserted on a thread
    /// of their own (`MapRowInserter`).
    private static func writeRows(_ spill: MapFeatureSpill, in order: [UInt32], into database: Database) throws {
        let rows = try MapRowInserter(into: database)
        defer { rows.stop() }
        let records = try spill.reader()
        for index in order {
            guard let record = try records.bytes(Int(index)) else {
                throw PlaceDatabaseError.corrupt(path: database.path, detail: MapRowInserter.undecodable(index))
            }
            rows.add(record: record, feature: index)
        }
        try rows.finish()
    }

    /// Rearranges `boxes` in place so that `boxes[n]` becomes the old `boxes[order[n]]` (`order` a
    /// permutation of their indices), following each cycle of it once: a bit a box to mark those moved,
    /// where a rearranged copy would take 16 bytes a box.
    static func permute(_ boxes: inout [PackedRTree.Box], by order: [UInt32]) {
        precondition(order.count == boxes.count, "an order of other boxes")
        var moved = [UInt64](repeating: 0, count: (boxes.count + 63) / 64)
        func isMoved(_ index: Int) -> Bool { moved[index >> 6] & (1 << UInt64(index & 63)) != 0 }
        for start in boxes.indices where !isMoved(start) {
            let first = boxes[start]
            var index = start
            while true {
                moved[index >> 6] |= 1 << UInt64(index & 63)
                let source = Int(order[index])
                if source == start {
                    boxes[index] = first
                    break
                }
                boxes[index] = boxes[source]
                index = source
            }
        }
    }

    /// `map_bounds` (entry n + 1: `boxes[n]`) built whole as a `PackedRTree` and written straight into
    /// the R*Tree's shadow tables: `map_bounds_node` (each node's number and blob, `RTreeNodeCoding`,
    /// the length of the root's, which the module reads as every node's), `map_bounds_rowid` (entry →
    /// its leaf) and `map_bounds_parent` (node → its parent). SQLite's own insert chooses a path,
    /// splits and reinserts box by box: on city-1M's 1.3 M boxes the import's map step took 20.8 s
    /// that way and 4.8 s packed, its rows included, and the packed nodes are fuller. The tables must
    /// hold only the empty root `CREATE VIRTUAL TABLE` made; `rtreecheck` accepts the result, and
    /// SQLite's own inserts and deletes work on it (MapLayerStoreTests).
    static func writeBounds(_ boxes: [PackedRTree.Box], into database: Database) throws {
        guard try database.scalarInt64("SELECT count(*) FROM map_bounds_node") == 1,
            try database.scalarInt64("SELECT count(*) FROM map_bounds_rowid") == 0,
            let rootLength = try database.scalarInt64("SELECT length(data) FROM map_bounds_node WHERE nodeno = 1"),
            rootLength >= 4 + RTreeNodeCoding.cellLength * 2
        else {
            throw SQLiteError(
                code: SQLITE_MISUSE, message: "map_bounds is not the empty tree CREATE VIRTUAL TABLE makes",
                operation: "writing map_bounds")
        }
        try database.allowShadowTableWrites()
        let nodeLength = Int(rootLength)
        let tree = PackedRTree(
            boxes: boxes, firstReference: 1, capacity: (nodeLength - 4) / RTreeNodeCoding.cellLength)

        let replaceRoot = try database.prepare("UPDATE map_bounds_node SET data = ?2 WHERE nodeno = ?1")
        let insertNode = try database.prepare("INSERT INTO map_bounds_node(nodeno, data) VALUES (?, ?)")
        var blob = [UInt8](repeating: 0, count: nodeLength)
        var leafOfEntry = [UInt32](repeating: 0, count: boxes.count)
        for number in 1...Int64(tree.nodeCount) {
            let cells = tree.nodeCells(number)
            RTreeNodeCoding.encode(cells, depth: number == 1 ? tree.depth : 0, into: &blob)
            let write = number == 1 ? replaceRoot : insertNode
            try write.bind(number, at: 1)
            try write.bind(blob: blob, at: 2)
            try write.step()
            write.reset()
            if number >= tree.firstLeaf {
                for cell in cells { leafOfEntry[Int(cell.reference) - 1] = UInt32(number) }
            }
        }
        let insertRowid = try database.prepare("INSERT INTO map_bounds_rowid(rowid, nodeno) VALUES (?, ?)")
        for (index, leaf) in leafOfEntry.enumerated() {
            try insertRowid.bind(Int64(index + 1), at: 1)
            try insertRowid.bind(Int64(leaf), at: 2)
            try insertRowid.step()
            insertRowid.reset()
        }
        let insertParent = try database.prepare("INSERT INTO map_bounds_parent(nodeno, parentnode) VALUES (?, ?)")
        for (index, parent) in tree.parents.enumerated().dropFirst() {
            try insertParent.bind(Int64(index + 1), at: 1)
            try insertParent.bind(parent, at: 2)
            try insertParent.step()
            insertParent.reset()
        }
    }

    /// The boxes' indices sorted by the Z-order (Morton) code of their centres, 16 bits a coordinate
    /// over the layer's extent (ties by index): each sorted as one word, code above index.
    static func zOrder(_ boxes: [PackedRTree.Box]) -> [UInt32] {
        precondition(boxes.count <= Int(UInt32.max), "more boxes than 32-bit indices reach")
        guard boxes.count > 1 else { return boxes.indices.map { UInt32($0) } }
        var minimum = boxes[0].doubledCentre
        var maximum = minimum
        for box in boxes {
            let centre = box.doubledCentre
            minimum = (min(minimum.latitude, centre.latitude), min(minimum.longitude, centre.longitude))
            maximum = (max(maximum.latitude, centre.latitude), max(maximum.longitude, centre.longitude))
        }
        let spanLatitude = Double(max(maximum.latitude - minimum.latitude, 1))
        let spanLongitude = Double(max(maximum.longitude - minimum.longitude, 1))
        func spread(_ value: UInt32) -> UInt64 {
            var x = UInt64(value & 0xFFFF)
            x = (x | x << 8) & 0x00FF_00FF
            x = (x | x << 4) & 0x0F0F_0F0F
            x = (x | x << 2) & 0x3333_3333
            x = (x | x << 1) & 0x5555_5555
            return x
        }
        var keys = boxes.indices.map { index in
            let centre = boxes[index].doubledCentre
            let code =
                spread(UInt32(Double(centre.latitude - minimum.latitude) / spanLatitude * 65535)) << 1
                | spread(UInt32(Double(centre.longitude - minimum.longitude) / spanLongitude * 65535))
            return code << 32 | UInt64(index)
        }
        keys.sort()
        return keys.map { UInt32(truncatingIfNeeded: $0) }
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
