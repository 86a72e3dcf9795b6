import PlacedCore
import PlacedStore

#if canImport(Glibc)
    import Glibc
#endif

/// The places the daemon ranks from: the loaded `PlaceSet` (spatial index and columns in memory,
/// names and shapes in the file) plus every area in full, since an area reaches beyond its point.
///
/// Points are found through the set's index with the search radius itself and read from the file
/// only when they are candidates (a bounded cache keeps the neighbourhood of the last moves);
/// areas, a small share of any extract, live in a `PlaceFinder` that accounts for their reach.
final class PlaceCatalog {
    let placeSet: PlaceSet
    private let areas: PlaceFinder
    private var cache: [Int: Place] = [:]
    private var neighbours: [PlaceIndex.Neighbor] = []
    static let cacheLimit = 4096

    var count: Int { placeSet.count }
    var path: String { placeSet.database.path }
    /// The file as it was just before loading: nil when it could not be examined.
    let file: FileIdentity?

    init(path: String) throws(PlaceDatabaseError) {
        file = FileIdentity(path: path)
        placeSet = try PlaceDatabase.open(path: path).load()
        var areaPlaces: [Place] = []
        for index in 0..<placeSet.count where placeSet.areas[index] > 0 {
            areaPlaces.append(try placeSet.place(at: index))
        }
        areas = PlaceFinder(places: areaPlaces)
    }

    /// Every place whose footprint may lie within `radius` of `center`.
    func candidates(within radius: Double, of center: Coordinate) throws(PlaceDatabaseError) -> [Place] {
        placeSet.index.within(radius, of: center, into: &neighbours)
        var found: [Place] = []
        found.reserveCapacity(neighbours.count)
        for neighbour in neighbours where placeSet.areas[neighbour.index] == 0 {
            found.append(try place(at: neighbour.index))
        }
        found += areas.candidates(within: radius, of: center)
        return found
    }

    func contains(id: String) -> Bool {
        (try? placeSet.placeIndex(ofID: id)) != nil
    }

    private func place(at index: Int) throws(PlaceDatabaseError) -> Place {
        if let cached = cache[index] { return cached }
        let place = try placeSet.place(at: index)
        if cache.count >= Self.cacheLimit { cache.removeAll(keepingCapacity: true) }
        cache[index] = place
        return place
    }
}

/// Which file a path names, and its version: an import renames a new file into place (another
/// inode), an edit in place changes the size or the modification time.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modified: timespec

    init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        size = Int64(status.st_size)
        modified = status.st_mtim
    }

    static func == (a: FileIdentity, b: FileIdentity) -> Bool {
        (a.device, a.inode, a.size, a.modified.tv_sec, a.modified.tv_nsec)
            == (b.device, b.inode, b.size, b.modified.tv_sec, b.modified.tv_nsec)
    }
}
