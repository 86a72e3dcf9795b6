#if canImport(Glibc)
    import Glibc  // libm: log, exp for Floyd–Rivest selection
#elseif canImport(Darwin)
    import Darwin
#endif

/// A static spatial index over place coordinates: a packed kd-tree in the way of kdbush.
///
/// The coordinates are sorted in place into an implicit balanced kd-tree (the median of every
/// range splits it, alternating longitude and latitude) with leaves of `nodeSize` points, so the
/// whole index is flat arrays and no node objects: 20 bytes a place, no pointers, cheap to
/// serialise and to load.
///
/// **Descent.** Each internal node's split (its median's coordinate on the node's axis) is also kept
/// apart from the points, copied into blocks of nine tree levels (`NodeLayout`: 511 splits, one 4 kB
/// page a block), so a descent from the root to a leaf reads one page every nine levels instead of one a
/// level: three pages and the leaf's at 30 M places, where the medians themselves lie a page apart on
/// every level. Mapped from a file, that is what a cold descent reads from the disk; warm, it is what
/// the TLB and the caches miss on. A range query reads a median's point only where its box straddles the
/// split (elsewhere the point lies outside the box, as the subtree it skips).
///
/// **Distances** are metres on the local tangent plane at the query point — exactly
/// `LocalProjection(origin: query).distance(to: place)`. Against the WGS-84 geodesic that is within
/// 1 cm at 250 m and 0.1 % at 5 km (0.2 % at 10 km) up to 80° of latitude (see PlaceIndexTests);
/// it degrades only near the poles, where it stays finite and deterministic. Longitudes wrap at
/// ±180°: an extract straddling the antimeridian is searched across it.
///
/// Results are ordered nearest first, ties by index, so a query is deterministic and equals a
/// brute-force scan. Queries allocate nothing but the result array; the `into:` variants reuse the
/// caller's array.
public struct PlaceIndex: Sendable {
    /// A place found by a query: its index in the coordinates the index was built from, and its
    /// distance in metres.
    public struct Neighbor: Equatable, Hashable, Sendable {
        public var index: Int
        public var distance: Double

        public init(index: Int, distance: Double) {
            self.index = index
            self.distance = distance
        }

        /// Nearest first, ties by index.
        @inline(__always)
        static func precedes(_ a: Neighbor, _ b: Neighbor) -> Bool {
            a.distance < b.distance || (a.distance == b.distance && a.index < b.index)
        }
    }

    /// Points per leaf: ranges at most this long are scanned linearly.
    public let nodeSize: Int
    /// The tree's arrays, owned or borrowed from a mapped file.
    let storage: IndexStorage
    /// The data's bounding box: the root node's box for `nearest`.
    let bounds: (minLongitude: Double, minLatitude: Double, maxLongitude: Double, maxLatitude: Double)
    /// Where each internal node's split point is in `storage.nodes`.
    let layout: NodeLayout

    public var count: Int { storage.count }
    public var isEmpty: Bool { storage.count == 0 }

    /// Builds the tree; `coordinates` must be valid (see `Coordinate.isValid`). O(n log n).
    public init(coordinates: [Coordinate], nodeSize: Int = 64) {
        precondition(coordinates.count < Int(Int32.max), "PlaceIndex: too many places")
        let points = UnsafeMutableBufferPointer<Double>.allocate(capacity: 2 * coordinates.count)
        for (i, c) in coordinates.enumerated() {
            precondition(c.isValid, "PlaceIndex: invalid coordinate \(c) at \(i)")
            points[2 * i] = c.longitude
            points[2 * i + 1] = c.latitude
        }
        self.init(sortingInterleaved: points, nodeSize: nodeSize)
    }

    /// Runs `other` on another thread while `this` runs, and returns when both have.
    public typealias Concurrently = (_ other: @escaping () -> Void, _ this: () -> Void) -> Void

    /// Builds the tree over interleaved (longitude, latitude) pairs, taking ownership of `points` (sorted in
    /// place): an importer's array of millions is not copied. The pairs must be valid coordinates.
    /// `concurrently`, when given, runs its first closure on another thread while its second runs, and
    /// returns when both have: the tree's two halves are sorted that way (the same tree, in about half
    /// the time on two cores).
    public init(
        sortingInterleaved points: UnsafeMutableBufferPointer<Double>, nodeSize: Int = 64,
        concurrently: Concurrently? = nil
    ) {
        precondition(nodeSize >= 1 && nodeSize <= Int(UInt16.max), "PlaceIndex: node size out of range")
        let count = points.count / 2
        precondition(count < Int(Int32.max), "PlaceIndex: too many places")
        let ids = UnsafeMutableBufferPointer<Int32>.allocate(capacity: count)
        for i in 0..<count { ids[i] = Int32(i) }
        let sorter = TreeSorter(ids: ids, points: points, nodeSize: nodeSize)
        if let concurrently, count > Self.worthAThread {
            // The root's median placed, then its halves (disjoint ranges of both buffers) side by side.
            let middle = sorter.placeMedian(0, count - 1, axis: 0)
            concurrently({ sorter.sort(0, middle - 1, axis: 1) }, { sorter.sort(middle + 1, count - 1, axis: 1) })
        } else {
            sorter.sort(0, count - 1, axis: 0)
        }
        self.init(nodeSize: nodeSize, storage: IndexStorage(owning: points, ids: ids))
    }

    /// Places at or below which a second thread for the sort costs more than it saves.
    static let worthAThread = 1 << 16

    init(nodeSize: Int, storage: IndexStorage) {
        self.nodeSize = nodeSize
        self.storage = storage
        layout = NodeLayout(count: storage.count, nodeSize: nodeSize)
        if storage.nodes == nil { storage.copyNodes(layout, nodeSize: nodeSize) }
        var minX = Double.infinity
        var minY = Double.infinity
        var maxX = -Double.infinity
        var maxY = -Double.infinity
        // Only the root's box is needed, and the points' box is the root's: a mapped index reads it from
        // its header instead of touching every page.
        if let stored = storage.bounds {
            (minX, minY, maxX, maxY) = stored
        } else {
            let points = storage.points
            for i in 0..<storage.count {
                minX = min(minX, points[2 * i])
                maxX = max(maxX, points[2 * i])
                minY = min(minY, points[2 * i + 1])
                maxY = max(maxY, points[2 * i + 1])
            }
        }
        bounds = (minX, minY, maxX, maxY)
    }

