import PlacedTestSupport
import Testing

@testable import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

private typealias Neighbor = PlaceIndex.Neighbor

/// The specification the index must meet: every point, measured with the same metric, filtered,
/// sorted nearest first with ties by index.
private func bruteWithin(_ points: [Coordinate], _ radius: Double, of center: Coordinate) -> [Neighbor] {
    let projection = LocalProjection(origin: center)
    return points.indices
        .map { Neighbor(index: $0, distance: projection.distance(to: points[$0])) }
        .filter { $0.distance <= radius }
        .sorted { ($0.distance, $0.index) < ($1.distance, $1.index) }
}

private func bruteNearest(_ points: [Coordinate], _ k: Int, to center: Coordinate, maxDistance: Double) -> [Neighbor] {
    Array(bruteWithin(points, maxDistance, of: center).prefix(max(k, 0)))
}

/// A city: a few dense Gaussian clusters, a uniform sprinkle, and exact duplicates (a mall's shops
/// sharing one node position).
private func cityPoints(_ count: Int, seed: UInt64, center: Coordinate = Coordinate(latitude: 60.17, longitude: 24.94))
    -> [Coordinate]
{
    var random = SplitMix64(seed: seed)
    let clusters = (0..<5).map { _ in
        (center.latitude + random.gaussian() * 0.03, center.longitude + random.gaussian() * 0.06)
    }
    var points: [Coordinate] = []
    while points.count < count {
        switch random.next() % 10 {
        case 0..<7:
            let c = clusters[Int(random.next() % 5)]
            points.append(
                Coordinate(latitude: c.0 + random.gaussian() * 0.004, longitude: c.1 + random.gaussian() * 0.008))
        case 7..<9:
            points.append(
                Coordinate(
                    latitude: center.latitude + random.uniform(in: -0.1...0.1),
                    longitude: center.longitude + random.uniform(in: -0.2...0.2)))
        default:
            if let previous = points.last { points.append(previous) }  // duplicate
        }
    }
    return points
}

/// Uniform points in a box whose longitudes may run past ±180 (then wrapped back).
private func boxPoints(
    _ count: Int, seed: UInt64, latitudes: ClosedRange<Double>, longitudes: ClosedRange<Double>
) -> [Coordinate] {
    var random = SplitMix64(seed: seed)
    return (0..<count).map { _ in
        var lon = random.uniform(in: longitudes)
        if lon > 180 { lon -= 360 }
        if lon < -180 { lon += 360 }
        return Coordinate(latitude: random.uniform(in: latitudes), longitude: lon)
    }
}

/// Query centres: near data, at the data's edges and corners, beyond them, and far away.
private func queryCenters(_ points: [Coordinate], count: Int, seed: UInt64) -> [Coordinate] {
    var random = SplitMix64(seed: seed)
    let minLat = points.map(\.latitude).min()!
    let maxLat = points.map(\.latitude).max()!
    let minLon = points.map(\.longitude).min()!
    let maxLon = points.map(\.longitude).max()!
    // Corners and points just beyond the data, clamped and wrapped back onto the globe.
    func valid(_ lat: Double, _ lon: Double) -> Coordinate {
        Coordinate(latitude: min(90, max(-90, lat)), longitude: lon > 180 ? lon - 360 : (lon < -180 ? lon + 360 : lon))
    }
    var centers = [
        valid(minLat, minLon), valid(maxLat, maxLon), valid(minLat, maxLon), valid(maxLat, minLon),
        valid(minLat - 0.001, minLon - 0.002), valid(maxLat + 0.01, (minLon + maxLon) / 2),
        valid(maxLat + 0.05, maxLon + 0.05),
    ]
    while centers.count < count {
        let p = points[Int(random.next() % UInt64(points.count))]
        // A data point itself, or one jittered by up to ~2 km.
        let jitter = random.next() % 4 != 0
        centers.append(
            valid(
                p.latitude + (jitter ? random.gaussian() * 0.01 : 0),
                p.longitude + (jitter ? random.gaussian() * 0.02 : 0)))
    }
    return centers
}

private let radii: [Double] = [0, 1, 50, 250, 1000, 5000]

