import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

/// Gathers places, the map layer and the addresses places may borrow while blocks are decoded.
/// Node places are complete at once; ways and relations wait for `finish()`, when every node
/// location and way is known, because a file need not list nodes first and relations come last.
struct ExtractCollector {
    /// Where the map layer's features go as they are made; without one only what addresses need is
    /// kept (named streets, buildings with an address).
    let mapLayer: MapFeatureSink?
    var includesMapLayer: Bool { mapLayer != nil }
    var nodes = NodeLocations()
    var ways = WayStore()
    var relationCount = 0
    /// Which elements the current read keeps (`Pass`).
    var pass = Pass.all
    /// Ways seen in the file, kept or not.
    private(set) var waysSeen = 0
    /// In `.memberWays`: the multipolygon members the first pass did not keep, sorted.
    private var wantedWays: [Int64] = []

    /// One read keeps everything in memory (`.all`: every node's location and every way's refs, the
    /// ways to make waiting for `finish`). The disk-backed import reads the file once with every node's
    /// location going to a `NodeLocationFile` and each way made as it comes (a sorted file lists every
    /// node before the first way), the multipolygons waiting; then the way blocks again for the
    /// multipolygons' member ways (their refs, for `finish`). Nothing per node or way is held in memory
    /// but a multipolygon's members, and the addresses go to an `AddressSpill`.
    enum Pass {
        case all, nodesAndWays, memberWays
    }
    /// The first failure the decoder's callbacks cannot throw (nodes out of order, a full disk).
    private(set) var failure: OSMError?
    /// The memory the disk-backed import's answers are sorted in.
    var memoryLimit = ImportPasses.defaultLimit
    private(set) var incompleteWays = 0
    /// Where the places go as they are made; `finish` has their addresses assigned there.
    let sink: PlaceSink
    /// The first place's latitude, where the address grids are measured.
    private var firstLatitude: Double?
    private var addresses = AddressBook()
    /// The disk-backed import's address book, instead of `addresses`.
    var addressSpill: AddressSpill?
    /// The disk-backed import's places and addresses, filed into `sink` and `addressSpill` on a thread of
    /// their own (`startSpillWorker`).
    private var spillWorker: SpillWorker?

    /// What an element's tags make of it.
    struct Description {
        var place: (name: String, kind: String, address: String?)?
        var localizedNames: [String: String]
        /// A place's details, and the values dropped from them as too long.
        var details = PlaceDetails()
        var tooLongDetails: [(key: String, bytes: Int)] = []
        var feature: MapRules.Classification?
        var name: String?
        /// A building's address that places inside or near it may borrow.
        var buildingAddress: String?

        /// A named street, path or square: "near <street>" for places far from any address.
        var streetName: String? {
            guard let feature, [.street, .path, .square].contains(feature.kind) else { return nil }
            return name
        }
    }

    private struct PendingWay {
        let number: Int
        let isClosed: Bool
        let description: Description
    }
    private var pendingWays: [PendingWay] = []

    private struct PendingRelation {
        let id: Int64
        let memberWays: [Int64]
        let description: Description
    }
    private var pendingRelations: [PendingRelation] = []

    init(mapLayer: MapFeatureSink?, sink: PlaceSink) {
        self.mapLayer = mapLayer
        self.sink = sink
    }

    /// What the places' details came to: the opening hours that do not parse, the values too long to keep.
    private(set) var detailStatistics = DetailStatistics()
    /// Each distinct `opening_hours` value parsed once.
    private let openingHours = OpeningHoursCache(limit: 1 << 16)

    /// Consumes the place: it is moved into the spill worker's batch, not copied (a copy retains and
    /// releases every field of every place).
    private mutating func emit(_ place: consuming Place, tooLongDetails: [(key: String, bytes: Int)] = []) {
        if firstLatitude == nil { firstLatitude = place.coordinate.latitude }
        countDetails(of: place, tooLong: tooLongDetails)
        if let spillWorker { spillWorker.add(.place(place)) } else { sink.add(place) }
    }