    /// The point stored at tree `position` and its index in the builder's coordinates.
    public func entry(atPosition position: Int) -> (index: Int, coordinate: Coordinate) {
        let points = storage.points
        return (
            storage.id(at: position),
            Coordinate(latitude: points[2 * position + 1], longitude: points[2 * position])
        )
    }

    /// The same tree with every place renumbered by its tree position, and the renumbering:
    /// `order[newIndex] == oldIndex`. Stored in this order, the places' rows line up with the tree.
    public func renumberedByPosition() -> (index: PlaceIndex, order: [Int32]) {
        let order = (0..<count).map { Int32(storage.id(at: $0)) }
        let points = UnsafeMutableBufferPointer<Double>.allocate(capacity: 2 * count)
        _ = points.initialize(from: storage.points)
        return (PlaceIndex(nodeSize: nodeSize, storage: IndexStorage(owning: points, ids: nil)), order)
    }

    /// True when every place's index is its tree position (see `renumberedByPosition`).
    public var isNumberedByPosition: Bool {
        guard let ids = storage.ids else { return true }
        for i in 0..<ids.count where ids[i] != Int32(truncatingIfNeeded: i) { return false }
        return true
    }

    /// The distance this index measures: metres on the tangent plane at `origin`.
    public static func distance(from origin: Coordinate, to c: Coordinate) -> Double {
        LocalProjection(origin: origin).distance(to: c)
    }
}

/// The arrays of a `PlaceIndex`: interleaved (longitude, latitude) in tree order, the internal nodes'
/// split points (`NodeLayout`) and, unless every place is numbered by its position, the place number at
/// each position. Either allocated (and freed here) or borrowed from memory `owner` keeps alive, such as a
/// read-only mapping of the places file.
final class IndexStorage: @unchecked Sendable {
    let points: UnsafeBufferPointer<Double>
    /// nil: the place at position i is place i.
    let ids: UnsafeBufferPointer<Int32>?
    /// Each internal node's split (its median's longitude at even depths, latitude at odd), at
    /// `NodeLayout.entry`; nil until `copyNodes` for an index that did not come with them. Set once,
    /// before the index is shared.
    private(set) var nodes: UnsafeBufferPointer<Double>?
    let count: Int
    /// The points' box when known without a scan (from a serialized header).
    let bounds: (Double, Double, Double, Double)?
    private let owner: AnyObject?
    private let owned: Bool
    private var ownsNodes = false

    init(owning points: UnsafeMutableBufferPointer<Double>, ids: UnsafeMutableBufferPointer<Int32>?) {
        self.points = UnsafeBufferPointer(points)
        self.ids = ids.map { UnsafeBufferPointer($0) }
        count = points.count / 2
        bounds = nil
        owner = nil
        owned = true
    }

    init(
        borrowing points: UnsafeBufferPointer<Double>, ids: UnsafeBufferPointer<Int32>?,
        nodes: UnsafeBufferPointer<Double>?, bounds: (Double, Double, Double, Double)?, owner: AnyObject
    ) {
        self.points = points
        self.ids = ids
        self.nodes = nodes
        count = points.count / 2
        self.bounds = bounds
        self.owner = owner
        owned = false
    }

    deinit {
        if ownsNodes { nodes?.deallocate() }
        guard owned else { return }
        points.deallocate()
        ids?.deallocate()
    }

    /// Copies every internal node's split into its place in `layout` (reading one point a node).
    func copyNodes(_ layout: NodeLayout, nodeSize: Int) {
        let nodes = UnsafeMutableBufferPointer<Double>.allocate(capacity: layout.entryCount)
        nodes.initialize(repeating: 0)
        func visit(_ left: Int, _ right: Int, _ heap: Int, _ depth: Int) {
            guard right - left > nodeSize else { return }
            let m = (left + right) >> 1
            nodes[layout.entry(heap: heap, depth: depth)] = points[2 * m + (depth & 1)]
            visit(left, m - 1, 2 * heap, depth + 1)
            visit(m + 1, right, 2 * heap + 1, depth + 1)
        }
        if count > 0 { visit(0, count - 1, 1, 0) }
        self.nodes = UnsafeBufferPointer(nodes)
        ownsNodes = true
    }

    /// The place number at `position`; -1 for a borrowed id outside `0..<count` (damaged bytes are never
    /// trusted as an index into anything).
    @inline(__always)
    func id(at position: Int) -> Int {
        guard let ids else { return position }
        let id = Int(ids[position])
        return id >= 0 && id < count ? id : -1
    }
}

/// Where the internal nodes' splits are stored: in blocks of `levelsPerBlock` tree levels, each block one
/// subtree in heap order (its root first, then its two children, …), the blocks of one band of levels
/// side by side in the order of their roots. A block of nine full levels is 511 splits of 8 bytes, padded
/// to 4,096: one page, aligned when the index is. A band of fewer levels (the last) packs its blocks
/// without padding. A node is named by its heap number (the root 1, the children of k 2k and 2k + 1) and
/// its depth; the median split is balanced, so every internal node lies in the first `depth` levels and
/// the layout has no holes but the padding.
struct NodeLayout: Sendable {
    static let levelsPerBlock = 9
    /// Levels that hold an internal node (0: the root is a leaf).
    let depth: Int
    /// Per band of levels (four at most: 36 levels), what `entry` adds to the block number times the
    /// band's stride (the entries from one block to the next). Plain fields, not an indexed collection, so
    /// the descent keeps them in registers.
    let offset0, offset1, offset2, offset3: Int
    let stride0, stride1, stride2, stride3: Int
    /// Entries in all, padding included.
    let entryCount: Int

