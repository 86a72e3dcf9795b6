import PlacedTestSupport
import Testing

@testable import PlacedCore

/// `PackedRTree`'s shape: what SQLite's R*Tree module needs of it (every entry in one leaf, all leaves at
/// the same depth, every node numbered once, the root 1), the fill it promises, and the levels above
/// the leaves made from their boxes. (That SQLite reads, searches and changes the written tree as its
/// own: MapLayerStoreTests.)
@Suite struct PackedRTreeTests {
    typealias Box = PackedRTree.Box

    @Test(arguments: [(0, 51), (1, 51), (51, 51), (52, 51), (2_601, 51), (2_602, 51), (10_000, 4), (30_000, 51)])
    func shapeAndFill(count: Int, capacity: Int) {
        let tree = PackedRTree(entryCount: count, capacity: capacity)
        #expect(tree.levels.last == 1, "one root")
        // The fewest levels the capacity allows: ⌈log_capacity(count)⌉ below the root.
        var depth = 0
        var reach = capacity
        while reach < count {
            reach *= capacity
            depth += 1
        }
        #expect(tree.depth == depth)
        for level in tree.levels.indices {
            let below = level == 0 ? count : tree.levels[level - 1]
            let sizes = (0..<tree.levels[level]).map { tree.cells(level: level, node: $0).count }
            // Each node a run of the level below, one after another, the whole level covered.
            var next = 0
            for node in 0..<tree.levels[level] {
                #expect(tree.cells(level: level, node: node).lowerBound == next)
                next = tree.cells(level: level, node: node).upperBound
            }
            #expect(next == below)
            #expect(sizes.max()! <= capacity && sizes.max()! - sizes.min()! <= 1)
            if level < tree.depth {
                #expect(sizes.min()! * 2 >= capacity, "all but the root at least half full")
            }
        }
        // Numbered from 1, the root, down to the leaves, each level in its order.
        let topDown = tree.levels.indices.reversed().flatMap { level in
            (0..<tree.levels[level]).map { tree.number(level: level, node: $0) }
        }
        #expect(topDown == Array(1...Int64(tree.nodeCount)))
        #expect(tree.number(level: tree.depth, node: 0) == 1)
    }

    @Test func anEmptyTreeIsOneEmptyRoot() {
        let tree = PackedRTree(entryCount: 0, capacity: 51)
        #expect(tree.levels == [1] && tree.depth == 0 && tree.nodeCount == 1)
        #expect(tree.cells(level: 0, node: 0).isEmpty && tree.number(level: 0, node: 0) == 1)
    }

    /// The level above the leaves of 2,602 entries at 51 a node (52 leaves, then 2 nodes, then the
    /// root): each node's cells are its children, numbered, with their boxes, and its box their union.
    @Test func theLevelsAboveAreMadeFromTheBoxesBelow() {
        let tree = PackedRTree(entryCount: 2_602, capacity: 51)
        #expect(tree.levels == [52, 2, 1])
        var random = SplitMix64(seed: 3)
        let leafBoxes = (0..<52).map { _ in
            let latitude = Int32.random(in: -1_000...1_000, using: &random)
            let longitude = Int32.random(in: -1_000...1_000, using: &random)
            return Box(
                minLatitude: latitude, maxLatitude: latitude + 40, minLongitude: longitude, maxLongitude: longitude + 9)
        }
        let middle = tree.nodes(level: 1, over: leafBoxes)
        #expect(middle.map(\.number) == [2, 3])
        #expect(middle[0].cells.map(\.reference) == Array(4...29) && middle[1].cells.map(\.reference) == Array(30...55))
        #expect(middle.flatMap(\.cells).map(\.box) == leafBoxes)
        let root = tree.nodes(level: 2, over: middle.map(\.cells.union))
        #expect(root.count == 1 && root[0].number == 1 && root[0].cells.map(\.reference) == [2, 3])
        let all = root[0].cells.union
        #expect(
            all.minLatitude == leafBoxes.map(\.minLatitude).min()
                && all.maxLatitude == leafBoxes.map(\.maxLatitude).max())
        #expect(
            all.minLongitude == leafBoxes.map(\.minLongitude).min()
                && all.maxLongitude == leafBoxes.map(\.maxLongitude).max())
    }
}