    private mutating func countDetails(of place: borrowing Place, tooLong: [(key: String, bytes: Int)]) {
        if !place.details.isEmpty { detailStatistics.placesWithDetails += 1 }
        for (key, bytes) in tooLong {
            detailStatistics.droppedValues += 1
            if detailStatistics.dropped.count < DetailStatistics.examples {
                detailStatistics.dropped.append("\(place.id): \(key): \(bytes) bytes")
            }
        }
        guard let raw = place.details.openingHours else { return }
        detailStatistics.openingHours += 1
        if case .failure(let error) = openingHours.hours(raw) {
            detailStatistics.unparsedOpeningHours += 1
            if detailStatistics.unparsed.count < DetailStatistics.examples {
                detailStatistics.unparsed.append("\(place.id): '\(raw)': \(error)")
            }
        }
    }

    /// Files what lends an address in this import's book: through the spill worker while it runs, else the
    /// disk-backed book, else the one in memory.
    private mutating func file(_ lender: consuming AddressLender) {
        if let spillWorker {
            spillWorker.add(.address(lender))
        } else if var addressSpill {
            lender.add(to: &addressSpill)
        } else {
            lender.add(to: &addresses)
        }
    }

    /// From now until `finish` resolves the addresses, places and addresses are filed on a second thread.
    mutating func startSpillWorker() {
        guard let addressSpill else { return }
        spillWorker = SpillWorker(sink: sink, spill: addressSpill)
    }

    var nodeCount: Int { nodes.seen }
    var wayCount: Int { waysSeen }
    var elementCount: Int { nodeCount + wayCount + relationCount }

    mutating func addNode(id: Int64, location: NodeLocation, tags: ElementTags, strings: StringTable) {
        let address = tags.address(strings)
        if let lendable = tags.lendable(address, strings) {
            file(.point(location.coordinate, address: lendable))
        }
        guard tags.mayBePlace(isWay: false),
            let (name, kind, address) = tags.place(isWay: false, strings: strings, address: address)
        else { return }
        let (details, tooLong) = tags.details(strings)
        emit(
            Place(
                id: "osm:node/\(id)", name: name, kind: kind, address: address, coordinate: location.coordinate,
                localizedNames: tags.localizedNames(strings), details: details), tooLongDetails: tooLong)
    }

    mutating func addWay(id: Int64, refs: ProtobufReader, tags: ElementTags, strings: StringTable)
        throws(ProtobufError)
    {
        switch pass {
        case .all:
            waysSeen += 1
            let way = try ways.append(id: id, refs: refs)
            let isClosed = way.count >= 4 && way.first == way.last
            guard let description = describe(tags, strings: strings, isClosed: isClosed, isRelation: false) else {
                return
            }
            pendingWays.append(PendingWay(number: way.number, isClosed: isClosed, description: description))
        case .nodesAndWays:
            if waysSeen == 0 {
                // The first way: every node is in the file now (a node after it is an error there).
                do { try nodes.finish() } catch { failure = failure ?? error }
            }
            waysSeen += 1
            try WayStore.decode(refs, into: &refScratch)
            let isClosed = refScratch.count >= 4 && refScratch.first == refScratch.last
            guard let description = describe(tags, strings: strings, isClosed: isClosed, isRelation: false) else {
                return
            }
            resolve(way: id, refs: refScratch, isClosed: isClosed, description)
        case .memberWays:
            if Self.contains(wantedWays, id) { _ = try ways.append(id: id, refs: refs) }
        }
    }

    /// One way's refs, reused from way to way.
    private var refScratch: [Int64] = []

    /// A failure of the disk-backed node locations, once a block is decoded.
    mutating func checkNodes() throws(OSMError) {
        if let failure = failure ?? nodes.failure { throw failure }
    }

    /// After the first of the two passes: the member ways of the multipolygons kept, for the second.
    mutating func prepareMemberWays() -> Int {
        var wanted: [Int64] = []
        for relation in pendingRelations { wanted += relation.memberWays }
        wanted.sort()
        wantedWays = wanted
        pass = .memberWays
        return wanted.count
    }