    init(count: Int, nodeSize: Int) {
        var depth = 0
        var size = count
        while size - 1 > nodeSize {  // the larger half of a range goes on being split longest
            depth += 1
            size -= 1 + (size - 1) / 2
        }
        self.depth = depth
        var bases = SIMD4<Int>(repeating: 0)
        var strides = SIMD4<Int>(repeating: 0)
        var total = 0
        var band = 0
        while band * Self.levelsPerBlock < depth {
            let levels = Swift.min(Self.levelsPerBlock, depth - band * Self.levelsPerBlock)
            bases[band] = total
            strides[band] = levels == Self.levelsPerBlock ? 1 << levels : (1 << levels) - 1
            total += strides[band] << (band * Self.levelsPerBlock)
            band += 1
        }
        // entry = base + (root - first root of the band) * stride + index in the block, with the constant
        // parts folded into one offset per band.
        var offsets = SIMD4<Int>(repeating: 0)
        for band in 0..<4 { offsets[band] = bases[band] - (strides[band] << (band * Self.levelsPerBlock)) - 1 }
        (offset0, offset1, offset2, offset3) = (offsets[0], offsets[1], offsets[2], offsets[3])
        (stride0, stride1, stride2, stride3) = (strides[0], strides[1], strides[2], strides[3])
        entryCount = total
    }

    /// The entry of the node with heap number `heap` at `depth` (< `self.depth`).
    @inline(__always)
    func entry(heap: Int, depth: Int) -> Int {
        let band = depth / Self.levelsPerBlock
        let level = depth - band * Self.levelsPerBlock
        let root = heap >> level
        let offset = band == 0 ? offset0 : band == 1 ? offset1 : band == 2 ? offset2 : offset3
        let stride = band == 0 ? stride0 : band == 1 ? stride1 : band == 2 ? stride2 : stride3
        // (heap - root << level) + (1 << level) is the node's heap number inside its block's subtree.
        return offset &+ root &* stride &+ (heap - (root << level)) &+ (1 << level)
    }
}

// MARK: - Queries

extension PlaceIndex {
    /// Places within `radius` metres of `center` (inclusive), nearest first, ties by index.
    /// An invalid center or a negative or NaN radius finds nothing.
    public func within(_ radius: Double, of center: Coordinate) -> [Neighbor] {
        var result: [Neighbor] = []
        within(radius, of: center, into: &result)
        return result
    }

    /// `within` into a reusable array (emptied first, capacity kept): no allocation once it has grown.
    public func within(_ radius: Double, of center: Coordinate, into result: inout [Neighbor]) {
        result.removeAll(keepingCapacity: true)
        guard center.isValid, radius >= 0, !isEmpty else { return }
        let metric = Metric(center)
        // The box only prunes subtrees; every point reached is judged by its distance alone.
        let box = SearchBox(
            radius: radius, around: center, metresPerDegreeLatitude: metric.metresPerDegreeLatitude,
            metresPerDegreeLongitude: metric.metresPerDegreeLongitude)
        collect(metric, radius, box, &result)
        result.withUnsafeMutableBufferPointer { Self.sortNearestFirst($0) }
    }

    /// The `k` places nearest to `center` within `maxDistance` metres (inclusive), nearest first,
    /// ties by index. Fewer when fewer are in reach; none for an invalid center or k <= 0.
    public func nearest(_ k: Int, to center: Coordinate, maxDistance: Double = .infinity)
        -> [Neighbor]
    {
        var result: [Neighbor] = []
        nearest(k, to: center, maxDistance: maxDistance, into: &result)
        return result
    }

    /// `nearest` into a reusable array (emptied first, capacity kept).
    ///
    /// Depth-first branch and bound: the result array is a max-heap of the best `k` so far, and a
    /// subtree is skipped when its box lies farther than the worst of them.
    public func nearest(
        _ k: Int, to center: Coordinate, maxDistance: Double = .infinity, into result: inout [Neighbor]
    ) {
        result.removeAll(keepingCapacity: true)
        guard k > 0, center.isValid, maxDistance >= 0, !isEmpty else { return }
        let metric = Metric(center)
        let limit = Swift.min(k, count)
        result.reserveCapacity(limit)

        let storage = self.storage
        let points = storage.points
        let nodes = storage.nodes ?? UnsafeBufferPointer(start: nil, count: 0)
        let layout = self.layout
        // A stack of nodes: range, heap number and depth (its parity the axis), box and the box's lower
        // bound on distance.
        withUnsafeTemporaryAllocation(of: Int.self, capacity: 4 * Self.stackDepth) { ranges in
            withUnsafeTemporaryAllocation(of: Double.self, capacity: 5 * Self.stackDepth) { boxes in
                var top = 0
                func push(
                    _ left: Int, _ right: Int, _ heap: Int, _ depth: Int, _ box: (Double, Double, Double, Double)
                ) {
                    let bound = metric.distance(toBox: box)
                    guard bound <= maxDistance else { return }
                    ranges[4 * top] = left
                    ranges[4 * top + 1] = right
                    ranges[4 * top + 2] = heap
                    ranges[4 * top + 3] = depth
                    boxes[5 * top] = box.0
                    boxes[5 * top + 1] = box.1
                    boxes[5 * top + 2] = box.2
                    boxes[5 * top + 3] = box.3
                    boxes[5 * top + 4] = bound
                    top += 1
                }
                func consider(_ position: Int, _ x: Double, _ y: Double) {
                    let d = metric.distance(x, y)
                    guard d <= maxDistance else { return }
                    let id = storage.id(at: position)
                    guard id >= 0 else { return }
                    let candidate = Neighbor(index: id, distance: d)
                    if result.count < limit {
                        result.append(candidate)
                        result.siftUp(from: result.count - 1)
                    } else if Neighbor.precedes(candidate, result[0]) {
                        result[0] = candidate
                        result.siftDown(from: 0)
                    }
                }

                push(0, count - 1, 1, 0, bounds)
                while top > 0 {
                    top -= 1
                    let left = ranges[4 * top]
                    let right = ranges[4 * top + 1]
                    let heap = ranges[4 * top + 2]
                    let depth = ranges[4 * top + 3]
                    let box = (boxes[5 * top], boxes[5 * top + 1], boxes[5 * top + 2], boxes[5 * top + 3])
                    // Strictly farther: an equally distant point may still win on index.
                    if result.count == limit && boxes[5 * top + 4] > result[0].distance { continue }

                    if right - left <= nodeSize {
                        for position in left...right {
                            consider(position, points[2 * position], points[2 * position + 1])
                        }
                        continue
                    }
                    let m = (left + right) >> 1
                    consider(m, points[2 * m], points[2 * m + 1])
                    let axis = depth & 1
                    let split = nodes[layout.entry(heap: heap, depth: depth)]
                    let low = axis == 0 ? (box.0, box.1, split, box.3) : (box.0, box.1, box.2, split)
                    let high = axis == 0 ? (split, box.1, box.2, box.3) : (box.0, split, box.2, box.3)
                    let centerValue = axis == 0 ? center.longitude : center.latitude
                    // Far side first, so the near side is popped (and tightens the bound) first.
                    if centerValue < split {
                        push(m + 1, right, 2 * heap + 1, depth + 1, high)
                        push(left, m - 1, 2 * heap, depth + 1, low)
                    } else {
                        push(left, m - 1, 2 * heap, depth + 1, low)
                        push(m + 1, right, 2 * heap + 1, depth + 1, high)
                    }
                }
            }
        }
        result.withUnsafeMutableBufferPointer { Self.sortNearestFirst($0) }
    }

