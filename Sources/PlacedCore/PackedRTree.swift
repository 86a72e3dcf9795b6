/// An R-tree over boxes built all at once, bottom-up, by Sort-Tile-Recursive (Leutenegger, Edgington
/// and López, "STR: A Simple and Efficient Algorithm for R-Tree Packing", 1997): the boxes sorted by
/// the latitude of their centres, cut into about √P bands of whole nodes (P nodes in all), each band
/// sorted by longitude and cut into nodes; then the same over the nodes' boxes, level by level, up to
/// one root. Every node but the root holds between half and all of `capacity` cells, and neighbours
/// share nodes, so a search opens few of them; building it sorts twice a level, where an R*Tree grown
/// box by box chooses a path, splits and reinserts for every box.
///
/// Nodes are numbered from 1, the root, level by level down to the leaves, each level in the order
/// the level above lists it, so a neighbourhood's nodes are near each other in number. Ties in a sort
/// are broken by position.
public struct PackedRTree: Sendable {
    /// A box in whole 1e-7 degrees (OSM's resolution), ends included.
    public struct Box: Equatable, Sendable {
        public var minLatitude: Int32
        public var maxLatitude: Int32
        public var minLongitude: Int32
        public var maxLongitude: Int32

        public init(minLatitude: Int32, maxLatitude: Int32, minLongitude: Int32, maxLongitude: Int32) {
            self.minLatitude = minLatitude
            self.maxLatitude = maxLatitude
            self.minLongitude = minLongitude
            self.maxLongitude = maxLongitude
        }

        /// The smallest box holding both.
        func union(_ other: Box) -> Box {
            Box(
                minLatitude: min(minLatitude, other.minLatitude), maxLatitude: max(maxLatitude, other.maxLatitude),
                minLongitude: min(minLongitude, other.minLongitude),
                maxLongitude: max(maxLongitude, other.maxLongitude))
        }

        /// Twice the centre's latitude and longitude: whole numbers, in order as the centres are.
        public var doubledCentre: (latitude: Int64, longitude: Int64) {
            (Int64(minLatitude) + Int64(maxLatitude), Int64(minLongitude) + Int64(maxLongitude))
        }
    }

    /// One entry of a node: at a leaf an entry's id and box, above a child's node number and the box
    /// of everything under it.
    public struct Cell: Equatable, Sendable {
        public var reference: Int64
        public var box: Box

        public init(reference: Int64, box: Box) {
            self.reference = reference
            self.box = box
        }
    }

    /// Every node's cells end to end, node 1's first; `nodeCells(_:)` finds one node's.
    public private(set) var cells: [Cell] = []
    /// Where node n's cells start in `cells` (at n - 1), and one more: the end.
    private var cellStarts: [Int] = [0]
    /// Node n's parent's number at n - 1; 0 for the root.
    public private(set) var parents: [Int64] = []
    /// Levels below the root: 0 when the root is the only node (a leaf).
    public private(set) var depth = 0
    /// The number of the first leaf; leaves run from it to `nodeCount`.
    public private(set) var firstLeaf: Int64 = 1

    public var nodeCount: Int { cellStarts.count - 1 }

    /// The cells of node `number` (1 ... `nodeCount`).
    public func nodeCells(_ number: Int64) -> ArraySlice<Cell> {
        cells[cellStarts[Int(number) - 1]..<cellStarts[Int(number)]]
    }

    /// The tree over `entries` (ids need not be in any order, nor distinct for the tree's sake), at most
    /// `capacity` cells a node (at least 2). No entries: one empty root.
    public init(entries: [Cell], capacity: Int) {
        precondition(capacity >= 2, "an R-tree node holds at least two cells")
        guard !entries.isEmpty else {
            cellStarts = [0, 0]
            parents = [0]
            return
        }
        // Bottom-up: each level's nodes as the ranges of its sorted cells they hold.
        var levels: [(cells: [Cell], nodes: [Range<Int>])] = []
        var level = entries
        repeat {
            let (sorted, nodes) = Self.tile(level, capacity: capacity)
            levels.append((sorted, nodes))
            // The next level's cells: a box per node, referring to the node by its place in the level
            // for now (numbered once the tree's height is known).
            level = nodes.enumerated().map { index, range in
                Cell(
                    reference: Int64(index),
                    box: sorted[range].dropFirst().reduce(sorted[range.lowerBound].box) { $0.union($1.box) })
            }
        } while levels.last!.nodes.count > 1

        // Numbered from the root down, each level in the order the level above lists it: `order[h]` the
        // level's nodes (by place in `levels[h].nodes`) in number order, `number[h]` the inverse.
        depth = levels.count - 1
        var order: [[Int]] = Array(repeating: [], count: levels.count)
        var number: [[Int64]] = Array(repeating: [], count: levels.count)
        order[depth] = [0]
        var next: Int64 = 1
        for height in stride(from: depth, through: 0, by: -1) {
            number[height] = [Int64](repeating: 0, count: levels[height].nodes.count)
            for node in order[height] {
                number[height][node] = next
                next += 1
            }
            guard height > 0 else { break }
            order[height - 1] = order[height].flatMap {
                levels[height].cells[levels[height].nodes[$0]].map { Int($0.reference) }
            }
        }
        firstLeaf = number[0][order[0][0]]
        cells.reserveCapacity(levels.reduce(0) { $0 + $1.cells.count })
        parents = [0]
        for height in stride(from: depth, through: 0, by: -1) {
            let (levelCells, nodes) = levels[height]
            for node in order[height] {
                for var cell in levelCells[nodes[node]] {
                    if height > 0 {
                        cell.reference = number[height - 1][Int(cell.reference)]
                        parents.append(number[height][node])
                    }
                    cells.append(cell)
                }
                cellStarts.append(cells.count)
            }
        }
    }

    /// `cells` sorted into nodes of at most `capacity`: the ranges of the sorted cells each node holds,
    /// in order. n cells make P = ⌈n / capacity⌉ nodes of ⌊n / P⌋ or ⌈n / P⌉ cells; the nodes are
    /// grouped into ⌈√P⌉ bands of consecutive nodes, by latitude, each band's cells then sorted by
    /// longitude.
    static func tile(_ cells: [Cell], capacity: Int) -> (sorted: [Cell], nodes: [Range<Int>]) {
        let n = cells.count
        guard n > capacity else { return (cells, [0..<n]) }
        let nodeCount = (n + capacity - 1) / capacity
        // Node j holds cells [j·n/P, (j+1)·n/P): sizes differ by one at most.
        func start(ofNode node: Int) -> Int { node * n / nodeCount }
        let centres = cells.map(\.box.doubledCentre)
        var order = Array(0..<n)
        order.sort { (centres[$0].latitude, $0) < (centres[$1].latitude, $1) }
        var bandCount = 1
        while bandCount * bandCount < nodeCount { bandCount += 1 }
        for band in 0..<bandCount {
            let cellRange =
                start(ofNode: band * nodeCount / bandCount)..<start(ofNode: (band + 1) * nodeCount / bandCount)
            order[cellRange].sort { (centres[$0].longitude, $0) < (centres[$1].longitude, $1) }
        }
        return (order.map { cells[$0] }, (0..<nodeCount).map { start(ofNode: $0)..<start(ofNode: $0 + 1) })
    }
}
