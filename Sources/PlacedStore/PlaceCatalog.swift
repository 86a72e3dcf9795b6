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
    /// The prior of each kind in the file (by the pack's kind number) under the model they were looked
    /// up in: a candidate takes its prior from here instead of hashing its kind's string. Looked up
    /// again only when the ranker's model changes (SIGHUP); the model is compared on every ranking,
    /// which costs little while it is the same (its kinds dictionary is the same storage).
    private var kindPriors: (model: RankingModel, priors: [RankingModel.KindPrior])?
    private var areaMembers: [Int32] = []
    /// Places per cache generation: the neighbourhood of a few moves in a dense city.
    public static let defaultCacheLimit = 4096
    private let cacheLimit: Int
    /// Metres travelled since the mapping's pages were last released from RSS (`releaseDistance`),
    /// counting only steps shorter than `travelStep` between one query and the next: a drive, not the
    /// jumps of what-if queries across the map.
    private var travelled = 0.0
    private var lastQuery: Coordinate?
    /// After this many metres of travel (by default) the file's pages leave the process's RSS (one
    /// madvise; they stay in the page cache, so a later touch is a minor fault): RSS then follows the
    /// region of the last 50 km of a drive, not every page a long drive touched. Queries in between
    /// make no system call, and queries that jump about (what-if calls) never release what they use.
    public static let defaultReleaseDistance = 50_000.0
    public static let travelStep = 1_000.0
    private let releaseDistance: Double

    /// The file as it was mapped: a Refresh reloads only when the path now names another.
    public let identity: FileIdentity?
    public var count: Int { placeSet.count }
    public var path: String { placeSet.database.path }
    /// The pack's id (meta `pack_id`): names the places and their points whatever the file's name.
    public var packID: String { PlacePack.hex(placeSet.database.pack.id) }

    public init(
        path: String, cacheLimit: Int = PlaceCatalog.defaultCacheLimit,
        releaseDistance: Double = PlaceCatalog.defaultReleaseDistance
    ) throws(PlaceDatabaseError) {
        self.cacheLimit = cacheLimit
        self.releaseDistance = releaseDistance
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
        countQuery(at: center)
        return found
    }

    private func countQuery(at coordinate: Coordinate) {
        defer { lastQuery = coordinate }
        guard let lastQuery else { return }
        let step = LocalProjection(origin: lastQuery).distance(to: coordinate)
        guard step < Self.travelStep else { return }
        travelled += step
        if travelled >= releaseDistance { releaseResidentPages() }
    }

    /// The file's pages out of this process's RSS now (they stay cached unless the page cache is
    /// dropped too: a benchmark's cold start).
    public func releaseResidentPages() {
        travelled = 0
        placeSet.database.releaseResidentPages()
    }

    /// The one way places are ranked, for moves, visits, what-if queries and the benchmarks alike:
    /// the candidates within the fix's search radius, the spatial model, then the picks made near the
    /// fix (`now`: wall-clock seconds, for the picks' age).
    ///
    /// The candidates are read in place (`MappedCandidate`): only the places listed become `Place`s.
    /// `openState`, when given, tells whether a place is open at the fix's time, from its number in the
    /// file (as `place(at:)` of the database takes it), its raw `opening_hours` (read in place, nil for
    /// none) and its position, an own place's number -1; nil: unknown for every place.
    /// `own`: the own places near the fix (`OwnPlaceIndex.candidates`), ranked with the file's.
    public func rank(
        _ fix: Fix, with ranker: Ranker, picks: PickMemory, now: Double,
        openState: ((_ number: Int, _ openingHours: String?, _ coordinate: Coordinate) -> OpenState)? = nil,
        limit: Int, own: [OwnSite] = []
    ) throws -> Ranking {
        let radius = ranker.searchRadius(for: fix)
        let database = placeSet.database
        placeSet.index.within(radius, of: fix.coordinate, into: &neighbours)
        var found: [CatalogCandidate] = []
        found.reserveCapacity(neighbours.count + own.count)
        for site in own { found.append(.own(site)) }
        let areas = placeSet.areas
        let priors = priors(in: ranker.model)
        func add(_ number: Int) throws(PlaceDatabaseError) {
            guard number >= 0, number < count, let candidate = MappedCandidate(database, number: number, priors: priors)
            else {
                throw .corrupt(path: path, detail: "place \(number) does not decode")
            }
            found.append(.mapped(candidate))
        }
        for neighbour in neighbours where areas[neighbour.index] == 0 { try add(neighbour.index) }
        placeSet.areaIndex.members(within: radius, of: fix.coordinate, into: &areaMembers, scratch: &neighbours)
        for member in areaMembers { try add(Int(member)) }
        let ranking = try withExtendedLifetime(database) {
            try ranker.rank(
                fix: fix, candidates: found, picks: picks, now: now,
                openState: openState.map { state in
                    { (candidate: CatalogCandidate) in
                        switch candidate {
                        case .mapped(let place): state(place.number, place.openingHours, place.coordinate)
                        case .own(let site): state(-1, site.ownPlace.details.openingHours, site.reachCentre)
                        }
                    }
                },
                limit: limit)
        }
        if placeSet.isDamaged { throw PlaceDatabaseError.corrupt(path: path, detail: PlaceDatabase.shrunk) }
        countQuery(at: fix.coordinate)
        return ranking
    }

    /// `model.prior(ofKind:)` of every kind in the file, by kind number, and last that of the empty
    /// kind a number beyond them reads as (`MappedCandidate.kind`).
    private func priors(in model: RankingModel) -> [RankingModel.KindPrior] {
        if let kindPriors, kindPriors.model == model { return kindPriors.priors }
        let priors = (placeSet.database.kinds + [""]).map { model.prior(ofKind: $0) }
        kindPriors = (model, priors)
        return priors
    }

    /// The place with a stable id, ranked or not; nil when the file has none.
    public func place(withID id: String) throws(PlaceDatabaseError) -> Place? {
        guard let number = try placeSet.placeIndex(ofID: id) else { return nil }
        return try place(at: number)
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

/// A candidate read in place from the mapped pack for the ranker: its point, kind, area, box and
/// outline are where the file has them, and its strings are built only when the ranker asks (an id on
/// a tie, the whole `Place` for the few it lists). Valid while the catalog that made it is.
struct MappedCandidate: RankingCandidate {
    unowned(unsafe) let database: PlaceDatabase
    let number: Int
    /// Into `database.kinds`; the string is fetched when the ranker asks, so copying a candidate
    /// retains nothing.
    let kindCode: Int
    /// The kind's prior in the ranker's model, looked up by the catalog (`PlaceCatalog.priors(in:)`).
    let kindPrior: RankingModel.KindPrior
    let area: Double
    let coordinate: Coordinate
    let bounds: BoundingBox?
    /// (latitude, longitude) float64 pairs; empty for none.
    let outline: UnsafeRawBufferPointer
    let idBytes: UnsafeRawBufferPointer
    /// `PlaceDetails.encoded`'s bytes in the record; empty for none.
    let details: UnsafeRawBufferPointer

    /// Nil when the record does not decode. `priors`: by kind number in the model the candidate is
    /// ranked with, one more for a number beyond the file's kinds (`PlaceCatalog.priors(in:)`).
    init?(_ database: PlaceDatabase, number: Int, priors: [RankingModel.KindPrior]) {
        let pack = database.pack
        guard let record = pack.record(number) else { return nil }
        var reader = RecordReader(record)
        guard let flags = reader.byte(), reader.byte() != nil, let id = reader.span(), reader.span() != nil else {
            return nil
        }
        if flags & PlacePack.RecordFlag.address != 0 { guard reader.span() != nil else { return nil } }
        if flags & PlacePack.RecordFlag.names != 0 { guard reader.span() != nil else { return nil } }
        var area = 0.0
        if flags & PlacePack.RecordFlag.area != 0 {
            guard let stored = reader.double() else { return nil }
            area = stored
        }
        var bounds: BoundingBox?
        if flags & PlacePack.RecordFlag.bounds != 0 {
            guard let stored = reader.bounds() else { return nil }
            bounds = stored
        }
        var outline = UnsafeRawBufferPointer(start: nil, count: 0)
        if flags & PlacePack.RecordFlag.outline != 0 {
            guard let count = reader.varint(), count <= (reader.bytes.count - reader.position) / 16 else { return nil }
            outline = UnsafeRawBufferPointer(rebasing: reader.bytes[reader.position..<reader.position + 16 * count])
            reader.position += 16 * count
        }
        var details = UnsafeRawBufferPointer(start: nil, count: 0)
        if flags & PlacePack.RecordFlag.details != 0 {
            guard let stored = reader.span() else { return nil }
            details = stored
        }
        let code = Int(UInt32(littleEndian: pack[.kind].loadUnaligned(fromByteOffset: 4 * number, as: UInt32.self)))
        self.database = database
        self.number = number
        kindCode = code
        kindPrior = priors[min(code, priors.count - 1)]
        self.area = area
        coordinate = database.index.entry(atPosition: number).coordinate
        self.bounds = bounds
        self.outline = outline
        idBytes = id
        self.details = details
    }

    /// The raw `opening_hours`, read from the record without decoding the place: what a ranker that
    /// weighs closed places asks of every candidate (with `OpeningHoursCache.isOpen(_:at:unixSeconds:…)`).
    var openingHours: String? {
        let key = Array("opening_hours\u{1F}".utf8)
        for entry in details.split(separator: 0x1E) where entry.starts(with: key) {
            return String(decoding: entry.dropFirst(key.count), as: UTF8.self)
        }
        return nil
    }

    func lowerBoundDistance(from projection: LocalProjection) -> Double {
        if area > 0, let bounds { return Footprint.distanceFromOrigin(to: bounds, in: projection) }
        return projection.distance(to: coordinate)
    }

    /// As `Place.footprintDistance`, from the stored outline.
    func footprintDistance(from projection: LocalProjection) -> Double {
        if area > 0, outline.count >= 4 * 16 {
            return Footprint.distanceFromOrigin(toStoredRing: outline, in: projection)
        }
        if area > 0, let bounds { return Footprint.distanceFromOrigin(to: bounds, in: projection) }
        return projection.distance(to: coordinate)
    }

    var kind: String { kindCode < database.kinds.count ? database.kinds[kindCode] : "" }

    /// Looked up in the ranker's model when the catalog made the candidate.
    func prior(in model: RankingModel) -> RankingModel.KindPrior { kindPrior }

    var id: String { String(decoding: idBytes, as: UTF8.self) }

    func hasID(_ other: String) -> Bool { idBytes.elementsEqual(other.utf8) }

    var place: Place {
        (try? database.place(at: number)) ?? Place(id: id, name: "", kind: kind, coordinate: coordinate, area: area)
    }
}

/// A candidate of the places file or an own place: the ranker is generic over one candidate type.
enum CatalogCandidate: RankingCandidate {
    case mapped(MappedCandidate)
    case own(OwnSite)

    var kind: String {
        switch self {
        case .mapped(let c): c.kind
        case .own(let c): c.kind
        }
    }

    func prior(in model: RankingModel) -> RankingModel.KindPrior {
        switch self {
        case .mapped(let c): c.prior(in: model)
        case .own(let c): c.prior(in: model)
        }
    }

    var area: Double {
        switch self {
        case .mapped(let c): c.area
        case .own(let c): c.area
        }
    }

    func lowerBoundDistance(from projection: LocalProjection) -> Double {
        switch self {
        case .mapped(let c): c.lowerBoundDistance(from: projection)
        case .own(let c): c.lowerBoundDistance(from: projection)
        }
    }

    func footprintDistance(from projection: LocalProjection) -> Double {
        switch self {
        case .mapped(let c): c.footprintDistance(from: projection)
        case .own(let c): c.footprintDistance(from: projection)
        }
    }

    var id: String {
        switch self {
        case .mapped(let c): c.id
        case .own(let c): c.id
        }
    }

    func hasID(_ other: String) -> Bool {
        switch self {
        case .mapped(let c): c.hasID(other)
        case .own(let c): c.hasID(other)
        }
    }

    var place: Place {
        switch self {
        case .mapped(let c): c.place
        case .own(let c): c.place
        }
    }
}