    /// Enough for any tree: each level pushes at most two nodes and pops one, and 2^31 points with
    /// leaves of one point are 31 levels deep.
    static var stackDepth: Int { 64 }

    /// Range search: walks the subtrees that meet `box`, appending every point within `radius`.
    private func collect(_ metric: Metric, _ radius: Double, _ box: SearchBox, _ result: inout [Neighbor]) {
        // Squared-distance prefilter, loose by far more than rounding, so the exact test
        // (`distance <= radius`, bit for bit LocalProjection's) decides every borderline point.
        let looseSquare = radius * radius * (1 + 1e-9)
        let storage = self.storage
        let points = storage.points
        let nodes = storage.nodes ?? UnsafeBufferPointer(start: nil, count: 0)
        let layout = self.layout
        let nodeSize = self.nodeSize
        // Int32 fields: 1 kB, which Swift keeps on the stack (a larger temporary allocation is a malloc a query).
        withUnsafeTemporaryAllocation(of: Int32.self, capacity: 4 * Self.stackDepth) { stack in
            @inline(__always) func consider(_ i: Int, _ x: Double, _ y: Double) {
                // No box test per point: the distance is as cheap and never mispredicted.
                let east = metric.longitudeDelta(x) * metric.metresPerDegreeLongitude
                let north = (y - metric.latitude) * metric.metresPerDegreeLatitude
                let square = east * east + north * north
                if square <= looseSquare {
                    let d = square.squareRoot()
                    if d <= radius {
                        let id = storage.id(at: i)
                        if id >= 0 { result.append(Neighbor(index: id, distance: d)) }
                    }
                }
            }
            // A node: its range of positions, heap number and depth (the depth's parity is its axis).
            stack[0] = 0
            stack[1] = Int32(count - 1)
            stack[2] = 1
            stack[3] = 0
            var top = 1
            while top > 0 {
                top -= 1
                let left = Int(stack[4 * top])
                let right = Int(stack[4 * top + 1])
                let heap = Int(stack[4 * top + 2])
                let depth = Int(stack[4 * top + 3])
                if right - left <= nodeSize {
                    for i in left...right { consider(i, points[2 * i], points[2 * i + 1]) }
                    continue
                }
                let m = (left + right) >> 1
                let split = nodes[layout.entry(heap: heap, depth: depth)]
                let goLow: Bool
                let goHigh: Bool
                if depth & 1 == 0 {
                    goLow = box.west <= split || box.otherWest <= split
                    goHigh = box.east >= split || box.otherEast >= split
                } else {
                    goLow = box.minLatitude <= split
                    goHigh = box.maxLatitude >= split
                }
                // A median off the box on this axis is as far as the side skipped: its point is not read.
                if goLow && goHigh { consider(m, points[2 * m], points[2 * m + 1]) }
                if goLow {
                    stack[4 * top] = Int32(truncatingIfNeeded: left)
                    stack[4 * top + 1] = Int32(truncatingIfNeeded: m - 1)
                    stack[4 * top + 2] = Int32(truncatingIfNeeded: 2 * heap)
                    stack[4 * top + 3] = Int32(truncatingIfNeeded: depth + 1)
                    top += 1
                }
                if goHigh {
                    stack[4 * top] = Int32(truncatingIfNeeded: m + 1)
                    stack[4 * top + 1] = Int32(truncatingIfNeeded: right)
                    stack[4 * top + 2] = Int32(truncatingIfNeeded: 2 * heap + 1)
                    stack[4 * top + 3] = Int32(truncatingIfNeeded: depth + 1)
                    top += 1
                }
            }
        }
    }
}

/// The tangent-plane metric at one query point, with `LocalProjection`'s scale factors and the
/// same arithmetic, so its distances are bit-identical to `LocalProjection.distance(to:)`.
struct Metric {
    let longitude: Double
    let latitude: Double
    let metresPerDegreeLongitude: Double
    let metresPerDegreeLatitude: Double

    init(_ origin: Coordinate) {
        let projection = LocalProjection(origin: origin)
        longitude = origin.longitude
        latitude = origin.latitude
        metresPerDegreeLongitude = projection.metresPerDegreeLongitude
        metresPerDegreeLatitude = projection.metresPerDegreeLatitude
    }

    /// Longitude difference folded into [-180, 180]: both inputs lie within ±180°, so one
    /// correction suffices (no fmod on the hot path).
    @inline(__always)
    func longitudeDelta(_ x: Double) -> Double {
        let d = x - longitude
        return d > 180 ? d - 360 : (d < -180 ? d + 360 : d)
    }

    @inline(__always)
    func distance(_ x: Double, _ y: Double) -> Double {
        let east = longitudeDelta(x) * metresPerDegreeLongitude
        let north = (y - latitude) * metresPerDegreeLatitude
        return (east * east + north * north).squareRoot()
    }

