import PlacedCore

/// Gives every place an address (DESIGN.md "Map layer"), trying in turn: its own addr:* tags; the
/// address of the building it stands in (the smallest, when buildings nest); the nearest address
/// within 30 m (a node with addr:*, or a building's outline); "near <street>" for the nearest named
/// street (or square) within 250 m. Only addresses that name a street are lent.
struct AddressBook {
    static let nearbyRadius = 30.0
    static let streetRadius = 250.0

    struct Building {
        /// Outer ring, then holes, per polygon.
        let polygons: [[[Coordinate]]]
        let bounds: BoundingBox
        let address: String
        let area: Double
    }

    struct Street {
        let name: String
        /// Lines, or an area's rings.
        let lines: [[Coordinate]]
        let bounds: BoundingBox
    }

    private(set) var points: [(coordinate: Coordinate, address: String)] = []
    private(set) var buildings: [Building] = []
    private(set) var streets: [Street] = []

    mutating func addPoint(_ coordinate: Coordinate, address: String) { points.append((coordinate, address)) }

    mutating func addBuilding(polygons: [[[Coordinate]]], address: String) {
        let outers = polygons.flatMap { $0.prefix(1) }.flatMap { $0 }
        guard !outers.isEmpty else { return }
        buildings.append(
            Building(
                polygons: polygons, bounds: BoundingBox(enclosing: outers), address: address,
                area: Shape.area(ofPolygons: polygons)))
    }

    mutating func addStreet(name: String, lines: [[Coordinate]]) {
        let all = lines.flatMap { $0 }
        guard all.count >= 2 else { return }
        streets.append(Street(name: name, lines: lines, bounds: BoundingBox(enclosing: all)))
    }

    /// Sets `address` and `addressSource` of every place that has no address of its own.
    func assign(to places: inout [Place]) {
        guard places.contains(where: { $0.address == nil }) else { return }
        let reference = places.first?.coordinate.latitude ?? 0
        var pointGrid = SpatialGrid(latitude: reference)
        for (number, point) in points.enumerated() {
            pointGrid.insert(number, bounds: BoundingBox(enclosing: [point.coordinate]))
        }
        var buildingGrid = SpatialGrid(latitude: reference)
        for (number, building) in buildings.enumerated() { buildingGrid.insert(number, bounds: building.bounds) }
        var streetGrid = SpatialGrid(latitude: reference, cellMetres: 100)
        for (number, street) in streets.enumerated() { streetGrid.insert(number, bounds: street.bounds) }

        var found: [Int] = []
        for index in places.indices where places[index].address == nil {
            let at = places[index].coordinate
            let projection = LocalProjection(origin: at)

            buildingGrid.candidates(within: 0, of: at, into: &found)
            let containing = found.filter { Self.contains(buildings[$0].polygons, at) }
                .min { (buildings[$0].area, $0) < (buildings[$1].area, $1) }
            if let containing {
                places[index].address = buildings[containing].address
                places[index].addressSource = .building
                continue
            }

            var nearest: (distance: Double, address: String)?
            func consider(_ distance: Double, _ address: String) {
                if distance <= Self.nearbyRadius, distance < nearest?.distance ?? .infinity {
                    nearest = (distance, address)
                }
            }
            pointGrid.candidates(within: Self.nearbyRadius, of: at, into: &found)
            for number in found { consider(projection.distance(to: points[number].coordinate), points[number].address) }
            buildingGrid.candidates(within: Self.nearbyRadius, of: at, into: &found)
            for number in found {
                let building = buildings[number]
                guard building.bounds.distance(from: projection) <= Self.nearbyRadius else { continue }
                let edges = building.polygons.flatMap { $0 }
                consider(Self.distance(from: projection, toLines: edges), building.address)
            }
            if let nearest {
                places[index].address = nearest.address
                places[index].addressSource = .nearby
                continue
            }

            streetGrid.candidates(within: Self.streetRadius, of: at, into: &found)
            var nearestStreet: (distance: Double, name: String)?
            for number in found {
                let street = streets[number]
                guard
                    street.bounds.distance(from: projection)
                        <= min(Self.streetRadius, nearestStreet?.distance ?? .infinity)
                else { continue }
                let distance = Self.distance(from: projection, toLines: street.lines)
                if distance <= Self.streetRadius, distance < nearestStreet?.distance ?? .infinity {
                    nearestStreet = (distance, street.name)
                }
            }
            if let nearestStreet {
                places[index].address = "near \(nearestStreet.name)"
                places[index].addressSource = .street
            } else {
                places[index].addressSource = .none
            }
        }
    }