    private static func contains(_ sorted: [Int64], _ id: Int64) -> Bool {
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < id { low = middle + 1 } else { high = middle }
        }
        return low < sorted.count && sorted[low] == id
    }

    mutating func addRelation(id: Int64, memberWays: [Int64], tags: ElementTags, strings: StringTable) {
        guard tags.value(PlaceRules.type, is: "multipolygon", in: strings), !memberWays.isEmpty,
            let description = describe(tags, strings: strings, isClosed: true, isRelation: true)
        else { return }
        pendingRelations.append(PendingRelation(id: id, memberWays: memberWays, description: description))
    }

    /// What the import keeps of an element; nil for nothing.
    private func describe(_ tags: ElementTags, strings: StringTable, isClosed: Bool, isRelation: Bool)
        -> Description?
    {
        var feature = MapRules.classify(tags, strings: strings, isClosed: isClosed, isRelation: isRelation)
        let lendsAddress = feature?.kind == .building && tags.mayHaveAddress
        let mayBePlace = tags.mayBePlace(isWay: true)
        // The address and the name are made once for the place and what it lends.
        let address = mayBePlace || lendsAddress ? tags.address(strings) : nil
        let place = mayBePlace ? tags.place(isWay: true, strings: strings, address: address) : nil
        let name = place?.name ?? tags.text(PlaceRules.name, in: strings).flatMap { $0.isEmpty ? nil : $0 }
        let buildingAddress = lendsAddress ? tags.lendable(address, strings) : nil
        var description = Description(
            place: place, localizedNames: [:], feature: feature, name: name, buildingAddress: buildingAddress)
        if !includesMapLayer && description.streetName == nil && buildingAddress == nil { feature = nil }
        description.feature = feature
        guard place != nil || feature != nil else { return nil }
        description.localizedNames = tags.localizedNames(strings)
        if place != nil { (description.details, description.tooLongDetails) = tags.details(strings) }
        return description
    }

    /// Resolves the pending ways and relations (their places and features to the sinks, the places'
    /// addresses assigned); returns what could not be made.
    mutating func finish() throws(OSMError) -> (
        incompleteWays: Int, multipolygons: Int, skipped: [SkippedRelation]
    ) {
        wantedWays = []
        try nodes.finish()
        ways.finish()
        for way in pendingWays {
            resolve(
                way: ways.id(of: way.number), refs: ways.refs(of: way.number), isClosed: way.isClosed, way.description)
        }

        var multipolygons = 0
        var skipped: [SkippedRelation] = []
        for relation in pendingRelations {
            let id = "osm:relation/\(relation.id)"
            var members: [[NodeLocation]] = []
            var missing: String?
            for wayID in relation.memberWays {
                guard let number = ways.number(of: wayID) else {
                    missing = "way \(wayID) is not in the file"
                    break
                }
                guard let locations = locations(ofWay: number) else {
                    missing = "a node of way \(wayID) is not in the file"
                    break
                }
                members.append(locations)
            }
            if let missing {
                skipped.append(SkippedRelation(id: id, reason: missing))
                continue
            }
            switch MultipolygonAssembler.assemble(members) {
            case .failure(let failure):
                skipped.append(SkippedRelation(id: id, reason: failure.description))
            case .success(let polygons):
                multipolygons += 1
                if let place = relation.description.place,
                    let made = Self.areaPlace(id: id, place, relation.description, polygons: polygons)
                {
                    emit(made, tooLongDetails: relation.description.tooLongDetails)
                }
                let simplified = polygons.map { $0.map { Simplification.ring($0) } }
                add(.polygons(simplified), of: id, relation.description)
            }
        }
        pendingWays = []
        pendingRelations = []
        // Node locations and ways are done with: their memory goes before the addresses' grids are built.
        nodes = NodeLocations()
        ways = WayStore()
        spillWorker?.finish()
        spillWorker = nil
        if let addressSpill {
            try addressSpill.assign(to: sink, referenceLatitude: firstLatitude ?? 0, memoryLimit: memoryLimit)
            self.addressSpill = nil
            // The buckets' books are freed: their pages go back to the system before the places are sorted.
            _ = releaseFreedHeap(0)
        } else {
            addresses.assign(to: sink, referenceLatitude: firstLatitude ?? 0)
        }
        return (incompleteWays, multipolygons, skipped)
    }

    /// Makes a way's place and map feature (and the addresses it lends) from its refs; a way with a
    /// node the file lacks makes nothing.
    private mutating func resolve(way wayID: Int64, refs: [Int64], isClosed: Bool, _ description: Description) {
        // The nodes' coordinates without repeats (two nodes at one spot add no vertex; osmium's
        // geometries drop them too), in one array.
        var points: [Coordinate] = []
        points.reserveCapacity(refs.count)
        for ref in refs {
            guard let location = nodes.location(of: ref) else {
                if description.place != nil { incompleteWays += 1 }
                return
            }
            let point = location.coordinate
            if point != points.last { points.append(point) }
        }
        guard !points.isEmpty else {
            if description.place != nil { incompleteWays += 1 }
            return
        }
        let id = "osm:way/\(wayID)"
        let isArea = isClosed && points.count >= 4
        if let place = description.place {
            emit(
                Self.wayPlace(id: id, place, description, points: points, isArea: isArea),
                tooLongDetails: description.tooLongDetails)
        }
        // A closed street is still a line; an area feature is only ever classified for a ring.
        if let feature = description.feature, feature.isArea ? isArea : points.count >= 2 {
            let geometry: MapFeature.Geometry =
                feature.isArea ? .polygons([[Simplification.ring(points)]]) : .line(Simplification.line(points))
            add(geometry, of: id, description)
        }
    }

    /// Keeps a feature for the map layer and for the addresses it lends.
    private mutating func add(_ geometry: MapFeature.Geometry, of id: String, _ description: Description) {
        guard let feature = description.feature, feature.isArea == (geometry.polygons != nil) else { return }
        if let address = description.buildingAddress, let polygons = geometry.polygons {
            file(.building(polygons: polygons, address: address))
        }
        if let street = description.streetName {
            let lines = geometry.polygons?.flatMap { $0 } ?? geometry.line.map { [$0] } ?? []
            file(.street(name: street, lines: lines))
        }
        mapLayer?.add(
            MapFeature(
                id: id, kind: feature.kind, featureClass: feature.featureClass, name: description.name,
                localizedNames: description.localizedNames, geometry: geometry))
    }

    /// The locations of a way's nodes; nil when a node is missing from the file (an extract cut
    /// through the way: osmium export leaves such ways out too).
    private func locations(ofWay number: Int) -> [NodeLocation]? {
        var locations: [NodeLocation] = []
        for ref in ways.refs(of: number) {
            guard let location = nodes.location(of: ref) else { return nil }
            locations.append(location)
        }
        return locations.isEmpty ? nil : locations
    }

    /// A closed way is an area: a point inside it, its area and its outline. An open way (or a
    /// closed one with no interior) is a line: its middle vertex, no area.
    private static func wayPlace(
        id: String, _ tags: (name: String, kind: String, address: String?), _ description: Description,
        points: [Coordinate], isArea: Bool
    ) -> Place {
        let bounds = Shape.bounds(of: points)
        var place = Place(
            id: id, name: tags.name, kind: tags.kind, address: tags.address,
            coordinate: points[points.count / 2], bounds: bounds, localizedNames: description.localizedNames,
            details: description.details)
        if isArea, let inside = Shape.pointOnSurface(ofRing: points, bounds: bounds) {
            place.coordinate = inside
            place.area = Shape.area(ofRing: points, bounds: bounds)
            place.outline = points
        }
        return place
    }

    /// A multipolygon place: a point inside its largest polygon (outside that polygon's holes), the
    /// area of all polygons less their holes, the box around every outer ring, and the largest outer
    /// ring as the outline the ranking measures distances to. Nil when no polygon has an interior.
    private static func areaPlace(
        id: String, _ tags: (name: String, kind: String, address: String?), _ description: Description,
        polygons: [[[Coordinate]]]
    ) -> Place? {
        let areas = polygons.map { Shape.area(ofPolygons: [$0]) }
        guard let largest = areas.indices.max(by: { areas[$0] < areas[$1] }),
            let inside = Shape.pointOnSurface(
                ofPolygon: polygons[largest], bounds: BoundingBox(enclosing: polygons[largest][0]))
        else { return nil }
        return Place(
            id: id, name: tags.name, kind: tags.kind, address: tags.address, coordinate: inside,
            area: areas.reduce(0, +), bounds: BoundingBox(enclosing: polygons.flatMap { $0[0] }),
            outline: polygons[largest][0], localizedNames: description.localizedNames, details: description.details)
    }
}

/// A multipolygon relation the import could not make into an area, and why.
public struct SkippedRelation: Sendable, Equatable, CustomStringConvertible {
    /// `osm:relation/123`.
    public var id: String
    public var reason: String

    public var description: String { "\(id): \(reason)" }
}

extension MapFeature.Geometry {
    var polygons: [[[Coordinate]]]? {
        if case .polygons(let polygons) = self { return polygons }
        return nil
    }

    var line: [Coordinate]? {
        if case .line(let points) = self { return points }
        return nil
    }
}

/// glibc's malloc_trim (malloc.h, which Glibc's module does not bring in): hands freed heap pages back.
@_silgen_name("malloc_trim")
private func releaseFreedHeap(_ pad: Int) -> Int32
