import CZlib
import PlacedCore
import PlacedSystem
import PlacedTestSupport

// placed-bench synthesize: large synthetic .osm.pbf extracts written directly (DenseNodes, zlib), for the
// continental-scale benchmarks (issue 19). osmium reads them as any extract.
#if canImport(Glibc)
    import Glibc
#endif

/// The two shapes: a city centre (1,000 places a km², named streets, buildings with addresses) and
/// countryside (10 places a km², mostly unnamed roads). Both are blocks of the same make-up, laid out
/// in a square grid; only the block's size differs.
enum SyntheticShape: String, CaseIterable {
    case city, countryside

    /// A block's side, metres: 40.5 places on 0.04 km² or on 4 km².
    var blockMetres: Double { self == .city ? 200 : 2000 }
    /// Named streets among a block's 24 (the others unnamed).
    var namedStreets: Int { self == .city ? 8 : 1 }
}

/// What one block holds, the same in every block so that ids are a block's number times a constant:
/// 28 place nodes, 4 address nodes, 12 named buildings (places) and 16 unnamed ones of 4 nodes each,
/// 24 streets of 10 nodes, and a hexagonal multipolygon of 6 nodes whose outer ring is an untagged way
/// (a named park, a place, every other block; grass in the others). 390 nodes, 53 ways a block:
/// about 9.6 nodes a place.
enum SyntheticBlock {
    static let placeNodes = 28
    static let addressNodes = 4
    static let namedBuildings = 12
    static let buildings = 16
    static let streets = 24
    static let streetNodes = 10
    static let ringNodes = 6
    static let nodes = placeNodes + addressNodes + 4 * (namedBuildings + buildings) + streets * streetNodes + ringNodes
    static let ways = namedBuildings + buildings + streets + 1
    /// Places a block makes, on average.
    static let places = Double(placeNodes + namedBuildings) + 0.5

    static let kinds = [
        "amenity=cafe", "amenity=restaurant", "shop=bakery", "shop=clothes", "tourism=hotel", "office=company",
        "highway=bus_stop", "historic=memorial", "amenity=pharmacy", "shop=supermarket", "amenity=bank",
        "leisure=playground",
    ]
}

/// A synthetic extract of `blocks` blocks of `shape`: its grid and where each block lies.
struct SyntheticExtractLayout {
    let shape: SyntheticShape
    let blocks: Int
    let side: Int
    /// South-west corner of the grid.
    let origin = Coordinate(latitude: 48.0, longitude: 2.0)
    let metresPerDegreeLatitude: Double
    let metresPerDegreeLongitude: Double

    init(shape: SyntheticShape, places: Int) {
        self.shape = shape
        blocks = max(1, Int((Double(places) / SyntheticBlock.places).rounded(.up)))
        side = Int(Double(blocks).squareRoot().rounded(.up))
        // Degrees per metre at the grid's middle latitude, the same everywhere in it (a flat map is fine here).
        let middle = LocalProjection(
            origin: Coordinate(
                latitude: origin.latitude + Double(side) * shape.blockMetres / 2 / 111_000, longitude: origin.longitude)
        )
        metresPerDegreeLatitude = middle.metresPerDegreeLatitude
        metresPerDegreeLongitude = middle.metresPerDegreeLongitude
    }

    /// A point `east`, `north` metres into block `block`.
    func coordinate(block: Int, east: Double, north: Double) -> Coordinate {
        let row = block / side
        let column = block % side
        return Coordinate(
            latitude: origin.latitude + (Double(row) * shape.blockMetres + north) / metresPerDegreeLatitude,
            longitude: origin.longitude + (Double(column) * shape.blockMetres + east) / metresPerDegreeLongitude)
    }

    /// The grid's box.
    var bounds: BoundingBox {
        let far = coordinate(block: side * side - 1, east: shape.blockMetres, north: shape.blockMetres)
        return BoundingBox(
            minLatitude: origin.latitude, minLongitude: origin.longitude, maxLatitude: far.latitude,
            maxLongitude: far.longitude)
    }
}

