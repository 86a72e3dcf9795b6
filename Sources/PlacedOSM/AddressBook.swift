import PlacedCore

/// Gives every place an address (docs/DESIGN.md, "Place data"), trying in turn: its own addr:* tags; the
/// address of the building it stands in (the smallest, when buildings nest); the nearest address
/// within 30 m (a node with addr:*, or a building's outline); "near <street>" for the nearest named
/// street (or square) within 250 m. Only addresses that name a street are lent.
///
/// Outlines and streets are kept as flat lists of segments in grids, so that a search touches plain
/// numbers; streets are searched in growing circles, as most places are a few metres from one.
struct AddressBook {
    static let nearbyRadius = 30.0
    static let streetRadius = 250.0

    struct Building {
        /// Outer ring, then holes, per polygon.
        let polygons: [[[Coordinate]]]
        let bounds: BoundingBox
        let address: Int32
        let area: Double
    }

    /// A segment of a building's outline or a street, and whose it is.
    struct Segment {
        let a: Coordinate
        let b: Coordinate
        let owner: Int32
    }

    private var addresses: [String] = []
    private var addressNumbers: [String: Int32] = [:]
    private var points: [(coordinate: Coordinate, address: Int32)] = []
    private var buildings: [Building] = []
    private var outlineSegments: [Segment] = []
    private var streetNames: [String] = []
    private var streetSegments: [Segment] = []

    private mutating func number(of address: String) -> Int32 {
        if let known = addressNumbers[address] { return known }
        let number = Int32(addresses.count)
        addresses.append(address)
        addressNumbers[address] = number
        return number
    }

    mutating func addPoint(_ coordinate: Coordinate, address: String) {
        points.append((coordinate, number(of: address)))
    }

    mutating func addBuilding(polygons: [[[Coordinate]]], address: String) {
        let outers = polygons.flatMap { $0.prefix(1) }.flatMap { $0 }
        guard !outers.isEmpty else { return }
        let owner = Int32(buildings.count)
        buildings.append(
            Building(
                polygons: polygons, bounds: BoundingBox(enclosing: outers), address: number(of: address),
                area: Shape.area(ofPolygons: polygons)))
        for ring in polygons.joined() {
            for (a, b) in zip(ring, ring.dropFirst()) { outlineSegments.append(Segment(a: a, b: b, owner: owner)) }
        }
    }

    mutating func addStreet(name: String, lines: [[Coordinate]]) {
        let owner = Int32(streetNames.count)
        streetNames.append(name)
        for line in lines {
            for (a, b) in zip(line, line.dropFirst()) { streetSegments.append(Segment(a: a, b: b, owner: owner)) }
        }
    }

    /// Sets `address` and `addressSource` of every place in `sink` that has no address of its own; the
    /// grids are measured at `referenceLatitude` (the first place's) and built only if one needs them.
    func assign(to sink: PlaceSink, referenceLatitude reference: Double) {
        var resolve: ((Coordinate) -> (address: String?, source: AddressSource))?
        sink.assignAddresses { at in
            if resolve == nil { resolve = resolver(referenceLatitude: reference) }
            return resolve!(at)
        }
    }

    /// The address of any point, from grids built now over everything added.
    func resolver(referenceLatitude reference: Double) -> (Coordinate) -> (address: String?, source: AddressSource) {
        let pointGrid = SpatialGrid(latitude: reference, boxes: points.map { Self.box($0.coordinate, $0.coordinate) })
        let buildingGrid = SpatialGrid(latitude: reference, boxes: buildings.map(\.bounds))
        let outlineGrid = SpatialGrid(latitude: reference, boxes: outlineSegments.map { Self.box($0.a, $0.b) })
        let streetGrid = SpatialGrid(latitude: reference, boxes: streetSegments.map { Self.box($0.a, $0.b) })
        var found: [Int] = []
        return { at in address(at: at, pointGrid, buildingGrid, outlineGrid, streetGrid, &found) }
    }

    private func address(
        at: Coordinate, _ pointGrid: SpatialGrid, _ buildingGrid: SpatialGrid, _ outlineGrid: SpatialGrid,
        _ streetGrid: SpatialGrid, _ found: inout [Int]
    ) -> (address: String?, source: AddressSource) {
        let projection = LocalProjection(origin: at)
        buildingGrid.candidates(within: 0, around: projection, into: &found)
        var containing: Int?
        for number in found
        where buildings[number].bounds.contains(at) && Self.contains(buildings[number].polygons, at) {
            if containing.map({ buildings[number].area < buildings[$0].area }) ?? true { containing = number }
        }
        if let containing { return (addresses[Int(buildings[containing].address)], .building) }

        var nearest: (distance: Double, address: Int32)?
        func consider(_ distance: Double, _ address: Int32) {
            if distance <= Self.nearbyRadius, distance < nearest?.distance ?? .infinity {
                nearest = (distance, address)
            }
        }
        pointGrid.candidates(within: Self.nearbyRadius, around: projection, into: &found)
        for number in found { consider(projection.distance(to: points[number].coordinate), points[number].address) }
        outlineGrid.candidates(within: Self.nearbyRadius, around: projection, into: &found)
        for number in found {
            let segment = outlineSegments[number]
            consider(Self.distance(from: projection, to: segment), buildings[Int(segment.owner)].address)
        }
        if let nearest { return (addresses[Int(nearest.address)], .nearby) }

        if let street = nearestStreet(to: projection, grid: streetGrid, scratch: &found) {
            return ("near \(streetNames[street])", .street)
        }
        return (nil, .none)
    }

