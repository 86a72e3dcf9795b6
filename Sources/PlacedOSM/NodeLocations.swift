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

/// Node locations for the ways that are places (and streets, addresses, map features), searched by
/// bisection over ids sorted as PBF files sort them (an unsorted file is sorted once in `finish()`).
///
/// Two ways to fill it. Keeping every node (`init()`, one pass over the file): 12 bytes a node of the
/// file. Keeping only the nodes some kept way references (`init(wanted:)`, the import's two-pass mode):
/// the ids are known before the nodes are read, and a node's location is kept only when it is one of
/// them, so memory follows the places and what they need, not the file: 12 bytes a wanted node.
struct NodeLocations {
    private var ids: [Int64] = []
    private var locations: [NodeLocation] = []
    private var isSorted = true
    /// Set in the two-pass mode: `ids` are the wanted ones, `locations` filled as they arrive.
    private let isFiltered: Bool
    private var found: [Bool] = []
    /// Where the last wanted node was found: nodes arrive in id order, so the next is at or after it.
    private var cursor = 0
    /// Nodes seen in the file, kept or not.
    private(set) var seen = 0

    init() { isFiltered = false }

    /// Keeps only `wanted` (any order, repeats allowed).
    init(wanted: [Int64]) {
        var ids = wanted
        ids.sort()
        var unique = 0
        for i in ids.indices where unique == 0 || ids[unique - 1] != ids[i] {
            ids[unique] = ids[i]
            unique += 1
        }
        ids.removeSubrange(unique...)
        self.ids = ids
        locations = [NodeLocation](repeating: NodeLocation(latitude: 0, longitude: 0), count: ids.count)
        found = [Bool](repeating: false, count: ids.count)
        isFiltered = true
    }

    /// Locations held (wanted ones, in the two-pass mode).
    var count: Int { ids.count }

    @inline(__always)
    mutating func append(id: Int64, location: NodeLocation) {
        seen += 1
        guard isFiltered else {
            if let last = ids.last, id <= last { isSorted = false }
            ids.append(id)
            locations.append(location)
            return
        }
        // Forward from the last hit (sorted files), else bisection.
        var position = cursor
        if position > 0 && ids[position - 1] >= id {
            position = lowerBound(id)  // the file went back: not sorted by id
        } else {
            while position < ids.count && ids[position] < id { position += 1 }
        }
        guard position < ids.count, ids[position] == id else {
            cursor = position
            return
        }
        locations[position] = location
        found[position] = true
        cursor = position + 1
    }

    /// Makes the arrays searchable: sorts them if the file was not sorted by id.
    mutating func finish() {
        guard !isSorted else { return }
        let order = ids.indices.sorted { ids[$0] < ids[$1] }
        ids = order.map { ids[$0] }
        locations = order.map { locations[$0] }
        isSorted = true
    }

    private func lowerBound(_ id: Int64) -> Int {
        ids.withUnsafeBufferPointer { ids in
            var low = 0
            var high = ids.count
            while low < high {
                let middle = (low + high) / 2
                if ids[middle] < id { low = middle + 1 } else { high = middle }
            }
            return low
        }
    }

    /// The location of node `id`, nil when the file does not have it (extracts cut at a boundary).
    func location(of id: Int64) -> NodeLocation? {
        let low = lowerBound(id)
        guard low < ids.count, ids[low] == id else { return nil }
        return !isFiltered || found[low] ? locations[low] : nil
    }
}
