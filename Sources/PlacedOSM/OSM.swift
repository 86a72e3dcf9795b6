import PlacedCore

/// Reading places from OpenStreetMap .osm.pbf extracts (DESIGN.md "Place data").
public enum OSM {
    /// The places in an .osm.pbf file and, unless `mapLayer` is false, its map layer, with figures
    /// about the file, from one read.
    ///
    /// Nodes, ways and multipolygon relations make places and map features; other relations (routes,
    /// boundaries) are counted only. A multipolygon whose rings do not close, or whose members the
    /// file lacks, is skipped and named in `statistics.skippedRelations`. Every place gets an address
    /// when one is near (`AddressSource`). `progress` is called after each block of about 8,000
    /// elements, on this thread.
    public static func extractPlaces(
        path: String, mapLayer: Bool = true, progress: ((ImportProgress) -> Void)? = nil
    )
        throws(OSMError)
        -> PlaceExtract
    {
        let reader = try PBFReader(path: path)
        var decoder = PrimitiveBlockDecoder()
        var collector = ExtractCollector(includesMapLayer: mapLayer)
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
        let result = collector.finish()
        return PlaceExtract(
            places: result.places, features: mapLayer ? result.features : nil,
            statistics: OSMStatistics(
                nodes: collector.nodeCount, ways: collector.wayCount, relations: collector.relationCount,
                incompleteWays: result.incompleteWays, bytes: reader.totalBytes, multipolygons: result.multipolygons,
                skippedRelations: result.skipped))
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
    /// The map layer; nil when it was not asked for.
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

    public var elements: Int { nodes + ways + relations }
}