@Suite struct PlaceIndexTests {
    @Test(arguments: [1, 8, 64])
    func withinEqualsBruteForceInACity(nodeSize: Int) {
        let points = cityPoints(10_000, seed: 11)
        let index = PlaceIndex(coordinates: points, nodeSize: nodeSize)
        var reused: [Neighbor] = []
        var found = 0
        for (i, center) in queryCenters(points, count: 200, seed: 12).enumerated() {
            let radius = radii[i % radii.count]
            let expected = bruteWithin(points, radius, of: center)
            #expect(index.within(radius, of: center) == expected)
            index.within(radius, of: center, into: &reused)
            #expect(reused == expected)
            found += expected.count
        }
        #expect(found > 5000)  // the queries really hit data
    }

    @Test func nearestEqualsBruteForceInACity() {
        let points = cityPoints(10_000, seed: 21)
        let index = PlaceIndex(coordinates: points)
        var reused: [Neighbor] = []
        for (i, center) in queryCenters(points, count: 200, seed: 22).enumerated() {
            let k = [1, 5, 20, 100][i % 4]
            let maxDistance = [Double.infinity, 250, 30, 0][i % 3]
            let expected = bruteNearest(points, k, to: center, maxDistance: maxDistance)
            #expect(index.nearest(k, to: center, maxDistance: maxDistance) == expected)
            index.nearest(k, to: center, maxDistance: maxDistance, into: &reused)
            #expect(reused == expected)
        }
    }

    @Test func duplicatesAreTiedByIndex() {
        let spot = Coordinate(latitude: 60.17, longitude: 24.94)
        var points = cityPoints(2000, seed: 31)
        let copies = [5, 77, 500, 1500, 1999]
        for i in copies { points[i] = spot }
        let index = PlaceIndex(coordinates: points, nodeSize: 4)
        #expect(index.within(0, of: spot) == copies.map { Neighbor(index: $0, distance: 0) })
        #expect(index.nearest(3, to: spot) == copies.prefix(3).map { Neighbor(index: $0, distance: 0) })
        #expect(index.nearest(3, to: spot, maxDistance: 0) == copies.prefix(3).map { Neighbor(index: $0, distance: 0) })
    }

    /// The result sort (distribution sort, insertion and introsort inside) against the standard
    /// library's, on sizes around its thresholds, with ties, duplicates and crowded distances.
    @Test func resultSortMatchesStandardSort() {
        var random = SplitMix64(seed: 111)
        for n in [0, 1, 2, 24, 25, 26, 100, 1000, 5000] {
            for shape in 0..<4 {
                var items = (0..<n).map { i -> Neighbor in
                    let d: Double
                    switch shape {
                    case 0: d = random.uniform(in: 0...250)
                    case 1: d = Double(random.next() % 4) * 10  // a few rings: crowded buckets
                    case 2: d = 0  // all at one spot
                    default: d = random.next() % 2 == 0 ? 7 : random.uniform(in: 0...1e-300)  // extremes
                    }
                    return Neighbor(index: i, distance: d)
                }
                items.shuffle(using: &random)
                let expected = items.sorted { ($0.distance, $0.index) < ($1.distance, $1.index) }
                items.withUnsafeMutableBufferPointer { PlaceIndex.sortNearestFirst($0) }
                #expect(items == expected, "n \(n) shape \(shape)")
            }
        }
    }

    /// Many places at exactly the same distance (a ring of copies): one crowded bucket.
    @Test func crowdedRingEqualsBruteForce() {
        let center = Coordinate(latitude: 60.17, longitude: 24.94)
        var points = cityPoints(3000, seed: 121)
        let p = LocalProjection(origin: center)
        let ring = Coordinate(latitude: center.latitude + 100 / p.metresPerDegreeLatitude, longitude: center.longitude)
        for i in stride(from: 0, to: 3000, by: 7) { points[i] = ring }
        let index = PlaceIndex(coordinates: points)
        #expect(index.within(250, of: center) == bruteWithin(points, 250, of: center))
        #expect(index.nearest(300, to: center) == bruteNearest(points, 300, to: center, maxDistance: .infinity))
    }

    @Test func kBeyondCountReturnsEverythingInOrder() {
        let points = cityPoints(300, seed: 41)
        let index = PlaceIndex(coordinates: points, nodeSize: 16)
        let center = Coordinate(latitude: 60.2, longitude: 25.0)
        let all = index.nearest(10_000, to: center)
        #expect(all.count == 300)
        #expect(all == bruteNearest(points, 10_000, to: center, maxDistance: .infinity))
        #expect(index.within(.infinity, of: center) == all)
    }

