import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

/// Reading places from OpenStreetMap .osm.pbf extracts (docs/DESIGN.md, "Place data").
public enum OSM {
    /// The places in an .osm.pbf file and, unless `mapLayer` is false, its map layer, with figures
    /// about the file, from one read.
    ///
    /// Nodes, ways and multipolygon relations make places and map features; other relations (routes,
    /// boundaries) are counted only. A multipolygon whose rings do not close, or whose members the
    /// file lacks, is skipped and named in `statistics.skippedRelations`. Every place gets an address
    /// when one is near (`AddressSource`). `progress` is called after each block of about 8,000
    /// elements, on this thread.
    private struct Block {
        let offset: Int
        let size: Int
        let kinds: UInt8
    }

    public static func extractPlaces(
        path: String, mapLayer: Bool = true, passes: ImportPasses = .automatic(memoryLimit: ImportPasses.defaultLimit),
        scratchDirectory: String? = nil, progress: ((ImportProgress) -> Void)? = nil
    )
        throws(OSMError)
        -> PlaceExtract
    {
        let list = PlaceList()
        let features = mapLayer ? MapFeatureList() : nil
        var extract = try importPlaces(
            path: path, into: list, mapLayer: features, passes: passes, scratchDirectory: scratchDirectory,
            progress: progress)
        extract.places = list.places
        extract.features = features?.features
        return extract
    }

    /// The same into `sink`, which gets each place as it is made and then their addresses, and into
    /// `mapLayer` (nil: none), which gets each map feature, so that neither need be held in memory:
    /// `placectl import` streams both to the places file's writer. The extract returned has neither
    /// (the sinks have them).
    ///
    /// A file too large to read in memory (`passes`) is read from disk-backed structures made in
    /// `scratchDirectory` (default $TMPDIR, else /var/tmp), nameless files that vanish with the process:
    /// every node's location, the addresses by spatial tile.
    public static func importPlaces(
        path: String, into sink: PlaceSink, mapLayer: MapFeatureSink?,
        passes: ImportPasses = .automatic(memoryLimit: ImportPasses.defaultLimit),
        scratchDirectory: String? = nil, progress: ((ImportProgress) -> Void)? = nil
    )
        throws(OSMError)
        -> PlaceExtract
    {
        let reader = try PBFReader(path: path)
        var decoder = PrimitiveBlockDecoder()
        var collector = ExtractCollector(mapLayer: mapLayer, sink: sink)
        let twoPass = passes.readsTwice(fileBytes: reader.totalBytes)
        let passCount = twoPass ? 2 : 1
        /// The disk-backed locations' failure after a block, an order broken named with the extract's path.
        func check() throws(OSMError) {
            do {
                try collector.checkNodes()
            } catch {
                if case .unsorted(_, let detail) = error { throw .unsorted(path: path, detail: detail) }
                throw error
            }
        }
        /// One read: every block, recording each one's offset, size and kinds; or only `blocks`.
        func read(_ pass: Int, _ name: String, blocks: [Block]?) throws(OSMError) -> [Block] {
            var seen: [Block] = []
            let total = blocks?.reduce(0) { $0 + $1.size } ?? reader.totalBytes
            var done = 0
            func report() {
                progress?(
                    ImportProgress(
                        elements: collector.elementCount, bytesRead: done, totalBytes: total, pass: pass,
                        passes: passCount, passName: name))
            }
            // Read and decompressed a few blocks ahead on a second thread; decoded here in file order.
            let prefetcher = BlockPrefetcher(reader: reader, offsets: blocks?.map(\.offset))
            while let block = try prefetcher.next() {
                do {
                    try decoder.decode(block.bytes, into: &collector)
                } catch {
                    throw .corruptBlob(path: path, offset: block.offset, reason: error.reason)
                }
                try check()
                if blocks == nil {
                    seen.append(Block(offset: block.offset, size: block.end - block.offset, kinds: decoder.kinds))
                    done = block.end
                } else {
                    done += block.end - block.offset
                }
                report()
            }
            return seen
        }
        if twoPass {
            let directory = scratchDirectory ?? defaultScratchDirectory()
            collector.nodes = NodeLocations(file: try NodeLocationFile(in: directory))
            collector.addressSpill = try AddressSpill(
                in: directory,
                bucketCount: AddressSpill.bucketCount(fileBytes: reader.totalBytes, memoryLimit: passes.memoryLimit))
            collector.memoryLimit = passes.memoryLimit
            collector.pass = .nodesAndWays
            collector.startSpillWorker()
            let blocks = try read(1, "nodes and ways", blocks: nil)
            let wayBlocks = blocks.filter { $0.kinds & PrimitiveBlockDecoder.ElementKinds.ways != 0 }
            if collector.prepareMemberWays() > 0 {
                (decoder.decodesNodes, decoder.decodesWays, decoder.decodesRelations) = (false, true, false)
                decoder.decodesTags = false
                _ = try read(2, "multipolygon member ways", blocks: wayBlocks)
            }
        } else {
            _ = try read(1, "reading", blocks: nil)
        }
        let keptNodes = collector.nodes.count
        let nodeCount = collector.nodeCount
        let result = try collector.finish()
        return PlaceExtract(
            places: [], features: nil,
            statistics: OSMStatistics(
                nodes: nodeCount, ways: collector.wayCount, relations: collector.relationCount,
                incompleteWays: result.incompleteWays, bytes: reader.totalBytes, multipolygons: result.multipolygons,
                skippedRelations: result.skipped, keptNodes: keptNodes,
                passes: passCount, details: collector.detailStatistics))
    }

