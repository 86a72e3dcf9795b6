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

    /// The entries' boxes: entry i is `boxes[i]`, its reference `firstReference + i`.
    private let boxes: [Box]
    private let firstReference: Int64
    /// The cells of the nodes above the leaves, end to end, node 1's first.
    private var innerCells: [Cell] = []
    /// Where inner node n's cells start in `innerCells` (at n - 1), and one more: their end.
    private var innerStarts: [Int] = [0]
    /// The entries (indices into `boxes`) leaf by leaf, in the leaves' number order: 4 bytes an entry
    /// where a cell would take 24, as these are nearly all of a tree's cells.
    private var leafEntries: [UInt32] = []
    /// Where leaf `firstLeaf + k`'s entries start in `leafEntries` (at k), and one more: their end.
    private var leafStarts: [Int] = [0]
    /// Node n's parent's number at n - 1; 0 for the root.
    public private(set) var parents: [Int64] = []
    /// Levels below the root: 0 when the root is the only node (a leaf).
    public private(set) var depth = 0
    /// The number of the first leaf; leaves run from it to `nodeCount`.
    public var firstLeaf: Int64 { Int64(innerStarts.count) }

    public var nodeCount: Int { innerStarts.count - 1 + leafStarts.count - 1 }

    /// The cells of node `number` (1 ... `nodeCount`).
    public func nodeCells(_ number: Int64) -> [Cell] {
        let node = Int(number) - 1
        guard number >= firstLeaf else { return Array(innerCells[innerStarts[node]..<innerStarts[node + 1]]) }
        let leaf = Int(number - firstLeaf)
        return leafEntries[leafStarts[leaf]..<leafStarts[leaf + 1]].map { entry in
            Cell(reference: firstReference + Int64(entry), box: boxes[Int(entry)])
        }
    }

    /// The tree over `boxes`, entry i referred to as `firstReference + i`, at most `capacity` cells a
    /// node (at least 2). No boxes: one empty root. Memory beyond the boxes: about 10 bytes an entry
    /// while it is built, 4 after.
    public init(boxes: [Box], firstReference: Int64 = 0, capacity: Int) {
        precondition(capacity >= 2, "an R-tree node holds at least two cells")
        precondition(boxes.count <= Int(UInt32.max), "more boxes than 32-bit entry numbers reach")
        self.boxes = boxes
        self.firstReference = firstReference
        guard !boxes.isEmpty else {
            leafStarts = [0, 0]
            parents = [0]
            return
        }
        // Bottom-up: the leaves as the boxes' indices in STR's order, then each level above as cells
        // sorted the same way; a level's nodes are ranges of its order (`Self.nodes`). A node's cell in
        // the level above refers to it by its place in its level for now (numbered once the tree's
        // height is known).
        let leafOrder = Self.tile(count: boxes.count, capacity: capacity) { boxes[$0].doubledCentre }
        let leafNodes = Self.nodeCount(boxes.count, capacity: capacity)
        var upper: [[Cell]] = []
        var level = (0..<leafNodes).map { node in
            let entries = leafOrder[Self.nodes(boxes.count, leafNodes, node)]
            return Cell(
                reference: Int64(node),
                box: entries.dropFirst().reduce(boxes[Int(entries.first!)]) { $0.union(boxes[Int($1)]) })
        }
        while level.count > 1 {
            let order = Self.tile(count: level.count, capacity: capacity) { level[$0].box.doubledCentre }
            let sorted = order.map { level[Int($0)] }
            upper.append(sorted)
            let count = Self.nodeCount(sorted.count, capacity: capacity)
            level = (0..<count).map { node in
                let cells = sorted[Self.nodes(sorted.count, count, node)]
                return Cell(
                    reference: Int64(node), box: cells.dropFirst().reduce(cells.first!.box) { $0.union($1.box) })
            }
        }

        // Numbered from the root down, each level in the order the level above lists it: `order[h]` the
        // nodes at height h (by place in their level) in number order, `number[h]` the inverse. Height 0
        // is the leaves; height h > 0 the nodes whose cells are `upper[h - 1]`.
        depth = upper.count
        func nodeCount(atHeight height: Int) -> Int {
            height == 0 ? leafNodes : Self.nodeCount(upper[height - 1].count, capacity: capacity)
        }
        func cells(atHeight height: Int, node: Int) -> ArraySlice<Cell> {
            let cells = upper[height - 1]
            return cells[Self.nodes(cells.count, nodeCount(atHeight: height), node)]
        }
        var order: [[Int]] = Array(repeating: [], count: depth + 1)
        var number: [[Int64]] = Array(repeating: [], count: depth + 1)
        order[depth] = [0]
        var next: Int64 = 1
        for height in stride(from: depth, through: 0, by: -1) {
            number[height] = [Int64](repeating: 0, count: nodeCount(atHeight: height))
            for node in order[height] {
                number[height][node] = next
                next += 1
            }
            guard height > 0 else { break }
            order[height - 1] = order[height].flatMap { cells(atHeight: height, node: $0).map { Int($0.reference) } }
        }
        innerCells.reserveCapacity(upper.reduce(0) { $0 + $1.count })
        parents = [0]
        for height in stride(from: depth, through: 1, by: -1) {
            for node in order[height] {
                for var cell in cells(atHeight: height, node: node) {
                    cell.reference = number[height - 1][Int(cell.reference)]
                    parents.append(number[height][node])
                    innerCells.append(cell)
                }
                innerStarts.append(innerCells.count)
            }
        }
        leafEntries.reserveCapacity(boxes.count)
        for node in order[0] {
            leafEntries.append(contentsOf: leafOrder[Self.nodes(boxes.count, leafNodes, node)])
            leafStarts.append(leafEntries.count)
        }
    }

    /// P = ⌈n / capacity⌉ nodes for n cells.
    static func nodeCount(_ n: Int, capacity: Int) -> Int { max((n + capacity - 1) / capacity, 1) }

    /// Where node j of `nodeCount` holds its cells in a level's order of n: [j·n/P, (j+1)·n/P), so
    /// sizes differ by one at most.
    static func nodes(_ n: Int, _ nodeCount: Int, _ node: Int) -> Range<Int> {
        node * n / nodeCount..<(node + 1) * n / nodeCount
    }

    /// STR's order of `count` items by their centres (`centre(i)`, doubled): the items' indices
    /// sorted by the centres' latitude, cut into ⌈√P⌉ bands of whole nodes (`nodes`), each band sorted
    /// by longitude; ties by index. At most `capacity` items stay in their own order, one node.
    static func tile(count n: Int, capacity: Int, centre: (Int) -> (latitude: Int64, longitude: Int64))
        -> [UInt32]
    {
        var order = Array(0..<UInt32(n))
        guard n > capacity else { return order }
        let nodeCount = Self.nodeCount(n, capacity: capacity)
        order.sort { (centre(Int($0)).latitude, $0) < (centre(Int($1)).latitude, $1) }
        var bandCount = 1
        while bandCount * bandCount < nodeCount { bandCount += 1 }
        for band in 0..<bandCount {
            let first = nodes(n, nodeCount, band * nodeCount / bandCount).lowerBound
            let end = nodes(n, nodeCount, (band + 1) * nodeCount / bandCount).lowerBound
            order[first..<end].sort { (centre(Int($0)).longitude, $0) < (centre(Int($1)).longitude, $1) }
        }
        return order
    }
}
