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

/// Every node's location, for the ways that are places: ids and locations in two parallel arrays
/// sorted by id (12 bytes a node), searched by bisection. PBF files are sorted by id, so appending
/// keeps the order; an unsorted file is sorted once in `finish()`.
struct NodeLocations {
    private var ids: [Int64] = []
    private var locations: [NodeLocation] = []
    private var isSorted = true

    var count: Int { ids.count }

    @inline(__always)
    mutating func append(id: Int64, location: NodeLocation) {
        if let last = ids.last, id <= last { isSorted = false }
        ids.append(id)
        locations.append(location)
    }

    /// Makes the arrays searchable: sorts them if the file was not sorted by id.
    mutating func finish() {
        guard !isSorted else { return }
        let order = ids.indices.sorted { ids[$0] < ids[$1] }
        ids = order.map { ids[$0] }
        locations = order.map { locations[$0] }
        isSorted = true
    }

    /// The location of node `id`, nil when the file does not have it (extracts cut at a boundary).
    func location(of id: Int64) -> NodeLocation? {
        ids.withUnsafeBufferPointer { ids in
            var low = 0
            var high = ids.count
            while low < high {
                let middle = (low + high) / 2
                if ids[middle] < id { low = middle + 1 } else { high = middle }
            }
            return low < ids.count && ids[low] == id ? locations[low] : nil
        }
    }
}