    /// A lower bound on the distance to any point of the box (minX, minY, maxX, maxY); 0 inside.
    /// Uses the same differences as `distance`, so a point on the box's edge is never undercut.
    @inline(__always)
    func distance(toBox box: (Double, Double, Double, Double)) -> Double {
        let dx: Double
        if longitude >= box.0 && longitude <= box.2 {
            dx = 0
        } else {
            // Off an arc of longitudes, the nearest longitude is one of its ends (going either way round).
            dx = Swift.min(abs(longitudeDelta(box.0)), abs(longitudeDelta(box.2)))
        }
        let dy = latitude < box.1 ? box.1 - latitude : (latitude > box.3 ? latitude - box.3 : 0)
        let east = dx * metresPerDegreeLongitude
        let north = dy * metresPerDegreeLatitude
        return (east * east + north * north).squareRoot()
    }
}

// MARK: - Sorting results without allocating

extension PlaceIndex {
    /// Sorts nearest first, ties by index, in place, without the merge buffer the standard
    /// library's (stable) sort allocates on every call; (distance, index) keys are unique, so
    /// stability buys nothing.
    ///
    /// A distribution sort: places spread evenly over a disc are spread evenly in squared
    /// distance, so `n` buckets by (d / max)² hold about one each. Small buckets are finished by
    /// one insertion pass; a crowded one (many places at one spot) by introsort, so no input is
    /// quadratic. Scratch space is a temporary allocation: the stack for results of ranking size.
    static func sortNearestFirst(_ a: UnsafeMutableBufferPointer<Neighbor>) {
        let n = a.count
        guard n > 24 else {
            insertionSort(a, 0, n - 1)
            return
        }
        var farthest = 0.0
        for neighbor in a { farthest = Swift.max(farthest, neighbor.distance) }
        guard farthest > 0, farthest.isFinite else {
            introsort(a, 0, n - 1, depthLimit: 2 * (Int.bitWidth - n.leadingZeroBitCount))
            return
        }
        let inverse = 1 / farthest
        let last = Double(n - 1)
        // Monotonic in distance (every step is), so buckets are in order; equal distances share one.
        @inline(__always) func bucket(_ d: Double) -> Int {
            let r = d * inverse
            return Int(Swift.min(last, r * r * Double(n)))
        }
        withUnsafeTemporaryAllocation(of: Int.self, capacity: n + 1) { ends in
            withUnsafeTemporaryAllocation(of: Neighbor.self, capacity: n) { scratch in
                ends.initialize(repeating: 0)
                for neighbor in a { ends[bucket(neighbor.distance) + 1] += 1 }
                for b in 0..<n { ends[b + 1] += ends[b] }  // ends[b] is now where bucket b starts
                for neighbor in a {
                    let b = bucket(neighbor.distance)
                    (scratch.baseAddress! + ends[b]).initialize(to: neighbor)
                    ends[b] += 1  // …and ends up where it ends
                }
                var start = 0
                for b in 0..<n {
                    if ends[b] - start > 16 {
                        introsort(scratch, start, ends[b] - 1, depthLimit: 2 * Int.bitWidth)
                    }
                    start = ends[b]
                }
                _ = a.moveUpdate(fromContentsOf: scratch)
            }
        }
        // Disorder is left only inside small buckets: a few moves each.
        insertionSort(a, 0, n - 1)
    }

    private static func insertionSort(_ a: UnsafeMutableBufferPointer<Neighbor>, _ low: Int, _ high: Int) {
        for i in stride(from: low + 1, through: high, by: 1) {
            let item = a[i]
            var j = i
            while j > low && Neighbor.precedes(item, a[j - 1]) {
                a[j] = a[j - 1]
                j -= 1
            }
            a[j] = item
        }
    }

    private static func introsort(_ a: UnsafeMutableBufferPointer<Neighbor>, _ low: Int, _ high: Int, depthLimit: Int) {
        var low = low
        var high = high
        var depthLimit = depthLimit
        while high - low > 16 {
            if depthLimit == 0 {
                heapsort(a, low, high)
                return
            }
            depthLimit -= 1
            let mid = low + (high - low) / 2
            if Neighbor.precedes(a[mid], a[low]) { a.swapAt(mid, low) }
            if Neighbor.precedes(a[high], a[mid]) {
                a.swapAt(high, mid)
                if Neighbor.precedes(a[mid], a[low]) { a.swapAt(mid, low) }
            }
            let pivot = a[mid]
            var i = low
            var j = high
            while i <= j {
                while Neighbor.precedes(a[i], pivot) { i += 1 }
                while Neighbor.precedes(pivot, a[j]) { j -= 1 }
                if i <= j {
                    a.swapAt(i, j)
                    i += 1
                    j -= 1
                }
            }
            // Recurse into the smaller side, loop on the larger: the stack stays O(log n).
            if j - low < high - i {
                introsort(a, low, j, depthLimit: depthLimit)
                low = i
            } else {
                introsort(a, i, high, depthLimit: depthLimit)
                high = j
            }
        }
        insertionSort(a, low, high)
    }

    private static func heapsort(_ a: UnsafeMutableBufferPointer<Neighbor>, _ low: Int, _ high: Int) {
        let n = high - low + 1
        func siftDown(_ start: Int, _ end: Int) {
            var parent = start
            while true {
                var largest = parent
                let left = 2 * parent + 1
                let right = left + 1
                if left < end && Neighbor.precedes(a[low + largest], a[low + left]) { largest = left }
                if right < end && Neighbor.precedes(a[low + largest], a[low + right]) { largest = right }
                if largest == parent { return }
                a.swapAt(low + parent, low + largest)
                parent = largest
            }
        }
        for start in stride(from: n / 2 - 1, through: 0, by: -1) { siftDown(start, n) }
        for end in stride(from: n - 1, to: 0, by: -1) {
            a.swapAt(low, low + end)
            siftDown(0, end)
        }
    }
}

// MARK: - Max-heap of neighbors (worst on top) for `nearest`