/// `placed-bench synthesize --shape city|countryside --places N --out FILE.osm.pbf`
func runSynthesize(_ arguments: [String]) throws {
    var shape = SyntheticShape.city
    var places = 1_000_000
    var output: String?
    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
        guard let value = remaining.popFirst() else { throw BenchmarkUsage("\(argument) needs a value") }
        switch argument {
        case "--shape":
            guard let chosen = SyntheticShape(rawValue: value) else { throw BenchmarkUsage("--shape city|countryside") }
            shape = chosen
        case "--places": places = Int(value.replacing("_", with: "")) ?? places
        case "--out": output = value
        default: throw BenchmarkUsage("unknown option \(argument)")
        }
    }
    guard let output else { throw BenchmarkUsage("synthesize --shape city|countryside --places N --out FILE") }
    let start = BenchClock.now()
    let layout = SyntheticExtractLayout(shape: shape, places: places)
    try SyntheticPBFWriter.write(layout, to: output)
    let box = layout.bounds
    print(
        "synthesized \(output): \(shape.rawValue), \(layout.blocks) blocks, \(layout.blocks * SyntheticBlock.nodes) nodes,"
            + " \(layout.blocks * SyntheticBlock.ways) ways, \(layout.blocks) relations, about"
            + " \(Int(Double(layout.blocks) * SyntheticBlock.places)) places over"
            + " \((Double(layout.side) * shape.blockMetres / 1000).formatted(decimals: 0)) km square"
            + " (\(box.minLatitude.formatted(decimals: 2))…\(box.maxLatitude.formatted(decimals: 2)) N,"
            + " \(box.minLongitude.formatted(decimals: 2))…\(box.maxLongitude.formatted(decimals: 2)) E)"
            + " in \(BenchClock.seconds(since: start).formatted(decimals: 0)) s, \(fileSize(output) / 1_000_000) MB")
}

/// Writes the extract: every block's nodes, then every block's ways, then the relations, each block
/// regenerated from its own seed so nothing is held.
enum SyntheticPBFWriter {
    static func write(_ layout: SyntheticExtractLayout, to path: String) throws {
        guard let file = fopen(path + ".partial", "w") else { throw BenchmarkFailure("cannot write \(path)") }
        var blob = BlobWriter(file: file)
        var header = ProtoWriter()
        header.bytes(4, Array("OsmSchema-V0.6".utf8))
        header.bytes(4, Array("DenseNodes".utf8))
        header.bytes(16, Array("placed-bench synthesize".utf8))
        try blob.write(type: "OSMHeader", header.buffer)

        let nodesPerBlock = SyntheticBlock.nodes
        let blocksPerGroup = max(1, 8000 / nodesPerBlock)
        var block = 0
        while block < layout.blocks {
            let end = min(layout.blocks, block + blocksPerGroup)
            var strings = StringTableWriter()
            var ids: [Int64] = []
            var latitudes: [Int64] = []
            var longitudes: [Int64] = []
            var tags: [UInt32] = []
            for b in block..<end {
                for node in nodes(of: b, layout) {
                    ids.append(node.id)
                    latitudes.append(Int64((node.coordinate.latitude * 1e7).rounded()))
                    longitudes.append(Int64((node.coordinate.longitude * 1e7).rounded()))
                    for (key, value) in node.tags {
                        tags.append(strings.index(key))
                        tags.append(strings.index(value))
                    }
                    tags.append(0)
                }
            }
            var dense = ProtoWriter()
            dense.packedSigned(1, deltas(ids))
            dense.packedSigned(8, deltas(latitudes))
            dense.packedSigned(9, deltas(longitudes))
            dense.packedUnsigned(10, tags.map(UInt64.init))
            var group = ProtoWriter()
            group.bytes(2, dense.buffer)
            try blob.write(type: "OSMData", primitiveBlock(strings, [group.buffer]))
            block = end
        }

        let waysPerGroup = max(1, 8000 / SyntheticBlock.ways)
        block = 0
        while block < layout.blocks {
            let end = min(layout.blocks, block + waysPerGroup)
            var strings = StringTableWriter()
            var group = ProtoWriter()
            for b in block..<end {
                for way in ways(of: b, layout) {
                    var message = ProtoWriter()
                    message.varint(1, UInt64(way.id))
                    message.packedUnsigned(2, way.tags.map { UInt64(strings.index($0.0)) })
                    message.packedUnsigned(3, way.tags.map { UInt64(strings.index($0.1)) })
                    message.packedSigned(8, deltas(way.refs))
                    group.bytes(3, message.buffer)
                }
            }
            try blob.write(type: "OSMData", primitiveBlock(strings, [group.buffer]))
            block = end
        }

        let relationsPerGroup = 8000
        block = 0
        while block < layout.blocks {
            let end = min(layout.blocks, block + relationsPerGroup)
            var strings = StringTableWriter()
            var group = ProtoWriter()
            for b in block..<end {
                let tags: [(String, String)] =
                    b % 2 == 0
                    ? [("type", "multipolygon"), ("leisure", "park"), ("name", "Park \(b)")]
                    : [("type", "multipolygon"), ("landuse", "grass")]
                var message = ProtoWriter()
                message.varint(1, UInt64(b + 1))
                message.packedUnsigned(2, tags.map { UInt64(strings.index($0.0)) })
                message.packedUnsigned(3, tags.map { UInt64(strings.index($0.1)) })
                message.packedUnsigned(8, [UInt64(strings.index("outer"))])
                message.packedSigned(9, [ringWayID(of: b)])
                message.packedUnsigned(10, [1])
                group.bytes(4, message.buffer)
            }
            try blob.write(type: "OSMData", primitiveBlock(strings, [group.buffer]))
            block = end
        }
        fclose(file)
        guard rename(path + ".partial", path) == 0 else { throw BenchmarkFailure("cannot rename to \(path)") }
    }