    /// Inside an outer ring and outside its holes (even–odd over the polygon's rings).
    static func contains(_ polygons: [[[Coordinate]]], _ point: Coordinate) -> Bool {
        polygons.contains { rings in
            rings.reduce(false) { inside, ring in inside != MultipolygonAssembler.contains(ring, point) }
        }
    }

    /// Metres from the projection's origin to the nearest segment of any line.
    static func distance(from projection: LocalProjection, toLines lines: [[Coordinate]]) -> Double {
        var nearest = Double.infinity
        for line in lines {
            guard var a = line.first.map(projection.project) else { continue }
            if line.count == 1 { nearest = min(nearest, (a.x * a.x + a.y * a.y).squareRoot()) }
            for point in line.dropFirst() {
                let b = projection.project(point)
                nearest = min(nearest, Simplification.squaredDistance((0, 0), toSegment: a, b).squareRoot())
                a = b
            }
        }
        return nearest
    }
}

/// A uniform grid of cells (about `cellMetres` on a side) holding item numbers by bounding box:
/// enough to find what lies within tens of metres of a place among a city's buildings and streets.
struct SpatialGrid {
    private let cellLatitude: Double
    private let cellLongitude: Double
    private var cells: [Int64: [Int32]] = [:]

    init(latitude: Double, cellMetres: Double = 50) {
        let projection = LocalProjection(origin: Coordinate(latitude: latitude, longitude: 0))
        cellLatitude = cellMetres / projection.metresPerDegreeLatitude
        cellLongitude = cellMetres / max(projection.metresPerDegreeLongitude, 1)
    }

    private func cell(_ latitude: Double, _ longitude: Double) -> (Int64, Int64) {
        (Int64((latitude / cellLatitude).rounded(.down)), Int64((longitude / cellLongitude).rounded(.down)))
    }

    private func keys(covering box: BoundingBox) -> [Int64] {
        let (row0, column0) = cell(box.minLatitude, box.minLongitude)
        let (row1, column1) = cell(box.maxLatitude, box.maxLongitude)
        var keys: [Int64] = []
        for row in row0...row1 {
            for column in column0...column1 { keys.append(row << 32 ^ (column & 0xFFFF_FFFF)) }
        }
        return keys
    }

    mutating func insert(_ item: Int, bounds: BoundingBox) {
        for key in keys(covering: bounds) { cells[key, default: []].append(Int32(item)) }
    }

    /// The items whose cells come within about `radius` metres of `center`, each once, in order.
    func candidates(within radius: Double, of center: Coordinate, into found: inout [Int]) {
        found.removeAll(keepingCapacity: true)
        let projection = LocalProjection(origin: center)
        let low = projection.coordinate(east: -radius, north: -radius)
        let high = projection.coordinate(east: radius, north: radius)
        let box = BoundingBox(
            minLatitude: low.latitude, minLongitude: low.longitude, maxLatitude: high.latitude,
            maxLongitude: high.longitude)
        for key in keys(covering: box) {
            if let items = cells[key] { found.append(contentsOf: items.lazy.map { Int($0) }) }
        }
        found.sort()
        var kept = 0
        for item in found where kept == 0 || found[kept - 1] != item {
            found[kept] = item
            kept += 1
        }
        found.removeSubrange(kept...)
    }
}
