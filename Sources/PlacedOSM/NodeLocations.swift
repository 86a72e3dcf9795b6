import PlacedCore

/// A node's location in 1e-7 degrees, OSM's own resolution.
struct NodeLocation: Equatable {
    var latitude: Int32
    var longitude: Int32

    var coordinate: Coordinate {
        // Division, not multiplication by 1e-7: the nearest Double to the decimal OSM stored.
        Coordinate(latitude: Double(latitude) / 1e7, longitude: Double(longitude) / 1e7)
    }
}

/// Node locations for the ways that are places (and streets, addresses, map features).
///
/// Two ways to hold them. In memory (`init()`, the one-read import): 12 bytes a node of the file,
/// searched by bisection over ids sorted as PBF files sort them (an unsorted file is sorted once in
/// `finish()`). On disk (`init(file:)`, the import of files too large for that): every node in a
/// `NodeLocationFile`, a few MB of page index in memory whatever the file's size.
struct NodeLocations {
    private var ids: [Int64] = []
    private var locations: [NodeLocation] = []
    private var isSorted = true
    private var file: NodeLocationFile?
    /// Nodes seen in the file.
    private(set) var seen = 0

    init() {}

    init(file: NodeLocationFile) { self.file = file }

    /// Locations held in memory.
    var count: Int { ids.count }

    /// The disk-backed mode's first failure (nodes out of order, a write).
    var failure: OSMError? { file?.failure }

    @inline(__always)
    mutating func append(id: Int64, location: NodeLocation) {
        seen += 1
        if let file {
            file.append(id: id, location: location)
            return
        }
        if let last = ids.last, id <= last { isSorted = false }
        ids.append(id)
        locations.append(location)
    }

    /// Makes the locations searchable: sorts them if the file was not sorted by id, or maps the disk file.
    mutating func finish() throws(OSMError) {
        if let file {
            try file.finishWriting()
            return
        }
        guard !isSorted else { return }
        let order = ids.indices.sorted { ids[$0] < ids[$1] }
        ids = order.map { ids[$0] }
        locations = order.map { locations[$0] }
        isSorted = true
    }

    /// The location of node `id`, nil when the file does not have it (extracts cut at a boundary).
    func location(of id: Int64) -> NodeLocation? {
        if let file { return file.location(of: id) }
        let low = ids.withUnsafeBufferPointer { $0.firstIndex(notBelow: id) }
        return low < ids.count && ids[low] == id ? locations[low] : nil
    }
}