extension Array where Element == PlaceIndex.Neighbor {
    @inline(__always)
    fileprivate mutating func siftUp(from start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard PlaceIndex.Neighbor.precedes(self[parent], self[child]) else { return }
            swapAt(parent, child)
            child = parent
        }
    }

    @inline(__always)
    fileprivate mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            var worst = parent
            let left = 2 * parent + 1
            let right = left + 1
            if left < count && PlaceIndex.Neighbor.precedes(self[worst], self[left]) { worst = left }
            if right < count && PlaceIndex.Neighbor.precedes(self[worst], self[right]) { worst = right }
            if worst == parent { return }
            swapAt(parent, worst)
            parent = worst
        }
    }
}

// MARK: - Building: kdbush's recursive median sort with Floyd–Rivest selection

private struct TreeSorter {
    let ids: UnsafeMutableBufferPointer<Int32>
    let points: UnsafeMutableBufferPointer<Double>
    let nodeSize: Int

    func sort(_ left: Int, _ right: Int, axis: Int) {
        if right - left <= nodeSize { return }
        let m = placeMedian(left, right, axis: axis)
        sort(left, m - 1, axis: 1 - axis)
        sort(m + 1, right, axis: 1 - axis)
    }

    /// `sort`'s first step: the median along `axis` put at the middle of [left, right], which the two
    /// halves are then sorted around; returns the middle.
    func placeMedian(_ left: Int, _ right: Int, axis: Int) -> Int {
        let m = (left + right) >> 1
        select(m, left, right, axis)
        return m
    }

    /// Rearranges [left, right] so that position k holds the k-th smallest along `axis`, smaller
    /// (or equal) values before it and larger (or equal) after.
    func select(_ k: Int, _ left: Int, _ right: Int, _ axis: Int) {
        var left = left
        var right = right
        while right > left {
            if right - left > 600 {
                // Floyd–Rivest: narrow [left, right] to a sample range around k first.
                let n = Double(right - left + 1)
                let m = Double(k - left + 1)
                let z = log(n)
                let s = 0.5 * exp(2 * z / 3)
                let sd = 0.5 * (z * s * (n - s) / n).squareRoot() * (m - n / 2 < 0 ? -1 : 1)
                let newLeft = Swift.max(left, Int((Double(k) - m * s / n + sd).rounded(.down)))
                let newRight = Swift.min(right, Int((Double(k) + (n - m) * s / n + sd).rounded(.down)))
                select(k, newLeft, newRight, axis)
            }
            let t = points[2 * k + axis]
            var i = left
            var j = right
            swap(left, k)
            if points[2 * right + axis] > t { swap(left, right) }
            while i < j {
                swap(i, j)
                i += 1
                j -= 1
                while points[2 * i + axis] < t { i += 1 }
                while points[2 * j + axis] > t { j -= 1 }
            }
            if points[2 * left + axis] == t {
                swap(left, j)
            } else {
                j += 1
                swap(j, right)
            }
            if j <= k { left = j + 1 }
            if k <= j { right = j - 1 }
        }
    }

    @inline(__always)
    func swap(_ i: Int, _ j: Int) {
        ids.swapAt(i, j)
        points.swapAt(2 * i, 2 * j)
        points.swapAt(2 * i + 1, 2 * j + 1)
    }
}

// MARK: - Serialisation

/// Why bytes are not a `PlaceIndex`.
public enum PlaceIndexDecodingError: Error, Equatable, Sendable, CustomStringConvertible {
    case badMagic
    case unsupportedVersion(Int)
    case badNodeSize(Int)
    case wrongLength(expected: Int, actual: Int)
    case invalidEntry(position: Int)

    public var description: String {
        switch self {
        case .badMagic: "not a place index (bad magic)"
        case .unsupportedVersion(let v): "place index format version \(v) is not supported"
        case .badNodeSize(let n): "place index node size \(n) is invalid"
        case .wrongLength(let expected, let actual):
            "place index is \(actual) bytes, its header says \(expected)"
        case .invalidEntry(let position):
            "place index entry \(position) is invalid (id out of range, repeated, or bad coordinate)"
        }
    }
}

extension PlaceIndex {
    // Layout, little-endian: "PKDX", version u16, nodeSize u16, count u32, flags u32; version 2 then the
    // points' box (min longitude, min latitude, max longitude, max latitude) f64 × 4; ids i32 × count
    // unless flag 1 (every place numbered by its position) left them out; version 3 then the internal
    // nodes' splits, f64 × `NodeLayout.entryCount`, from an offset that is a multiple of 4,096 when there
    // is more than one band of blocks (of 8 otherwise), so that a block is a page of a page-aligned index;
    // then (longitude, latitude) f64 × count. Version 1 had no box and always the ids; versions 1 and 2 had no nodes (they are copied from
    // the points when such an index is read).
    static let magic: [UInt8] = Array("PKDX".utf8)
    package static let formatVersion = 3
    static let identityFlag: UInt32 = 1

    struct Layout {
        var idsOffset: Int
        var nodesOffset: Int
        var nodeEntries: Int
        var pointsOffset: Int
        var total: Int
    }

    static func layout(version: Int, count: Int, nodeSize: Int, identity: Bool) -> Layout {
        let header = version == 1 ? 16 : 48
        let idsEnd = header + (identity ? 0 : 4 * count)
        var nodesOffset = idsEnd
        var nodeEntries = 0
        if version >= 3 {
            let nodes = NodeLayout(count: count, nodeSize: nodeSize)
            let alignment = nodes.depth > NodeLayout.levelsPerBlock ? 4096 : 8
            nodesOffset = (idsEnd + alignment - 1) / alignment * alignment
            nodeEntries = nodes.entryCount
        }
        let pointsOffset = (nodesOffset + 8 * nodeEntries + 7) & ~7
        return Layout(
            idsOffset: header, nodesOffset: nodesOffset, nodeEntries: nodeEntries, pointsOffset: pointsOffset,
            total: pointsOffset + 16 * count)
    }

    /// Bytes `serialized()` writes for `count` places numbered by position (`serializeNumberedByPosition`).
    public static func serializedSize(count: Int, nodeSize: Int = 64) -> Int {
        layout(version: formatVersion, count: count, nodeSize: nodeSize, identity: true).total
    }

