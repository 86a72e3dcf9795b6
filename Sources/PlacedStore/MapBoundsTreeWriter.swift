import CSQLite
import PlacedCore

/// `map_bounds`, the map layer's R*Tree, written straight into SQLite's shadow tables as a packed tree
/// (`PackedRTree`) from boxes given in the rows' order (the box added first is entry 1, the rowid of
/// the first row): each leaf's node written as soon as it is full (its entries' `map_bounds_rowid`
/// rows 1,024 at a time), the levels above from the leaves' boxes in `finish`. Memory holds one leaf,
/// a box a leaf and, in `finish`, a cell a leaf (about a byte a feature: 40 MB at 39 M), where the tree
/// sorted whole (Sort-Tile-Recursive) held every box and more: 40 bytes a feature.
///
/// `map_bounds_node` holds each node's blob (`RTreeNodeCoding`, the length of the root's, which the
/// module reads as every node's), `map_bounds_parent` each node's parent. SQLite's own insert chooses
/// a path, splits and reinserts box by box: with it, in the rows' order, the whole import of city-1M
/// (1.3 M boxes) took twice the CPU, 29 s against 14 s. The tables must hold only the empty root
/// `CREATE VIRTUAL TABLE` made; `rtreecheck` accepts the result, and SQLite's own inserts and deletes
/// work on it (MapLayerStoreTests).
final class MapBoundsTreeWriter {
    let tree: PackedRTree
    private var blob: [UInt8]
    private var leaf: [PackedRTree.Cell] = []
    /// Each written leaf's box.
    private var leafBoxes: [PackedRTree.Box] = []
    private var added = 0
    /// Where the leaf being filled ends among the entries.
    private var leafEnd = 0

    private let replaceRoot: Statement
    private let insertNode: Statement
    /// Each entry's leaf, each node's parent.
    private var leafOfEntry: NodeMapping
    private var parentOfNode: NodeMapping

    /// A writer of `count` boxes into `database`'s empty `map_bounds`, in its open transaction.
    init(count: Int, into database: Database) throws {
        guard try database.scalarInt64("SELECT count(*) FROM map_bounds_node") == 1,
            try database.scalarInt64("SELECT count(*) FROM map_bounds_rowid") == 0,
            let rootLength = try database.scalarInt64("SELECT length(data) FROM map_bounds_node WHERE nodeno = 1"),
            rootLength >= 4 + RTreeNodeCoding.cellLength * 2
        else {
            throw SQLiteError(
                code: SQLITE_MISUSE, message: "map_bounds is not the empty tree CREATE VIRTUAL TABLE makes",
                operation: "writing map_bounds")
        }
        try database.allowShadowTableWrites()
        tree = PackedRTree(entryCount: count, capacity: (Int(rootLength) - 4) / RTreeNodeCoding.cellLength)
        blob = [UInt8](repeating: 0, count: Int(rootLength))
        leaf.reserveCapacity(tree.capacity)
        leafBoxes.reserveCapacity(tree.levels[0])
        leafEnd = tree.cells(level: 0, node: 0).upperBound
        replaceRoot = try database.prepare("UPDATE map_bounds_node SET data = ?2 WHERE nodeno = ?1")
        insertNode = try database.prepare("INSERT INTO map_bounds_node(nodeno, data) VALUES (?, ?)")
        leafOfEntry = NodeMapping(
            insert: try MultiRowInsert(
                into: "map_bounds_rowid", columns: "rowid, nodeno", parametersARow: 2, on: database))
        parentOfNode = NodeMapping(
            insert: try MultiRowInsert(
                into: "map_bounds_parent", columns: "nodeno, parentnode", parametersARow: 2, on: database))
    }

    /// The next entry's box.
    func add(_ box: PackedRTree.Box) throws {
        precondition(added < tree.entryCount, "more boxes than the tree was made for")
        added += 1
        leaf.append(PackedRTree.Cell(reference: Int64(added), box: box))
        guard added == leafEnd else { return }
        try write(tree.number(level: 0, node: leafBoxes.count), leaf)
        leafBoxes.append(leaf.union)
        leaf.removeAll(keepingCapacity: true)
        if leafBoxes.count < tree.levels[0] { leafEnd = tree.cells(level: 0, node: leafBoxes.count).upperBound }
    }

    /// Writes the levels above the leaves, once every box is in.
    func finish() throws {
        precondition(added == tree.entryCount, "the tree was made for \(tree.entryCount) boxes, \(added) came")
        guard added > 0 else { return }  // the empty root stays
        try leafOfEntry.flush()
        var boxes = leafBoxes
        leafBoxes = []
        for level in tree.levels.indices.dropFirst() {
            let nodes = tree.nodes(level: level, over: boxes)
            for (number, cells) in nodes {
                try write(number, cells)
            }
            boxes = nodes.map(\.cells.union)
        }
        try parentOfNode.flush()
    }

    /// Node `node`'s blob, and what its cells refer to mapped to it: a leaf's entries in
    /// `map_bounds_rowid`, an inner node's children in `map_bounds_parent`.
    private func write(_ node: Int64, _ cells: [PackedRTree.Cell]) throws {
        RTreeNodeCoding.encode(cells, depth: node == 1 ? tree.depth : 0, into: &blob)
        let statement = node == 1 ? replaceRoot : insertNode
        defer { statement.reset() }
        try statement.bind(node, at: 1)
        try statement.bind(blob: blob, at: 2)
        try statement.step()
        if node >= tree.number(level: 0, node: 0) {
            try leafOfEntry.add(cells, under: node)
        } else {
            try parentOfNode.add(cells, under: node)
        }
    }

    /// (what a cell refers to, the node holding it) rows waiting for their table, inserted `batch` at a
    /// time, 64 a statement: a leaf's 51 would go one at a time.
    private struct NodeMapping {
        static let batch = 1_024
        let insert: MultiRowInsert
        var pending: [(reference: Int64, node: Int64)] = []

        init(insert: MultiRowInsert) {
            self.insert = insert
            pending.reserveCapacity(Self.batch)
        }

        mutating func add(_ cells: [PackedRTree.Cell], under node: Int64) throws(SQLiteError) {
            for cell in cells {
                pending.append((cell.reference, node))
                if pending.count == Self.batch { try flush() }
            }
        }

        mutating func flush() throws(SQLiteError) {
            defer { pending.removeAll(keepingCapacity: true) }
            try insert.insert(count: pending.count) { (row, statement, after) throws(SQLiteError) in
                try statement.bind(pending[row].reference, at: after + 1)
                try statement.bind(pending[row].node, at: after + 2)
            }
        }
    }
}