    @Test func emptyIndexAndNonsenseQueriesFindNothing() {
        let empty = PlaceIndex(coordinates: [])
        let center = Coordinate(latitude: 60.17, longitude: 24.94)
        #expect(empty.isEmpty)
        #expect(empty.within(1000, of: center).isEmpty)
        #expect(empty.nearest(5, to: center).isEmpty)

        let index = PlaceIndex(coordinates: [center])
        #expect(index.within(0, of: center) == [Neighbor(index: 0, distance: 0)])
        #expect(index.within(-1, of: center).isEmpty)
        #expect(index.within(.nan, of: center).isEmpty)
        #expect(index.within(10, of: Coordinate(latitude: .nan, longitude: 24)).isEmpty)
        #expect(index.within(10, of: Coordinate(latitude: 91, longitude: 24)).isEmpty)
        #expect(index.nearest(0, to: center).isEmpty)
        #expect(index.nearest(-3, to: center).isEmpty)
        #expect(index.nearest(1, to: center, maxDistance: -1).isEmpty)
        #expect(index.nearest(1, to: Coordinate(latitude: 0, longitude: .infinity)).isEmpty)
    }

    /// Fiji straddles the antimeridian: data on both sides, queries on both sides and on it.
    @Test func antimeridianIsSearchedAcross() {
        let points =
            boxPoints(10_000, seed: 51, latitudes: -18.2...(-17.8), longitudes: 179.7...180.3)
            + [Coordinate(latitude: -18, longitude: 180), Coordinate(latitude: -18, longitude: -180)]
        let index = PlaceIndex(coordinates: points, nodeSize: 32)
        var centers = queryCenters(points, count: 100, seed: 52)
        var random = SplitMix64(seed: 53)
        for _ in 0..<60 {  // within 300 m of the antimeridian, on either side
            let offset = random.uniform(in: 0...0.003)
            centers.append(
                Coordinate(
                    latitude: random.uniform(in: -18.2...(-17.8)),
                    longitude: random.next() % 2 == 0 ? 180 - offset : -180 + offset))
        }
        centers += [
            Coordinate(latitude: -18, longitude: 180), Coordinate(latitude: -18, longitude: -180),
            Coordinate(latitude: -18, longitude: 179.9999), Coordinate(latitude: -18, longitude: -179.9999),
        ]
        var crossed = 0
        for (i, center) in centers.enumerated() {
            let radius = radii[i % radii.count]
            let expected = bruteWithin(points, radius, of: center)
            let nearest = Array(bruteWithin(points, .infinity, of: center).prefix(7))
            #expect(index.within(radius, of: center) == expected)
            #expect(index.nearest(7, to: center) == nearest)
            if (expected + nearest).contains(where: { (points[$0.index].longitude < 0) != (center.longitude < 0) }) {
                crossed += 1
            }
        }
        #expect(crossed > 30)  // many answers really came from the other side of ±180°
        // The two spellings of the antimeridian are one place apart by 0 m.
        let both = index.within(0, of: Coordinate(latitude: -18, longitude: 180)).map(\.index)
        #expect(both == [points.count - 2, points.count - 1])
    }

    /// High latitudes (Svalbard) and the pole itself: the degree box grows wide, results stay exact.
    @Test(arguments: [78.0...80.0, 89.5...90.0, -90.0...(-89.5)])
    func highLatitudesEqualBruteForce(latitudes: ClosedRange<Double>) {
        let points = boxPoints(5000, seed: 61, latitudes: latitudes, longitudes: -180...180)
        let index = PlaceIndex(coordinates: points)
        for (i, center) in queryCenters(points, count: 100, seed: 62).enumerated() {
            let radius = radii[i % radii.count] * 10
            #expect(index.within(radius, of: center) == bruteWithin(points, radius, of: center))
            #expect(index.nearest(9, to: center) == Array(bruteWithin(points, .infinity, of: center).prefix(9)))
        }
        let pole = Coordinate(latitude: latitudes.upperBound == 90 ? 90 : -90, longitude: 0)
        #expect(index.within(20_000, of: pole) == bruteWithin(points, 20_000, of: pole))
    }

