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
/// them, so memory follows what the places need, not the file: 12 bytes a wanted node (the id's low 32
/// bits and the location; the high bits once per run of ids that share them).
struct NodeLocations {
    private var ids: [Int64] = []
    private var locations: [NodeLocation] = []
    private var isSorted = true
    /// The two-pass mode's wanted ids; `locations` is filled as they arrive, `missing` until then.
    private var wanted: NodeIDSet.Compact?
    /// Where the last wanted node was found: nodes arrive in id order, so the next is at or after it.
    private var cursor = 0
    /// Nodes seen in the file, kept or not.
    private(set) var seen = 0
    static let missing = NodeLocation(latitude: .min, longitude: .min)

    init() {}

    init(wanted: NodeIDSet.Compact) {
        self.wanted = wanted
        locations = [NodeLocation](repeating: Self.missing, count: wanted.count)
    }

    /// Locations held (wanted ones, in the two-pass mode).
    var count: Int { wanted?.count ?? ids.count }

    @inline(__always)
    mutating func append(id: Int64, location: NodeLocation) {
        seen += 1
        guard let wanted else {
            if let last = ids.last, id <= last { isSorted = false }
            ids.append(id)
            locations.append(location)
            return
        }
        // Forward from the last hit (sorted files), else bisection.
        var position = cursor
        if position > 0 && wanted[position - 1] >= id {
            position = wanted.lowerBound(id)  // the file went back: not sorted by id
        } else {
            while position < wanted.count && wanted[position] < id { position += 1 }
        }
        guard position < wanted.count, wanted[position] == id else {
            cursor = position
            return
        }
        locations[position] = location
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

    /// The location of node `id`, nil when the file does not have it (extracts cut at a boundary).
    func location(of id: Int64) -> NodeLocation? {
        if let wanted {
            let low = wanted.lowerBound(id)
            guard low < wanted.count, wanted[low] == id, locations[low] != Self.missing else { return nil }
            return locations[low]
        }
        let low = ids.withUnsafeBufferPointer { ids in
            var low = 0
            var high = ids.count
            while low < high {
                let middle = (low + high) / 2
                if ids[middle] < id { low = middle + 1 } else { high = middle }
            }
            return low
        }
        return low < ids.count && ids[low] == id ? locations[low] : nil
    }
}

/// The node ids the kept ways reference, gathered way by way: chunks sorted and merged as they fill,
/// into a sorted, repeat-free set of 4 bytes an id.
struct NodeIDSet {
    private var chunk: [Int64] = []
    private var merged = Compact()
    static let chunkSize = 1 << 23

    mutating func add(_ refs: ProtobufReader) throws(ProtobufError) {
        var reader = refs
        var ref: Int64 = 0
        while !reader.isAtEnd {
            ref &+= try reader.signedVarint()
            chunk.append(ref)
        }
        if chunk.count >= Self.chunkSize { flush() }
    }

    private mutating func flush() {
        chunk.sort()
        merged = merged.merging(chunk)
        chunk.removeAll(keepingCapacity: true)
    }

    mutating func finish() -> Compact {
        flush()
        chunk = []
        return merged
    }

    /// Sorted unique ids: the low 32 bits of each, and for every run sharing the high bits where it starts.
    struct Compact {
        private var lows: [UInt32] = []
        /// (high bits, first position), increasing.
        private var runs: [(high: Int64, start: Int)] = []

        var count: Int { lows.count }

        subscript(position: Int) -> Int64 {
            var low = 0
            var high = runs.count
            while low + 1 < high {
                let middle = (low + high) / 2
                if runs[middle].start <= position { low = middle } else { high = middle }
            }
            return runs[low].high << 32 | Int64(lows[position])
        }

        /// The first position whose id is `id` or greater.
        func lowerBound(_ id: Int64) -> Int {
            let high = id >> 32
            var r = 0
            var end = runs.count
            while r < end {
                let middle = (r + end) / 2
                if runs[middle].high < high { r = middle + 1 } else { end = middle }
            }
            guard r < runs.count else { return lows.count }
            if runs[r].high > high { return runs[r].start }
            let stop = r + 1 < runs.count ? runs[r + 1].start : lows.count
            let target = UInt32(truncatingIfNeeded: id)
            var low = runs[r].start
            var upper = stop
            while low < upper {
                let middle = (low + upper) / 2
                if lows[middle] < target { low = middle + 1 } else { upper = middle }
            }
            return low
        }

        private mutating func append(_ id: Int64) {
            let high = id >> 32
            if runs.last?.high != high { runs.append((high, lows.count)) }
            lows.append(UInt32(truncatingIfNeeded: id))
        }

        /// This set and the sorted `ids`, repeats dropped.
        func merging(_ ids: [Int64]) -> Compact {
            var result = Compact()
            result.lows.reserveCapacity(count + ids.count)
            var i = 0
            var j = 0
            var last: Int64?
            var run = 0
            func mine(_ position: Int) -> Int64 {
                while run + 1 < runs.count && runs[run + 1].start <= position { run += 1 }
                return runs[run].high << 32 | Int64(lows[position])
            }
            while i < count || j < ids.count {
                let next: Int64
                if j >= ids.count || (i < count && mine(i) <= ids[j]) {
                    next = mine(i)
                    i += 1
                } else {
                    next = ids[j]
                    j += 1
                }
                if next != last {
                    result.append(next)
                    last = next
                }
            }
            return result
        }
    }
}
