/// Coordinates of footprints that reach beyond them, found by "may come within R of here".
///
/// `PlaceIndex` finds coordinates, but an area reaches beyond its coordinate (a point inside it), so
/// a radius query on coordinates alone would miss a park whose edge is near and whose inside point is
/// not. Members are therefore grouped by *reach*, the farthest their bounding box extends from their
/// coordinate: points (reach 0) in one index queried with R exactly, areas in tiers of doubling reach,
/// each queried with R plus its tier's bound. The few large areas widen only their own small query,
/// never the dense one of points.
public struct ReachIndex: Sendable {
    private let tiers: [Tier]

    private struct Tier: Sendable {
        /// Every member reaches at most this far from its coordinate, metres.
        var reach: Double
        /// Numbered by position: the member at tree position p is `members[p]`.
        var index: PlaceIndex
        var members: MemberList
    }

    /// Smallest tier bound above 0, metres; bounds double from here.
    static let firstReach = 16.0

    /// Member `i` is at `coordinates[i]` and reaches `reaches[i]` metres from it; a member with an
    /// invalid coordinate is never found. Queries report `members[i]` for it (by default i itself).
    public init(coordinates: [Coordinate], reaches: [Double], members: [Int32]? = nil) {
        precondition(coordinates.count == reaches.count, "one reach per coordinate")
        precondition(members == nil || members!.count == coordinates.count, "one member number per coordinate")
        var groups: [Int: [Int32]] = [:]  // tier number → members; 0 is the points
        for (member, coordinate) in coordinates.enumerated() where coordinate.isValid {
            groups[Self.tier(forReach: reaches[member]), default: []].append(Int32(member))
        }
        tiers = groups.keys.sorted().map { tier in
            let items = groups[tier]!
            let (index, order) = PlaceIndex(coordinates: items.map { coordinates[Int($0)] }).renumberedByPosition()
            let numbers = UnsafeMutableBufferPointer<Int32>.allocate(capacity: items.count)
            for (position, item) in order.enumerated() {
                let number = items[Int(item)]
                numbers[position] = members?[Int(number)] ?? number
            }
            return Tier(reach: Self.bound(ofTier: tier), index: index, members: MemberList(owning: numbers))
        }
    }

    /// Members that may lie within `radius` metres of `center` (a superset: the ranker measures each
    /// footprint exactly), grouped by tier, each tier nearest first.
    public func members(within radius: Double, of center: Coordinate) -> [Int32] {
        var found: [Int32] = []
        var scratch: [PlaceIndex.Neighbor] = []
        members(within: radius, of: center, into: &found, scratch: &scratch)
        return found
    }

    /// The same into `found` (emptied first), with `scratch` for the index queries: a caller that
    /// keeps both, as the daemon does for every move, allocates nothing once they have grown.
    public func members(
        within radius: Double, of center: Coordinate, into found: inout [Int32],
        scratch: inout [PlaceIndex.Neighbor]
    ) {
        found.removeAll(keepingCapacity: true)
        for tier in tiers {
            tier.index.within(radius + tier.reach, of: center, into: &scratch)
            let members = tier.members.numbers
            for n in scratch { found.append(members[n.index]) }
        }
    }

    /// 0 for reach 0, then 1 for reach ≤ 16 m, 2 for ≤ 32 m, …
    static func tier(forReach reach: Double) -> Int {
        guard reach > 0 else { return 0 }
        var tier = 1
        var bound = firstReach
        while bound < reach, tier < 40 {
            bound *= 2
            tier += 1
        }
        return tier
    }

    static func bound(ofTier tier: Int) -> Double {
        guard tier > 0 else { return 0 }
        var bound = firstReach
        for _ in 1..<tier { bound *= 2 }
        return bound
    }
}

extension Place {
    /// Metres from the coordinate to the farthest corner of the bounding box; 0 for a point.
    public var reach: Double {
        guard area > 0, let box = bounds else { return 0 }
        let projection = LocalProjection(origin: coordinate)
        var farthest = 0.0
        for latitude in [box.minLatitude, box.maxLatitude] {
            for longitude in [box.minLongitude, box.maxLongitude] {
                farthest = max(farthest, projection.distance(to: Coordinate(latitude: latitude, longitude: longitude)))
            }
        }
        // The index measures in the query's plane, the reach in the place's: a part per thousand at
        // 10 km covers the difference.
        return farthest * 1.001
    }
}

/// A tier's member numbers by tree position, owned or borrowed from a mapped file.
private final class MemberList: @unchecked Sendable {
    let numbers: UnsafeBufferPointer<Int32>
    private let owner: AnyObject?

    init(owning numbers: UnsafeMutableBufferPointer<Int32>) {
        self.numbers = UnsafeBufferPointer(numbers)
        owner = nil
    }

