import PlacedTestSupport
import Testing

@testable import PlacedCore

/// `PackedRTree`: the shape SQLite's R*Tree module reads (every entry in one leaf, all leaves at the
/// same depth, each node's box the union of its cells, parents and numbers consistent), the fill STR
/// promises, and searches through it equal to a scan of the boxes.
@Suite struct PackedRTreeTests {
    typealias Box = PackedRTree.Box

    static func randomBoxes(_ count: Int, seed: UInt64, span: Int32 = 10_000_000, size: Int32 = 5_000) -> [Box] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let latitude = Int32.random(in: -span...span, using: &random)
            let longitude = Int32.random(in: -span...span, using: &random)
            return Box(
                minLatitude: latitude, maxLatitude: latitude + Int32.random(in: 0...size, using: &random),
                minLongitude: longitude, maxLongitude: longitude + Int32.random(in: 0...size, using: &random))
        }
    }

    /// The cells a tree over `boxes` numbered from `firstReference` holds at its leaves.
    static func entries(_ boxes: [Box], firstReference: Int64) -> [PackedRTree.Cell] {
        boxes.enumerated().map { PackedRTree.Cell(reference: firstReference + Int64($0), box: $1) }
    }

    static func overlaps(_ a: Box, _ b: Box) -> Bool {
        a.maxLatitude >= b.minLatitude && a.minLatitude <= b.maxLatitude && a.maxLongitude >= b.minLongitude
            && a.minLongitude <= b.maxLongitude
    }

    /// The entries whose boxes overlap `query`, by walking the tree from the root.
    static func search(_ tree: PackedRTree, _ query: Box) -> [Int64] {
        var found: [Int64] = []
        var pending: [Int64] = [1]
        while let node = pending.popLast() {
            for cell in tree.nodeCells(node) where overlaps(cell.box, query) {
                if node >= tree.firstLeaf { found.append(cell.reference) } else { pending.append(cell.reference) }
            }
        }
        return found.sorted()
    }

    /// Checks everything SQLite's `rtreecheck` would, and the fill: returns nothing, records issues.
    static func checkShape(_ tree: PackedRTree, entries: [PackedRTree.Cell], capacity: Int) {
        #expect(tree.nodeCount == tree.parents.count)
        #expect(tree.parents.first == 0, "the root has no parent")
        // Each node's level from the root: children of node n are at level(n) + 1, leaves at depth.
        var level = [Int](repeating: -1, count: tree.nodeCount + 1)
        level[1] = 0
        for node in 1...Int64(tree.nodeCount) {
            let cells = tree.nodeCells(node)
            #expect(cells.count <= capacity)
            if node > 1 {
                #expect(2 * cells.count >= capacity, "node \(node) holds \(cells.count) of \(capacity)")
            }
            let isLeaf = node >= tree.firstLeaf
            #expect(isLeaf == (level[Int(node)] == tree.depth), "node \(node) is a leaf exactly at the depth")
            guard !isLeaf else { continue }
            for cell in cells {
                let child = cell.reference
                #expect(child > node && child <= Int64(tree.nodeCount), "children numbered after their parent")
                #expect(tree.parents[Int(child) - 1] == node)
                level[Int(child)] = level[Int(node)] + 1
                let childCells = tree.nodeCells(child)
                let union = childCells.dropFirst().reduce(childCells.first!.box) { $0.union($1.box) }
                #expect(cell.box == union, "node \(node)'s box of node \(child) is the union of its cells")
            }
        }
        #expect(!level.dropFirst().contains(-1), "every node is reached from the root")
        let leafCells = (tree.firstLeaf...Int64(max(tree.nodeCount, 1))).flatMap { tree.nodeCells($0) }
        #expect(leafCells.count == entries.count)
        #expect(Set(leafCells.map(\.reference)) == Set(entries.map(\.reference)), "every entry in one leaf")
        let boxes = Dictionary(uniqueKeysWithValues: entries.map { ($0.reference, $0.box) })
        #expect(leafCells.allSatisfy { boxes[$0.reference] == $0.box }, "with its own box")
    }

    @Test(arguments: [(0, 51), (1, 51), (51, 51), (52, 51), (2_601, 51), (2_602, 51), (10_000, 4), (30_000, 51)])
    func shapeAndFill(count: Int, capacity: Int) {
        let boxes = Self.randomBoxes(count, seed: UInt64(count))
        let tree = PackedRTree(boxes: boxes, firstReference: 7, capacity: capacity)
        Self.checkShape(tree, entries: Self.entries(boxes, firstReference: 7), capacity: capacity)
        // The fewest levels the capacity allows: ⌈log_capacity(count)⌉ below the root.
        var levels = 0
        var reach = capacity
        while reach < count {
            reach *= capacity
            levels += 1
        }
        #expect(tree.depth == levels)
    }

    /// The tree as first written (every level's cells whole, sorted by their centres): the model the
    /// packed one, which keeps leaves as entry numbers, must equal node for node, so that a places
    /// file's tree stays what it was.
    struct ModelTree {
        var cells: [[PackedRTree.Cell]] = []
        var parents: [Int64] = [0]
        var depth = 0
        var firstLeaf: Int64 = 1

        init(_ entries: [PackedRTree.Cell], capacity: Int) {
            guard !entries.isEmpty else {
                cells = [[]]
                return
            }
            func tile(_ cells: [PackedRTree.Cell]) -> (sorted: [PackedRTree.Cell], nodes: [Range<Int>]) {
                let n = cells.count
                guard n > capacity else { return (cells, [0..<n]) }
                let nodeCount = (n + capacity - 1) / capacity
                func start(_ node: Int) -> Int { node * n / nodeCount }
                let centres = cells.map(\.box.doubledCentre)
                var order = Array(0..<n)
                order.sort { (centres[$0].latitude, $0) < (centres[$1].latitude, $1) }
                var bands = 1
                while bands * bands < nodeCount { bands += 1 }
                for band in 0..<bands {
                    let range = start(band * nodeCount / bands)..<start((band + 1) * nodeCount / bands)
                    order[range].sort { (centres[$0].longitude, $0) < (centres[$1].longitude, $1) }
                }
                return (order.map { cells[$0] }, (0..<nodeCount).map { start($0)..<start($0 + 1) })
            }
            var levels: [(cells: [PackedRTree.Cell], nodes: [Range<Int>])] = []
            var level = entries
            repeat {
                let (sorted, nodes) = tile(level)
                levels.append((sorted, nodes))
                level = nodes.enumerated().map { index, range in
                    PackedRTree.Cell(
                        reference: Int64(index),
                        box: sorted[range].dropFirst().reduce(sorted[range.lowerBound].box) { $0.union($1.box) })
                }
            } while levels.last!.nodes.count > 1
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
            for height in stride(from: depth, through: 0, by: -1) {
                for node in order[height] {
                    cells.append(
                        levels[height].cells[levels[height].nodes[node]].map { cell in
                            guard height > 0 else { return cell }
                            parents.append(number[height][node])
                            return PackedRTree.Cell(
                                reference: number[height - 1][Int(cell.reference)], box: cell.box)
                        })
                }
            }
        }
    }

    @Test(arguments: [(0, 51), (1, 51), (51, 51), (52, 51), (2_601, 51), (2_602, 51), (10_000, 4), (30_000, 51)])
    func theTreeIsTheModelsNodeForNode(count: Int, capacity: Int) {
        let boxes = Self.randomBoxes(count, seed: UInt64(count) + 11, span: 100_000)
        let tree = PackedRTree(boxes: boxes, firstReference: 1, capacity: capacity)
        let model = ModelTree(Self.entries(boxes, firstReference: 1), capacity: capacity)
        #expect(tree.depth == model.depth && tree.firstLeaf == model.firstLeaf)
        #expect(tree.parents == model.parents)
        #expect(tree.nodeCount == model.cells.count)
        #expect((1...Int64(tree.nodeCount)).map(tree.nodeCells) == model.cells)
        // Ties everywhere: every box on one of three points.
        let tied = (0..<count).map { boxes[$0 % 3] }
        let tiedModel = ModelTree(Self.entries(tied, firstReference: 0), capacity: capacity)
        let tiedTree = PackedRTree(boxes: tied, capacity: capacity)
        #expect(tiedTree.parents == tiedModel.parents)
        #expect((1...Int64(tiedTree.nodeCount)).map(tiedTree.nodeCells) == tiedModel.cells)
    }

    @Test func anEmptyTreeIsOneEmptyRoot() {
        let tree = PackedRTree(boxes: [], capacity: 51)
        #expect(tree.nodeCount == 1 && tree.depth == 0 && tree.firstLeaf == 1)
        #expect(tree.nodeCells(1).isEmpty)
    }

    @Test func searchesFindWhatAScanFinds() {
        let boxes = Self.randomBoxes(20_000, seed: 5, span: 1_000_000, size: 20_000)
        let tree = PackedRTree(boxes: boxes, firstReference: 1, capacity: 51)
        let entries = Self.entries(boxes, firstReference: 1)
        var random = SplitMix64(seed: 6)
        var found = 0
        for _ in 0..<300 {
            let latitude = Int32.random(in: -1_000_000...1_000_000, using: &random)
            let longitude = Int32.random(in: -1_000_000...1_000_000, using: &random)
            let size = Int32.random(in: 0...200_000, using: &random)
            let query = Box(
                minLatitude: latitude, maxLatitude: latitude + size, minLongitude: longitude,
                maxLongitude: longitude + size)
            let scan = entries.filter { Self.overlaps($0.box, query) }.map(\.reference).sorted()
            #expect(Self.search(tree, query) == scan)
            found += scan.count
        }
        #expect(found > 1_000, "the queries found something to compare")
    }

    @Test func manyBoxesOnOnePointStillMakeAValidTree() {
        let point = Box(minLatitude: 5, maxLatitude: 5, minLongitude: 7, maxLongitude: 7)
        let boxes = Array(repeating: point, count: 5_000)
        let tree = PackedRTree(boxes: boxes, capacity: 51)
        Self.checkShape(tree, entries: Self.entries(boxes, firstReference: 0), capacity: 51)
        #expect(Self.search(tree, point).count == 5_000)
    }

    @Test func neighboursShareLeaves() {
        // A 100 × 100 grid of points at capacity 25: STR's leaves are 5 × 5 squares of the grid, so a
        // leaf's box spans 4 steps each way, where an arbitrary grouping would span the grid.
        var boxes: [Box] = []
        for row in 0..<100 {
            for column in 0..<100 {
                boxes.append(
                    Box(
                        minLatitude: Int32(row) * 10, maxLatitude: Int32(row) * 10, minLongitude: Int32(column) * 10,
                        maxLongitude: Int32(column) * 10))
            }
        }
        let tree = PackedRTree(boxes: boxes, capacity: 25)
        for leaf in tree.firstLeaf...Int64(tree.nodeCount) {
            let cells = tree.nodeCells(leaf)
            let box = cells.dropFirst().reduce(cells.first!.box) { $0.union($1.box) }
            #expect(box.maxLatitude - box.minLatitude == 40 && box.maxLongitude - box.minLongitude == 40)
        }
    }
}