    /// Where the serialized index should start in a file for its node blocks to be pages of it.
    public var serializedAlignment: Int { layout.depth > NodeLayout.levelsPerBlock ? 4096 : 8 }

    /// The index as bytes, to store beside the places it indexes (`init(serialized:)` reads it back, and
    /// `init(mapping:owner:)` uses it in place).
    public func serialized() -> [UInt8] { serialized(formatVersion: Self.formatVersion) }

    /// The bytes of format 2 or 3 (2 has no nodes: what files of schema 4 hold, for tests of reading them).
    package func serialized(formatVersion version: Int) -> [UInt8] {
        let identity = storage.ids == nil
        let layout = Self.layout(version: version, count: count, nodeSize: nodeSize, identity: identity)
        return [UInt8](unsafeUninitializedCapacity: layout.total) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            writeSerialized(into: raw, version: version)
            initialized = layout.total
        }
    }

    /// Bytes `serialized()` writes.
    public var serializedSize: Int {
        Self.layout(version: Self.formatVersion, count: count, nodeSize: nodeSize, identity: storage.ids == nil).total
    }

    /// Writes `serialized()` into `raw` (exactly `serializedSize` bytes), as an importer writes it
    /// straight into a file's buffer.
    public func writeSerialized(into raw: UnsafeMutableRawBufferPointer) {
        writeSerialized(into: raw, version: Self.formatVersion)
    }

    private func writeSerialized(into raw: UnsafeMutableRawBufferPointer, version: Int) {
        precondition(version == 2 || version == 3, "PlaceIndex.writeSerialized: format \(version)")
        let identity = storage.ids == nil
        let layout = Self.layout(version: version, count: count, nodeSize: nodeSize, identity: identity)
        precondition(raw.count == layout.total, "PlaceIndex.writeSerialized: wrong buffer size")
        raw.initializeMemory(as: UInt8.self, repeating: 0)
        for (i, byte) in Self.magic.enumerated() { raw[i] = byte }
        raw.storeBytes(of: UInt16(version).littleEndian, toByteOffset: 4, as: UInt16.self)
        raw.storeBytes(of: UInt16(nodeSize).littleEndian, toByteOffset: 6, as: UInt16.self)
        raw.storeBytes(of: UInt32(count).littleEndian, toByteOffset: 8, as: UInt32.self)
        raw.storeBytes(of: (identity ? Self.identityFlag : 0).littleEndian, toByteOffset: 12, as: UInt32.self)
        for (i, value) in [bounds.minLongitude, bounds.minLatitude, bounds.maxLongitude, bounds.maxLatitude]
            .enumerated()
        {
            raw.storeBytes(of: value.bitPattern.littleEndian, toByteOffset: 16 + 8 * i, as: UInt64.self)
        }
        if let ids = storage.ids {
            for (i, id) in ids.enumerated() {
                raw.storeBytes(of: id.littleEndian, toByteOffset: layout.idsOffset + 4 * i, as: Int32.self)
            }
        }
        for (i, value) in (storage.nodes ?? UnsafeBufferPointer(start: nil, count: 0)).prefix(layout.nodeEntries)
            .enumerated()
        {
            raw.storeBytes(of: value.bitPattern.littleEndian, toByteOffset: layout.nodesOffset + 8 * i, as: UInt64.self)
        }
        for (i, value) in storage.points.enumerated() {
            raw.storeBytes(
                of: value.bitPattern.littleEndian, toByteOffset: layout.pointsOffset + 8 * i, as: UInt64.self)
        }
    }

    /// `renumberedByPosition().index.serialized()` without copying anything: the bytes in chunks to
    /// `body` (an importer streams millions of points straight to its file).
    public func serializeNumberedByPosition(_ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        var header = [UInt8](repeating: 0, count: 48)
        header.withUnsafeMutableBytes { raw in
            for (i, byte) in Self.magic.enumerated() { raw[i] = byte }
            raw.storeBytes(of: UInt16(Self.formatVersion).littleEndian, toByteOffset: 4, as: UInt16.self)
            raw.storeBytes(of: UInt16(nodeSize).littleEndian, toByteOffset: 6, as: UInt16.self)
            raw.storeBytes(of: UInt32(count).littleEndian, toByteOffset: 8, as: UInt32.self)
            raw.storeBytes(of: Self.identityFlag.littleEndian, toByteOffset: 12, as: UInt32.self)
            for (i, value) in [bounds.minLongitude, bounds.minLatitude, bounds.maxLongitude, bounds.maxLatitude]
                .enumerated()
            {
                raw.storeBytes(of: value.bitPattern.littleEndian, toByteOffset: 16 + 8 * i, as: UInt64.self)
            }
        }
        try header.withUnsafeBytes { try body($0) }
        let layout = Self.layout(version: Self.formatVersion, count: count, nodeSize: nodeSize, identity: true)
        func stream(_ values: UnsafeBufferPointer<Double>) throws {
            let chunk = 1 << 16
            var start = 0
            while start < values.count {
                let end = Swift.min(values.count, start + chunk)
                #if _endian(little)
                    try body(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: values[start..<end])))
                #else
                    let swapped = values[start..<end].map { $0.bitPattern.littleEndian }
                    try swapped.withUnsafeBytes { try body($0) }
                #endif
                start = end
            }
        }
        func zeros(_ count: Int) throws {
            if count > 0 { try [UInt8](repeating: 0, count: count).withUnsafeBytes { try body($0) } }
        }
        try zeros(layout.nodesOffset - header.count)
        try stream(storage.nodes ?? UnsafeBufferPointer(start: nil, count: 0))
        try zeros(layout.pointsOffset - layout.nodesOffset - 8 * layout.nodeEntries)
        try stream(storage.points)
    }

    /// `order[position]`: the builder's index of the point at each tree position (what
    /// `renumberedByPosition` returns beside the index).
    public var order: [Int32] { (0..<count).map { Int32(storage.id(at: $0)) } }

    /// `order` inverted: the tree position of each of the builder's indices (`positions[order[p]] == p`).
    /// Written by scattering, each store independent of the others, where following the permutation's
    /// cycles in place waits for one cache miss after another (1.5 s of 10 M places).
    public var positions: [Int32] {
        [Int32](unsafeUninitializedCapacity: count) { buffer, initialized in
            for position in 0..<count {
                let index = storage.id(at: position)
                precondition(index >= 0, "PlaceIndex: entry \(position) is invalid")
                buffer[index] = Int32(position)
            }
            initialized = count
        }
    }

    /// Reads an index written by `serialized()` (see `init(serialized:)` for raw bytes).
    public init(serialized bytes: [UInt8]) throws(PlaceIndexDecodingError) {
        // Array.withUnsafeBytes is untyped `rethrows`: carry the typed result out by hand.
        let decoded: Result<PlaceIndex, PlaceIndexDecodingError> = bytes.withUnsafeBytes { raw in
            do throws(PlaceIndexDecodingError) { return .success(try PlaceIndex(serialized: raw)) } catch {
                return .failure(error)
            }
        }
        self = try decoded.get()
    }

    /// The header's fields, checked against the length of `bytes`.
    private static func header(_ bytes: UnsafeRawBufferPointer) throws(PlaceIndexDecodingError) -> (
        version: Int, nodeSize: Int, count: Int, identity: Bool, layout: Layout
    ) {
        guard bytes.count >= 16, bytes.prefix(4).elementsEqual(Self.magic) else { throw .badMagic }
        let version = Int(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt16.self)))
        guard (1...3).contains(version) else { throw .unsupportedVersion(version) }
        let nodeSize = Int(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: 6, as: UInt16.self)))
        guard nodeSize >= 1 else { throw .badNodeSize(nodeSize) }
        let count = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        guard count < Int(Int32.max) else { throw .wrongLength(expected: Int.max, actual: bytes.count) }
        let flags = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
        let identity = version >= 2 && flags & identityFlag != 0
        let layout = Self.layout(version: version, count: count, nodeSize: nodeSize, identity: identity)
        guard bytes.count == layout.total else { throw .wrongLength(expected: layout.total, actual: bytes.count) }
        return (version, nodeSize, count, identity, layout)
    }

    /// Uses an index written by `serialized()` where it lies, as a read-only mapping of the places file
    /// holds it: nothing is copied and nothing but the header is read, so opening costs no page of the
    /// tree. `owner` keeps the bytes alive. The header and length are checked; the points are trusted
    /// (the importer wrote them with the places), and ids, when stored, are range-checked as they are
    /// read. `bytes` must be 8-aligned; on a big-endian machine the index is decoded into memory instead.
    /// An index of version 1 or 2 (no nodes) gets its nodes copied from the points into memory, which
    /// reads one point a node.
    public init(mapping bytes: UnsafeRawBufferPointer, owner: AnyObject) throws(PlaceIndexDecodingError) {
        let header = try Self.header(bytes)
        #if _endian(little)
            guard let base = bytes.baseAddress, Int(bitPattern: base) % 8 == 0 else {
                throw .wrongLength(expected: header.layout.total, actual: -1)
            }
            let points = UnsafeBufferPointer(
                start: (base + header.layout.pointsOffset).assumingMemoryBound(to: Double.self),
                count: 2 * header.count)
            let ids =
                header.identity
                ? nil
                : UnsafeBufferPointer(
                    start: (base + header.layout.idsOffset).assumingMemoryBound(to: Int32.self), count: header.count)
            let nodes =
                header.version >= 3
                ? UnsafeBufferPointer(
                    start: (base + header.layout.nodesOffset).assumingMemoryBound(to: Double.self),
                    count: header.layout.nodeEntries) : nil
            var box: (Double, Double, Double, Double)?
            if header.version >= 2 {
                func load(_ i: Int) -> Double {
                    Double(
                        bitPattern: UInt64(
                            littleEndian: bytes.loadUnaligned(fromByteOffset: 16 + 8 * i, as: UInt64.self)))
                }
                box = (load(0), load(1), load(2), load(3))
            }
            self.init(
                nodeSize: header.nodeSize,
                storage: IndexStorage(borrowing: points, ids: ids, nodes: nodes, bounds: box, owner: owner))
        #else
            self = try PlaceIndex(serialized: bytes)
        #endif
    }

    /// Reads an index written by `serialized()` into memory of its own. Checks the header, the length,
    /// that the ids are a permutation and the coordinates valid — O(n), a few milliseconds for a million
    /// places; the tree order itself is trusted (it was written together with the places), and the nodes
    /// are copied from the points again rather than read.
    public init(serialized bytes: UnsafeRawBufferPointer) throws(PlaceIndexDecodingError) {
        let (_, nodeSize, count, identity, layout) = try Self.header(bytes)
        var ids: UnsafeMutableBufferPointer<Int32>?
        if !identity {
            var seen = [UInt64](repeating: 0, count: (count + 63) / 64)
            var badPosition: Int?
            let buffer = UnsafeMutableBufferPointer<Int32>.allocate(capacity: count)
            for i in 0..<count {
                let id = Int32(
                    littleEndian: bytes.loadUnaligned(fromByteOffset: layout.idsOffset + 4 * i, as: Int32.self))
                buffer[i] = id
                let word = Int(id) >> 6
                let bit = UInt64(1) << UInt64(Int(id) & 63)
                if badPosition == nil && (id < 0 || Int(id) >= count || seen[word] & bit != 0) {
                    badPosition = i
                } else if badPosition == nil {
                    seen[word] |= bit
                }
            }
            if let badPosition {
                buffer.deallocate()
                throw .invalidEntry(position: badPosition)
            }
            ids = buffer
        }
        let points = UnsafeMutableBufferPointer<Double>.allocate(capacity: 2 * count)
        for i in 0..<2 * count {
            points[i] = Double(
                bitPattern: UInt64(
                    littleEndian: bytes.loadUnaligned(fromByteOffset: layout.pointsOffset + 8 * i, as: UInt64.self)))
        }
        let storage = IndexStorage(owning: points, ids: ids)
        for i in 0..<count where !Coordinate(latitude: points[2 * i + 1], longitude: points[2 * i]).isValid {
            throw .invalidEntry(position: i)
        }
        self.init(nodeSize: nodeSize, storage: storage)
    }
}