    struct Node {
        let id: Int64
        let coordinate: Coordinate
        let tags: [(String, String)]
    }

    struct Way {
        let id: Int64
        let refs: [Int64]
        let tags: [(String, String)]
    }

    static func firstNode(of block: Int) -> Int64 { Int64(block * SyntheticBlock.nodes + 1) }
    static func firstWay(of block: Int) -> Int64 { Int64(block * SyntheticBlock.ways + 1) }
    static func ringWayID(of block: Int) -> Int64 { firstWay(of: block) + Int64(SyntheticBlock.ways - 1) }

    /// Block `block`'s nodes, in id order: places, addresses, buildings' corners, streets' vertices, the ring.
    static func nodes(of block: Int, _ layout: SyntheticExtractLayout) -> [Node] {
        var random = SplitMix64(seed: UInt64(block) &* 0x9E37_79B9 &+ 1)
        let size = layout.shape.blockMetres
        var id = firstNode(of: block)
        var nodes: [Node] = []
        nodes.reserveCapacity(SyntheticBlock.nodes)
        func add(_ east: Double, _ north: Double, _ tags: [(String, String)] = []) {
            nodes.append(
                Node(id: id, coordinate: layout.coordinate(block: block, east: east, north: north), tags: tags))
            id += 1
        }
        let street = "Street \(block % 997)"
        for i in 0..<SyntheticBlock.placeNodes {
            let kind = SyntheticBlock.kinds[Int(random.next() % UInt64(SyntheticBlock.kinds.count))].split(
                separator: "=")
            var tags = [("name", "Place \(block)-\(i)"), (String(kind[0]), String(kind[1]))]
            if i % 3 == 0 { tags += [("addr:street", street), ("addr:housenumber", "\(i + 1)")] }
            add(random.uniform(in: 0...size), random.uniform(in: 0...size), tags)
        }
        for i in 0..<SyntheticBlock.addressNodes {
            add(
                random.uniform(in: 0...size), random.uniform(in: 0...size),
                [("addr:street", street), ("addr:housenumber", "\(100 + i)")])
        }
        let house = size / 20
        for _ in 0..<(SyntheticBlock.namedBuildings + SyntheticBlock.buildings) {
            let east = random.uniform(in: 0...(size - house))
            let north = random.uniform(in: 0...(size - house))
            add(east, north)
            add(east + house, north)
            add(east + house, north + house)
            add(east, north + house)
        }
        for _ in 0..<SyntheticBlock.streets {
            // Across the block, west to east or south to north, wandering a little.
            let across = random.next() % 2 == 0
            var offset = random.uniform(in: 0...size)
            for step in 0..<SyntheticBlock.streetNodes {
                let along = size * Double(step) / Double(SyntheticBlock.streetNodes - 1)
                offset = min(size, max(0, offset + random.uniform(in: -size / 40...size / 40)))
                if across { add(along, offset) } else { add(offset, along) }
            }
        }
        let centre = (random.uniform(in: size / 4...size * 3 / 4), random.uniform(in: size / 4...size * 3 / 4))
        let radius = size / 8
        for corner in 0..<SyntheticBlock.ringNodes {
            let angle = Double(corner) * 2 * Double.pi / Double(SyntheticBlock.ringNodes)
            add(centre.0 + radius * cos(angle), centre.1 + radius * sin(angle))
        }
        return nodes
    }