    /// The places in an .osm.pbf file.
    public static func readPlaces(path: String, progress: ((ImportProgress) -> Void)? = nil)
        throws(OSMError)
        -> [Place]
    {
        try extractPlaces(path: path, progress: progress).places
    }
}

/// How far an import has got: enough for a rate and an ETA.
public struct ImportProgress: Sendable, Equatable {
    /// Nodes, ways and relations decoded so far.
    public var elements: Int
    public var bytesRead: Int
    public var totalBytes: Int
    /// The read under way (1-based) of `passes`, and what it reads.
    public var pass: Int
    public var passes: Int
    public var passName: String

    public init(
        elements: Int, bytesRead: Int, totalBytes: Int, pass: Int = 1, passes: Int = 1, passName: String = "reading"
    ) {
        self.elements = elements
        self.bytesRead = bytesRead
        self.totalBytes = totalBytes
        self.pass = pass
        self.passes = passes
        self.passName = passName
    }

    /// Share of the file read, 0...1.
    public var fraction: Double {
        totalBytes > 0 ? min(1, Double(bytesRead) / Double(totalBytes)) : 1
    }
}

public struct PlaceExtract: Sendable {
    public var places: [Place]
    /// The map layer kept in memory (`extractPlaces`); nil when it was not asked for, and from
    /// `importPlaces`, whose map layer went to its sink.
    public var features: [MapFeature]?
    public var statistics: OSMStatistics

    /// How many places got their address from each source.
    public var addressSources: [AddressSource: Int] {
        places.reduce(into: [:]) { counts, place in counts[place.addressSource, default: 0] += 1 }
    }
}

public struct OSMStatistics: Sendable, Equatable {
    public var nodes: Int
    public var ways: Int
    public var relations: Int
    /// Ways that would be places but reference nodes the file lacks (cut by the extract's boundary).
    public var incompleteWays: Int
    /// File size.
    public var bytes: Int
    /// Multipolygon relations made into areas (for places, the map layer or addresses).
    public var multipolygons: Int = 0
    /// Multipolygon relations the import needed but could not make into areas.
    public var skippedRelations: [SkippedRelation] = []
    /// Node locations held in memory: every node in one read, none in the disk-backed import.
    public var keptNodes: Int = 0
    /// Reads of the file: 1 (everything in memory) or 2 (the disk-backed import: nodes and ways, then
    /// the multipolygons' member ways).
    public var passes: Int = 1
    /// What the places' details came to.
    public var details = DetailStatistics()

    public var elements: Int { nodes + ways + relations }
}

/// The places' details in an import: how many places have any, the `opening_hours` values placed cannot
/// parse (they are kept raw, and have no `open_now`) and the values dropped as longer than
/// `PlaceDetails.maximumValueLength`, the first few of each named.
public struct DetailStatistics: Sendable, Equatable {
    /// How many of each kind of problem are named.
    public static let examples = 5
    public var placesWithDetails = 0
    public var openingHours = 0
    public var unparsedOpeningHours = 0
    /// `osm:node/1: 'Mo-Fr 25:00': … out of range at offset 9`.
    public var unparsed: [String] = []
    public var droppedValues = 0
    /// `osm:node/1: opening_hours: 1048576 bytes`.
    public var dropped: [String] = []

    public init() {}
}

/// One read keeping everything in memory, or the disk-backed import in two reads (nodes and ways, then
/// the multipolygons' member ways), whose memory is bounded by the limit rather than the file.
public enum ImportPasses: Sendable, Equatable {
    case one
    case two
    /// One read when its memory (about `bytesPerFileByte` × the file) stays under the limit, else from disk.
    case automatic(memoryLimit: Int)

    /// 512 MiB: a country extract of a few hundred MB is read in two passes.
    public static let defaultLimit = 512 << 20
    /// What one read keeps per byte of .osm.pbf: 12 bytes a node and 2–3 a way ref, at 1–1.5 elements a
    /// byte for real extracts (measured on the synthetic ones too, `placed-bench import`).
    public static let bytesPerFileByte = 20

    /// The budget of the disk-backed import's buckets (addresses, their answers).
    var memoryLimit: Int {
        if case .automatic(let limit) = self { return limit }
        return Self.defaultLimit
    }

    func readsTwice(fileBytes: Int) -> Bool {
        switch self {
        case .one: false
        case .two: true
        case .automatic(let limit):
            fileBytes.multipliedReportingOverflow(by: Self.bytesPerFileByte).partialValue > limit
        }
    }
}

/// Where the disk-backed import's nameless files go unless told: $TMPDIR, else /var/tmp (on disk, where
/// /tmp may be memory).
func defaultScratchDirectory() -> String {
    if let value = getenv("TMPDIR"), value.pointee != 0 { return String(cString: value) }
    return "/var/tmp"
}