    /// The metric is the local tangent plane; how far that is from the geodesic is part of the contract.
    @Test func distancesAreTrueMetresToTheDocumentedAccuracy() {
        var random = SplitMix64(seed: 71)
        for _ in 0..<2000 {
            let origin = Coordinate(latitude: random.uniform(in: -80...80), longitude: random.uniform(in: -180...180))
            let metres = [250.0, 5000][Int(random.next() % 2)]
            let bearing = random.uniform(in: 0...(2 * Double.pi))
            // Aim roughly `metres` away, then judge against Vincenty's geodesic length.
            let p = LocalProjection(origin: origin)
            var lon = origin.longitude + metres * sin(bearing) / p.metresPerDegreeLongitude
            if lon > 180 { lon -= 360 } else if lon < -180 { lon += 360 }
            let target = Coordinate(
                latitude: origin.latitude + metres * cos(bearing) / p.metresPerDegreeLatitude, longitude: lon)
            let geodesic = Geodesy.distance(origin, target)
            let error = abs(PlaceIndex.distance(from: origin, to: target) - geodesic)
            #expect(error <= (metres == 250 ? 0.012 : 0.001 * geodesic), "\(origin) → \(target)")
        }
    }

    @Test func serializedIndexAnswersTheSame() throws {
        let points = cityPoints(5000, seed: 81) + [Coordinate(latitude: -90, longitude: -180)]
        let index = PlaceIndex(coordinates: points, nodeSize: 10)
        let bytes = index.serialized()
        let decoded = try PlaceIndex(serialized: bytes)
        #expect(decoded.count == index.count && decoded.nodeSize == 10)
        #expect(decoded.serialized() == bytes)
        for center in queryCenters(points, count: 50, seed: 82) {
            #expect(decoded.within(500, of: center) == index.within(500, of: center))
            #expect(decoded.nearest(4, to: center) == index.nearest(4, to: center))
        }
        let empty = PlaceIndex(coordinates: []).serialized()
        #expect(try PlaceIndex(serialized: empty).isEmpty)
    }