    /// Block `block`'s ways, in id order: named buildings, unnamed ones, streets, the ring.
    static func ways(of block: Int, _ layout: SyntheticExtractLayout) -> [Way] {
        var id = firstWay(of: block)
        var node = firstNode(of: block) + Int64(SyntheticBlock.placeNodes + SyntheticBlock.addressNodes)
        var ways: [Way] = []
        func add(_ refs: [Int64], _ tags: [(String, String)]) {
            ways.append(Way(id: id, refs: refs, tags: tags))
            id += 1
        }
        let street = "Street \(block % 997)"
        for i in 0..<(SyntheticBlock.namedBuildings + SyntheticBlock.buildings) {
            let refs = [node, node + 1, node + 2, node + 3, node]
            node += 4
            if i < SyntheticBlock.namedBuildings {
                var tags = [("building", "yes"), ("name", "House \(block)-\(i)")]
                if i % 2 == 0 { tags += [("addr:street", street), ("addr:housenumber", "\(200 + i)")] }
                add(refs, tags)
            } else {
                add(
                    refs,
                    i % 4 == 0
                        ? [("building", "yes"), ("addr:street", street), ("addr:housenumber", "\(300 + i)")]
                        : [("building", "yes")])
            }
        }
        for i in 0..<SyntheticBlock.streets {
            let refs = (0..<SyntheticBlock.streetNodes).map { node + Int64($0) }
            node += Int64(SyntheticBlock.streetNodes)
            add(
                refs,
                i < layout.shape.namedStreets
                    ? [("highway", "residential"), ("name", "\(street) \(i)")]
                    : [("highway", i % 3 == 0 ? "track" : "service")])
        }
        add((0...SyntheticBlock.ringNodes).map { node + Int64($0 % SyntheticBlock.ringNodes) }, [])
        return ways
    }

    static func deltas(_ values: [Int64]) -> [Int64] {
        var previous: Int64 = 0
        return values.map { value in
            defer { previous = value }
            return value - previous
        }
    }

    static func primitiveBlock(_ strings: StringTableWriter, _ groups: [[UInt8]]) -> [UInt8] {
        var table = ProtoWriter()
        for string in strings.strings { table.bytes(1, Array(string.utf8)) }
        var block = ProtoWriter()
        block.bytes(1, table.buffer)
        for group in groups { block.bytes(2, group) }
        return block.buffer
    }
}

/// A PrimitiveBlock's string table being built (index 0 is the empty string, as the format wants).
struct StringTableWriter {
    private(set) var strings: [String] = [""]
    private var numbers: [String: UInt32] = ["": 0]

    mutating func index(_ string: String) -> UInt32 {
        if let known = numbers[string] { return known }
        let number = UInt32(strings.count)
        strings.append(string)
        numbers[string] = number
        return number
    }
}

/// Protocol Buffers encoding, what the PBF format needs of it.
struct ProtoWriter {
    var buffer: [UInt8] = []

    mutating func rawVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            buffer.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        buffer.append(UInt8(value))
    }

    mutating func varint(_ field: Int, _ value: UInt64) {
        rawVarint(UInt64(field << 3))
        rawVarint(value)
    }

    mutating func bytes(_ field: Int, _ value: [UInt8]) {
        rawVarint(UInt64(field << 3 | 2))
        rawVarint(UInt64(value.count))
        buffer += value
    }

    mutating func packedSigned(_ field: Int, _ values: [Int64]) {
        var packed = ProtoWriter()
        for value in values { packed.rawVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63))) }
        bytes(field, packed.buffer)
    }

    mutating func packedUnsigned(_ field: Int, _ values: [UInt64]) {
        var packed = ProtoWriter()
        for value in values { packed.rawVarint(value) }
        bytes(field, packed.buffer)
    }
}

/// Writes `[length][BlobHeader][Blob]` records, the blob zlib-compressed.
struct BlobWriter {
    let file: UnsafeMutablePointer<FILE>
    private var compressed = [UInt8](repeating: 0, count: 1 << 20)

    init(file: UnsafeMutablePointer<FILE>) { self.file = file }

    mutating func write(type: String, _ payload: [UInt8]) throws {
        var stream = z_stream()
        guard placed_deflate_init(&stream, 1) == Z_OK else { throw BenchmarkFailure("deflateInit failed") }
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, uLong(payload.count)))
        if compressed.count < bound { compressed = [UInt8](repeating: 0, count: bound) }
        var produced = 0
        payload.withUnsafeBytes { input in
            compressed.withUnsafeMutableBytes { output in
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
                stream.avail_in = uInt(input.count)
                stream.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(output.count)
                _ = deflate(&stream, Z_FINISH)
                produced = output.count - Int(stream.avail_out)
            }
        }
        var blob = ProtoWriter()
        blob.varint(2, UInt64(payload.count))
        blob.bytes(3, Array(compressed[0..<produced]))
        var header = ProtoWriter()
        header.bytes(1, Array(type.utf8))
        header.varint(3, UInt64(blob.buffer.count))
        var length = UInt32(header.buffer.count).bigEndian
        fwrite(&length, 4, 1, file)
        fwrite(header.buffer, 1, header.buffer.count, file)
        fwrite(blob.buffer, 1, blob.buffer.count, file)
        guard ferror(file) == 0 else {
            throw BenchmarkFailure("writing the extract failed: \(SystemError("fwrite").reason)")
        }
    }
}
