import PlacedCore

/// Reading places from OpenStreetMap .osm.pbf extracts (DESIGN.md "Place data").
public enum OSM {
    /// The places in an .osm.pbf file, with figures about the file.
    ///
    /// Nodes and ways are read; relations (multipolygons, routes) are counted but not made into
    /// places. `progress` is called after each block of about 8,000 elements, on this thread.
    public static func extractPlaces(path: String, progress: ((ImportProgress) -> Void)? = nil)
        throws(OSMError)
        -> PlaceExtract
    {
        let reader = try PBFReader(path: path)
        var decoder = PrimitiveBlockDecoder()
        var collector = PlaceCollector()
        while let (block, offset) = try reader.nextDataBlock() {
            do {
                try decoder.decode(block, into: &collector)
            } catch {
                throw .corruptBlob(path: path, offset: offset, reason: error.reason)
            }
            progress?(
                ImportProgress(
                    elements: collector.elementCount, bytesRead: reader.bytesRead,
                    totalBytes: reader.totalBytes))
        }
        let (places, incompleteWays) = collector.finish()
        return PlaceExtract(
            places: places,
            statistics: OSMStatistics(
                nodes: collector.nodeCount, ways: collector.wayCount, relations: collector.relationCount,
                incompleteWays: incompleteWays, bytes: reader.totalBytes))
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

    public init(elements: Int, bytesRead: Int, totalBytes: Int) {
        self.elements = elements
        self.bytesRead = bytesRead
        self.totalBytes = totalBytes
    }

    /// Share of the file read, 0...1.
    public var fraction: Double {
        totalBytes > 0 ? min(1, Double(bytesRead) / Double(totalBytes)) : 1
    }
}

public struct PlaceExtract: Sendable {
    public var places: [Place]
    public var statistics: OSMStatistics
}

public struct OSMStatistics: Sendable, Equatable {
    public var nodes: Int
    public var ways: Int
    public var relations: Int
    /// Ways that would be places but reference nodes the file lacks (cut by the extract's boundary).
    public var incompleteWays: Int
    /// File size.
    public var bytes: Int

    public var elements: Int { nodes + ways + relations }
}