    @Test func damagedBytesAreRejected() {
        let points = cityPoints(101, seed: 91)
        let bytes = PlaceIndex(coordinates: points).serialized()
        func decode(_ bytes: [UInt8]) throws(PlaceIndexDecodingError) { _ = try PlaceIndex(serialized: bytes) }
        #expect(throws: PlaceIndexDecodingError.badMagic) { try decode([]) }
        #expect(throws: PlaceIndexDecodingError.badMagic) { try decode([0x51] + bytes.dropFirst()) }
        var version = bytes
        version[4] = 9
        #expect(throws: PlaceIndexDecodingError.unsupportedVersion(9)) { try decode(version) }
        #expect(throws: PlaceIndexDecodingError.wrongLength(expected: bytes.count, actual: bytes.count - 8)) {
            try decode(Array(bytes.dropLast(8)))
        }
        var repeated = bytes  // id of entry 1 := id of entry 0 (ids follow the 48-byte header)
        repeated[52..<56] = bytes[48..<52]
        #expect(throws: PlaceIndexDecodingError.invalidEntry(position: 1)) { try decode(repeated) }
        var outside = bytes  // a latitude of 1e300
        let lastLatitude = bytes.count - 8
        withUnsafeBytes(of: (1e300).bitPattern.littleEndian) { outside.replaceSubrange(lastLatitude..., with: $0) }
        #expect(throws: PlaceIndexDecodingError.invalidEntry(position: 100)) { try decode(outside) }
    }

    /// Leaves of one point make 19 levels of internal nodes: three bands of node blocks, the first two
    /// of nine full levels. Every answer still equals the brute-force scan.
    @Test func descentAcrossThreeBandsOfNodeBlocks() {
        let points = cityPoints(1_200_000, seed: 111)
        let index = PlaceIndex(coordinates: points, nodeSize: 1)
        #expect(index.layout.depth > 2 * NodeLayout.levelsPerBlock)
        for (i, center) in queryCenters(points, count: 10, seed: 112).enumerated() {
            let radius = [50.0, 250, 1000][i % 3]
            #expect(index.within(radius, of: center) == bruteWithin(points, radius, of: center))
            #expect(index.nearest(7, to: center) == bruteNearest(points, 7, to: center, maxDistance: .infinity))
        }
    }

    /// Every internal node has an entry of its own inside the layout, holding its split; a block of nine
    /// full levels is a page; a descent from the root to any leaf reads one block a band.
    @Test(arguments: [(0, 64), (65, 64), (67, 64), (131, 64), (1000, 1), (150_000, 1), (40_000, 10), (1_000_000, 64)])
    func nodeLayoutHoldsEveryInternalNodeOnce(count: Int, nodeSize: Int) {
        let layout = NodeLayout(count: count, nodeSize: nodeSize)
        var entries = Set<Int>()
        var deepest = -1
        var pagesOnAPath: [Set<Int>] = []
        func visit(_ left: Int, _ right: Int, _ heap: Int, _ depth: Int, _ pages: Set<Int>) {
            guard right - left > nodeSize else {
                pagesOnAPath.append(pages)
                return
            }
            let entry = layout.entry(heap: heap, depth: depth)
            #expect(entry >= 0 && entry < layout.entryCount)
            #expect(entries.insert(entry).inserted)
            if depth % NodeLayout.levelsPerBlock == 0 && depth < layout.depth - NodeLayout.levelsPerBlock + 1 {
                #expect(entry % 512 == 0, "a full block starts a page")
            }
            deepest = max(deepest, depth)
            let m = (left + right) >> 1
            let page = pages.union([8 * entry / 4096])
            visit(left, m - 1, 2 * heap, depth + 1, page)
            visit(m + 1, right, 2 * heap + 1, depth + 1, page)
        }
        if count > 0 { visit(0, count - 1, 1, 0, []) }
        #expect(deepest + 1 == layout.depth)
        let bands = (layout.depth + NodeLayout.levelsPerBlock - 1) / NodeLayout.levelsPerBlock
        // A last band of short blocks may straddle a page boundary: one page more at most.
        #expect(pagesOnAPath.allSatisfy { $0.count <= bands + 1 })
        #expect(layout.entryCount < max(64, 2 * entries.count + 512 * 513), "no more than padding beside the nodes")

        let points = cityPoints(count, seed: 5)
        let index = PlaceIndex(coordinates: points, nodeSize: nodeSize)
        let nodes = index.storage.nodes!
        var checked = 0
        func check(_ left: Int, _ right: Int, _ heap: Int, _ depth: Int) {
            guard right - left > nodeSize, checked < 5000 else { return }
            let m = (left + right) >> 1
            let entry = layout.entry(heap: heap, depth: depth)
            let point = index.entry(atPosition: m).coordinate
            #expect(nodes[entry] == (depth % 2 == 0 ? point.longitude : point.latitude))
            checked += 1
            check(left, m - 1, 2 * heap, depth + 1)
            check(m + 1, right, 2 * heap + 1, depth + 1)
        }
        if count > 0 { check(0, count - 1, 1, 0) }
    }

    @Test func renumberingByPositionKeepsTheAnswers() {
        let points = cityPoints(3000, seed: 101)
        let index = PlaceIndex(coordinates: points)
        #expect(!index.isNumberedByPosition)
        let (renumbered, order) = index.renumberedByPosition()
        #expect(renumbered.isNumberedByPosition)
        #expect(Set(order).count == points.count)
        let reordered = order.map { points[Int($0)] }
        for center in queryCenters(points, count: 40, seed: 102) {
            let answer = renumbered.within(300, of: center)
            #expect(answer == bruteWithin(reordered, 300, of: center))
            #expect(Set(answer.map { Int(order[$0.index]) }) == Set(index.within(300, of: center).map(\.index)))
        }
        for position in [0, 1499, 2999] {
            #expect(renumbered.entry(atPosition: position).coordinate == reordered[position])
        }
    }

    /// The importer sorts the tree's two halves side by side: the same tree as one thread's, whichever
    /// half runs first, since the halves share nothing. (A fake runs them here, one after the other in
    /// the other order; PlacedThreadsTests runs `runConcurrently` itself.)
    @Test(arguments: [PlaceIndex.worthAThread + 1, 200_000, 200_001]) func halvesSortedApartMakeTheSameTree(count: Int)
    {
        let points = cityPoints(count, seed: UInt64(count))
        func interleaved() -> UnsafeMutableBufferPointer<Double> {
            let buffer = UnsafeMutableBufferPointer<Double>.allocate(capacity: 2 * points.count)
            for (i, point) in points.enumerated() {
                buffer[2 * i] = point.longitude
                buffer[2 * i + 1] = point.latitude
            }
            return buffer
        }
        let alone = PlaceIndex(sortingInterleaved: interleaved())
        var halves = 0
        let split = PlaceIndex(sortingInterleaved: interleaved()) { other, this in
            halves += 1
            other()
            this()
        }
        #expect(halves == 1)
        #expect(split.serialized() == alone.serialized())
        #expect(split.order == alone.order)
        // Below the threshold no second thread is asked for.
        var asked = false
        let few = UnsafeMutableBufferPointer<Double>.allocate(capacity: 2 * PlaceIndex.worthAThread)
        few.initialize(repeating: 0)
        _ = PlaceIndex(sortingInterleaved: few) { other, this in
            asked = true
            other()
            this()
        }
        #expect(!asked)
    }

    @Test func positionsInvertTheOrder() {
        let points = cityPoints(50_000, seed: 12)
        let index = PlaceIndex(coordinates: points)
        let order = index.order
        let positions = index.positions
        #expect(positions.count == points.count)
        #expect(order.indices.allSatisfy { positions[Int(order[$0])] == Int32($0) })
        #expect(!index.isNumberedByPosition && order != positions)
        let (renumbered, _) = index.renumberedByPosition()
        #expect(renumbered.positions == Array(0..<Int32(points.count)))
    }
}

