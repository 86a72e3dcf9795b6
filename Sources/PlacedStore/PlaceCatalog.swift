import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

/// The places the daemon ranks from: the `PlaceSet` used in place from the file's mapping (spatial
/// index, columns, records) and its index of the areas by reach, since an area reaches beyond its
/// point.
///
/// Points are found through the set's index with the search radius itself, areas through their
/// reach; a candidate's record is decoded from the mapping (a bounded cache keeps the neighbourhood of
/// the last moves). Nothing per place is read at start, so start-up costs the same at 1,000 places as
/// at 30 million, and a query makes no system call.
public final class PlaceCatalog {
    public let placeSet: PlaceSet
    /// Places decoded from the file, in two generations: when `recent` is full it becomes `older`, so
    /// what the last moves used (a large park near everywhere) survives the turnover.
    private var recent: [Int: Place] = [:]
    private var older: [Int: Place] = [:]
    private var neighbours: [PlaceIndex.Neighbor] = []
    private var areaMembers: [Int32] = []
    /// Places per cache generation: the neighbourhood of a few moves in a dense city.
    public static let defaultCacheLimit = 4096
    private let cacheLimit: Int

    /// The file as it was mapped: a Refresh reloads only when the path now names another.
    public let identity: FileIdentity?
    public var count: Int { placeSet.count }
    public var path: String { placeSet.database.path }

    public init(path: String, cacheLimit: Int = PlaceCatalog.defaultCacheLimit) throws(PlaceDatabaseError) {
        self.cacheLimit = cacheLimit
        let database = try PlaceDatabase.open(path: path)
        identity = database.identity
        placeSet = try database.load()
    }

    /// Every place whose footprint may lie within `radius` of `center`.
    public func candidates(within radius: Double, of center: Coordinate) throws(PlaceDatabaseError) -> [Place] {
        placeSet.index.within(radius, of: center, into: &neighbours)
        var found: [Place] = []
        found.reserveCapacity(neighbours.count)
        let areas = placeSet.areas
        for neighbour in neighbours where areas[neighbour.index] == 0 {
            found.append(try place(at: neighbour.index))
        }
        placeSet.areaIndex.members(within: radius, of: center, into: &areaMembers, scratch: &neighbours)
        for member in areaMembers {
            found.append(try place(at: Int(member)))
        }
        if placeSet.isDamaged { throw .corrupt(path: path, detail: PlaceDatabase.shrunk) }
        return found
    }

    /// The one way places are ranked, for moves, visits, what-if queries and the benchmarks alike:
    /// the candidates within the fix's search radius, the spatial model, then the picks made near the
    /// fix (`now`: wall-clock seconds, for the picks' age).
    public func rank(_ fix: Fix, with ranker: Ranker, picks: PickMemory, now: Double, limit: Int) throws -> Ranking {
        let candidates = try candidates(within: ranker.searchRadius(for: fix), of: fix.coordinate)
        return try ranker.rank(fix: fix, candidates: candidates, picks: picks, now: now, limit: limit)
    }

    public func contains(id: String) -> Bool {
        ((try? placeSet.placeIndex(ofID: id)) ?? nil) != nil
    }

    private func place(at index: Int) throws(PlaceDatabaseError) -> Place {
        if let cached = recent[index] { return cached }
        let place: Place
        if let kept = older[index] { place = kept } else { place = try placeSet.place(at: index) }
        if recent.count >= cacheLimit {
            older = recent
            recent = [:]
        }
        recent[index] = place
        return place
    }
}

/// Which file a path names, and which version of it: an import renames a new file into place.
public struct FileIdentity: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modified: Int64

    init(device: UInt64, inode: UInt64, size: Int64, modified: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modified = modified
    }

    public init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
    }
}