    /// The nearest street segment's street within `streetRadius`: circles of 25, 50, 100, 200 and
    /// 250 m, until one holds a segment nearer than its radius (none outside it can be nearer).
    private func nearestStreet(to projection: LocalProjection, grid: SpatialGrid, scratch found: inout [Int]) -> Int? {
        var radius = 25.0
        while true {
            grid.candidates(within: radius, around: projection, into: &found)
            var best: (distance: Double, segment: Int)?
            for number in found {
                let distance = Self.distance(from: projection, to: streetSegments[number])
                if distance < best?.distance ?? .infinity { best = (distance, number) }
            }
            if let best, best.distance <= radius { return Int(streetSegments[best.segment].owner) }
            if radius >= Self.streetRadius { return nil }
            radius = min(radius * 2, Self.streetRadius)
        }
    }

    static func box(_ a: Coordinate, _ b: Coordinate) -> BoundingBox {
        BoundingBox(
            minLatitude: min(a.latitude, b.latitude), minLongitude: min(a.longitude, b.longitude),
            maxLatitude: max(a.latitude, b.latitude), maxLongitude: max(a.longitude, b.longitude))
    }

    /// Inside an outer ring and outside its holes (even–odd over the polygon's rings).
    static func contains(_ polygons: [[[Coordinate]]], _ point: Coordinate) -> Bool {
        polygons.contains { rings in
            rings.reduce(false) { inside, ring in inside != MultipolygonAssembler.contains(ring, point) }
        }
    }

    /// Metres from the projection's origin to a segment.
    static func distance(from projection: LocalProjection, to segment: Segment) -> Double {
        Simplification.squaredDistance((0, 0), toSegment: projection.project(segment.a), projection.project(segment.b))
            .squareRoot()
    }
}

/// A uniform grid of cells (about `cellMetres` on a side) holding item numbers by bounding box:
/// enough to find what lies within tens of metres of a place among a city's buildings and streets.
/// Built once from all the boxes: (cell, item) pairs sorted by cell, each cell a range of them.
struct SpatialGrid {
    private let cellLatitude: Double
    private let cellLongitude: Double
    /// Sorted cell keys, and `starts[i]..<starts[i + 1]`: cell i's items in `items`.
    private var keys: [Int64] = []
    private var starts: [Int32] = [0]
    private var items: [Int32] = []

    init(latitude: Double, cellMetres: Double = 50, boxes: [BoundingBox]) {
        let projection = LocalProjection(origin: Coordinate(latitude: latitude, longitude: 0))
        cellLatitude = cellMetres / projection.metresPerDegreeLatitude
        cellLongitude = cellMetres / max(projection.metresPerDegreeLongitude, 1)
        var pairs: [(key: Int64, item: Int32)] = []
        pairs.reserveCapacity(boxes.count)
        for (item, box) in boxes.enumerated() {
            forEachKey(covering: box) { pairs.append(($0, Int32(item))) }
        }
        // Items were added in order, so sorting by key alone keeps each cell's items in order.
        pairs.sort { $0.key < $1.key || ($0.key == $1.key && $0.item < $1.item) }
        items.reserveCapacity(pairs.count)
        for pair in pairs {
            if pair.key != keys.last {
                if !keys.isEmpty { starts.append(Int32(items.count)) }
                keys.append(pair.key)
            }
            items.append(pair.item)
        }
        starts.append(Int32(items.count))
    }

    private func cell(_ latitude: Double, _ longitude: Double) -> (Int64, Int64) {
        (Int64((latitude / cellLatitude).rounded(.down)), Int64((longitude / cellLongitude).rounded(.down)))
    }

    private func forEachKey(covering box: BoundingBox, _ body: (Int64) -> Void) {
        let (row0, column0) = cell(box.minLatitude, box.minLongitude)
        let (row1, column1) = cell(box.maxLatitude, box.maxLongitude)
        for row in row0...row1 {
            for column in column0...column1 { body(row << 32 ^ (column & 0xFFFF_FFFF)) }
        }
    }

    /// The items whose cells come within about `radius` metres of `center`, each once, in order.
    func candidates(within radius: Double, of center: Coordinate, into found: inout [Int]) {
        candidates(within: radius, around: LocalProjection(origin: center), into: &found)
    }

    /// The same around `projection`'s origin: a place's searches share its projection (its sines and
    /// cosines made once).
    func candidates(within radius: Double, around projection: LocalProjection, into found: inout [Int]) {
        found.removeAll(keepingCapacity: true)
        let box = SearchBox(radius: radius, around: projection)
        var cellsFound = 0
        keys.withUnsafeBufferPointer { keys in
            func take(_ index: Int) {
                cellsFound += 1
                for position in Int(starts[index])..<Int(starts[index + 1]) { found.append(Int(items[position])) }
            }
            box.forEachArc { west, east in
                let (row0, column0) = cell(box.minLatitude, west)
                let (row1, column1) = cell(box.maxLatitude, east)
                for row in row0...row1 {
                    if column0 < 0 && column1 >= 0 {
                        // The columns' low 32 bits wrap at 0 within the row: each cell looked up alone.
                        for column in column0...column1 {
                            let key = row << 32 ^ (column & 0xFFFF_FFFF)
                            let index = keys.firstIndex(notBelow: key)
                            if index < keys.count, keys[index] == key { take(index) }
                        }
                        continue
                    }
                    // A row's cells are consecutive keys: one search, then the cells present in order.
                    let last = row << 32 ^ (column1 & 0xFFFF_FFFF)
                    var index = keys.firstIndex(notBelow: row << 32 ^ (column0 & 0xFFFF_FFFF))
                    while index < keys.count, keys[index] <= last {
                        take(index)
                        index += 1
                    }
                }
            }
        }
        // An item spanning several cells is listed by each; one cell lists each item once.
        guard cellsFound > 1 else { return }
        found.sort()
        found.removeAdjacentDuplicates(by: ==)
    }
}