    init(borrowing numbers: UnsafeBufferPointer<Int32>, owner: AnyObject) {
        self.numbers = numbers
        self.owner = owner
    }

    deinit { if owner == nil { numbers.deallocate() } }
}

/// Why bytes are not a `ReachIndex`.
public enum ReachIndexDecodingError: Error, Equatable, Sendable, CustomStringConvertible {
    case badMagic
    case badTier(Int, String)

    public var description: String {
        switch self {
        case .badMagic: "not a reach index (bad magic)"
        case .badTier(let tier, let reason): "reach index tier \(tier): \(reason)"
        }
    }
}

extension ReachIndex {
    // Layout, little-endian: "RCHX", version u32 (1), tier count u32, zero u32; per tier reach f64, index
    // offset u64, index length u64, members offset u64 (offsets from the start, 8-aligned, an index's
    // to its `serializedAlignment`); then each tier's `PlaceIndex.serialized()` and its member numbers,
    // i32 × the index's count.
    static let magic: [UInt8] = Array("RCHX".utf8)

    /// The index as bytes (`init(mapping:owner:)` uses them in place).
    public func serialized() -> [UInt8] { serialized(indexFormat: PlaceIndex.formatVersion) }

    /// With the tiers' indexes in format 2 (no nodes), as files of schema 4 hold them: for tests.
    package func serialized(indexFormat: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 16 + 32 * tiers.count)
        for (i, byte) in Self.magic.enumerated() { bytes[i] = byte }
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            withUnsafeBytes(of: value.littleEndian) { raw in
                for (i, byte) in raw.enumerated() { bytes[offset + i] = byte }
            }
        }
        put(UInt32(1), at: 4)
        put(UInt32(tiers.count), at: 8)
        for (number, tier) in tiers.enumerated() {
            let entry = 16 + 32 * number
            put(tier.reach.bitPattern, at: entry)
            let index = tier.index.serialized(formatVersion: indexFormat)
            // A tier deep enough for more than one band of node blocks starts on a page of its own (the
            // reach index itself starts on one in the places file), so that each block is one page.
            let alignment = indexFormat >= 3 ? tier.index.serializedAlignment : 8
            bytes += [UInt8](repeating: 0, count: (alignment - bytes.count % alignment) % alignment)
            put(UInt64(bytes.count), at: entry + 8)
            put(UInt64(index.count), at: entry + 16)
            bytes += index
            bytes += [UInt8](repeating: 0, count: (8 - bytes.count % 8) % 8)
            put(UInt64(bytes.count), at: entry + 24)
            for member in tier.members.numbers { withUnsafeBytes(of: member.littleEndian) { bytes += $0 } }
            bytes += [UInt8](repeating: 0, count: (8 - bytes.count % 8) % 8)
        }
        return bytes
    }

    /// Uses bytes written by `serialized()` where they lie (8-aligned), as `PlaceIndex(mapping:owner:)`
    /// does: the tier table is checked against the length, nothing else is read.
    public init(mapping bytes: UnsafeRawBufferPointer, owner: AnyObject) throws(ReachIndexDecodingError) {
        guard bytes.count >= 16, bytes.prefix(4).elementsEqual(Self.magic),
            UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self)) == 1
        else { throw .badMagic }
        let count = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        guard count <= 64, bytes.count >= 16 + 32 * count else { throw .badTier(count, "table runs past the end") }
        func word(_ offset: Int) -> Int {
            Int(truncatingIfNeeded: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
        }
        var tiers: [Tier] = []
        for number in 0..<count {
            let entry = 16 + 32 * number
            let reach = Double(bitPattern: UInt64(truncatingIfNeeded: word(entry)))
            let (indexOffset, indexLength, membersOffset) = (word(entry + 8), word(entry + 16), word(entry + 24))
            guard reach.isFinite, reach >= 0, indexOffset >= 0, indexLength >= 0, indexOffset <= bytes.count,
                indexLength <= bytes.count - indexOffset, membersOffset % 4 == 0, membersOffset >= 0,
                membersOffset <= bytes.count
            else { throw .badTier(number, "offsets or reach out of range") }
            let index: PlaceIndex
            do {
                index = try PlaceIndex(
                    mapping: UnsafeRawBufferPointer(rebasing: bytes[indexOffset..<indexOffset + indexLength]),
                    owner: owner)
            } catch {
                throw .badTier(number, error.description)
            }
            guard index.isNumberedByPosition, 4 * index.count <= bytes.count - membersOffset,
                let base = bytes.baseAddress
            else { throw .badTier(number, "members run past the end") }
            let members = UnsafeBufferPointer(
                start: (base + membersOffset).assumingMemoryBound(to: Int32.self), count: index.count)
            tiers.append(Tier(reach: reach, index: index, members: MemberList(borrowing: members, owner: owner)))
        }
        self.tiers = tiers
    }
}