/// The index as the daemon uses it: in place in the bytes of a mapped file, nothing copied.
@Suite struct MappedPlaceIndexTests {
    final class Bytes {
        let raw: UnsafeMutableRawBufferPointer
        init(_ bytes: [UInt8]) {
            raw = .allocate(byteCount: bytes.count, alignment: 4096)
            bytes.withUnsafeBytes { raw.copyMemory(from: $0) }
        }
        deinit { raw.deallocate() }
    }

    @Test(arguments: [1, 10, 64]) func answersAsTheIndexItWasWrittenFrom(nodeSize: Int) throws {
        let points = cityPoints(20_000, seed: UInt64(nodeSize)) + [Coordinate(latitude: -90, longitude: -180)]
        for renumbered in [false, true] {
            var index = PlaceIndex(coordinates: points, nodeSize: nodeSize)
            var reference = points
            if renumbered {
                let (byPosition, order) = index.renumberedByPosition()
                index = byPosition
                reference = order.map { points[Int($0)] }
            }
            let bytes = Bytes(index.serialized())
            let mapped = try PlaceIndex(mapping: UnsafeRawBufferPointer(bytes.raw), owner: bytes)
            #expect(mapped.count == index.count && mapped.isNumberedByPosition == renumbered)
            for center in queryCenters(reference, count: 100, seed: 7) {
                #expect(mapped.within(300, of: center) == bruteWithin(reference, 300, of: center))
                #expect(mapped.nearest(5, to: center) == bruteNearest(reference, 5, to: center, maxDistance: .infinity))
            }
        }
    }

    /// A file of the schema before node blocks holds format 2: mapped, its nodes are copied from its
    /// points, and it answers as the index it was written from; written again it is format 3.
    @Test(arguments: [1, 64]) func formatTwoWithoutNodesAnswersTheSame(nodeSize: Int) throws {
        let points = cityPoints(30_000, seed: 41)
        let (index, order) = PlaceIndex(coordinates: points, nodeSize: nodeSize).renumberedByPosition()
        let reference = order.map { points[Int($0)] }
        let old = index.serialized(formatVersion: 2)
        #expect(old.count == 48 + 16 * points.count)
        let bytes = Bytes(old)
        let mapped = try PlaceIndex(mapping: UnsafeRawBufferPointer(bytes.raw), owner: bytes)
        for center in queryCenters(reference, count: 60, seed: 42) {
            #expect(mapped.within(250, of: center) == bruteWithin(reference, 250, of: center))
            #expect(mapped.nearest(3, to: center) == bruteNearest(reference, 3, to: center, maxDistance: .infinity))
        }
        #expect(mapped.serialized() == index.serialized())
        var streamed: [UInt8] = []
        mapped.serializeNumberedByPosition { streamed += $0 }
        #expect(streamed == index.serialized())
        #expect(streamed.count == PlaceIndex.serializedSize(count: points.count, nodeSize: nodeSize))
    }

    @Test func borrowedIdsOutOfRangeAreNeverReturned() throws {
        let points = cityPoints(500, seed: 3)
        var serialized = PlaceIndex(coordinates: points, nodeSize: 8).serialized()
        // Every stored id := 9999, out of range: the index finds nothing rather than a wrong number.
        for i in 0..<points.count {
            withUnsafeBytes(of: Int32(9999).littleEndian) {
                serialized.replaceSubrange(48 + 4 * i..<52 + 4 * i, with: $0)
            }
        }
        let bytes = Bytes(serialized)
        let mapped = try PlaceIndex(mapping: UnsafeRawBufferPointer(bytes.raw), owner: bytes)
        #expect(mapped.within(100_000, of: points[0]).isEmpty)
        #expect(mapped.nearest(3, to: points[0]).isEmpty)
    }
}
