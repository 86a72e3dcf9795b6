import PlacedCore
import PlacedTestSupport
import Testing

@testable import PlacedStore

#if canImport(Glibc)
    import Glibc
#endif

private let centre = Coordinate(latitude: 60.1699, longitude: 24.9384)

private func offset(east: Double, north: Double) -> Coordinate {
    LocalProjection(origin: centre).coordinate(east: east, north: north)
}

/// A rectangle west…east × south…north (metres from the centre) whose point is `inside`.
private func rectangle(_ id: String, west: Double, south: Double, east: Double, north: Double, inside: (Double, Double))
    -> Place
{
    let ring = [(west, south), (east, south), (east, north), (west, north), (west, south)].map {
        offset(east: $0.0, north: $0.1)
    }
    return Place(
        id: id, name: id, kind: "leisure=park", coordinate: offset(east: inside.0, north: inside.1),
        area: (east - west) * (north - south),
        bounds: BoundingBox(
            minLatitude: ring[0].latitude, minLongitude: ring[0].longitude, maxLatitude: ring[2].latitude,
            maxLongitude: ring[2].longitude),
        outline: ring)
}

@Suite struct PlaceCatalogTests {
    /// A candidate read in place finds its raw opening hours in the record, after an outline or without
    /// one, as the decoded place has them; a place without details has none.
    @Test func aCandidateReadsItsOpeningHoursInPlace() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        let hours = PlaceDetails(tags: [
            (key: "opening_hours", value: "Mo-Fr 08:00-16:00"), (key: "payment:cash", value: "yes"),
            (key: "phone", value: "+358 1"),
        ])
        var park = rectangle("osm:way/1", west: -50, south: -50, east: 50, north: 50, inside: (0, 0))
        park.details = hours
        let cafe = Place(
            id: "osm:node/2", name: "Kahvila", kind: "amenity=cafe", coordinate: offset(east: 5, north: 5),
            details: PlaceDetails(tags: [(key: "opening_hours", value: "24/7")]))
        let shop = Place(
            id: "osm:node/3", name: "Kauppa", kind: "shop=kiosk", coordinate: offset(east: -5, north: 5),
            details: PlaceDetails(tags: [(key: "phone", value: "+358 2")]))
        try PlaceDatabase.replace(
            at: path, with: [park, cafe, shop, Place(id: "osm:node/4", name: "X", kind: "shop=x", coordinate: centre)])
        let database = try PlaceDatabase.open(path: path)
        let set = try database.load()
        let priors = [RankingModel.KindPrior](
            repeating: RankingModel.standard.prior(ofKind: ""), count: set.kinds.count + 1)
        var seen: [String: String?] = [:]
        for number in 0..<set.count {
            let candidate = try #require(MappedCandidate(database, number: number, priors: priors))
            #expect(candidate.openingHours == (try set.place(at: number)).details.openingHours)
            seen[candidate.id] = candidate.openingHours
        }
        #expect(seen == ["osm:way/1": "Mo-Fr 08:00-16:00", "osm:node/2": "24/7", "osm:node/3": nil, "osm:node/4": nil])
    }

    /// The catalog holds only the areas' numbers and reaches, read from the file's columns; it must still
    /// find every place whose footprint is near, in particular a large area whose point is far away.
    @Test func findsEveryFootprintWithinTheRadiusFromTheStoredReach() throws {
        var rng = SplitMix64(seed: 11)
        var places: [Place] = []
        for i in 0..<500 {
            let east = rng.uniform(in: -300...300), north = rng.uniform(in: -300...300)
            if i % 5 == 0 {
                let half = rng.uniform(in: 5...40)
                places.append(
                    rectangle(
                        "osm:way/\(i)", west: east - half, south: north - half, east: east + half,
                        north: north + half, inside: (east, north)))
            } else {
                places.append(
                    Place(
                        id: "osm:node/\(i)", name: "\(i)", kind: "amenity=cafe",
                        coordinate: offset(east: east, north: north)))
            }
        }
        for i in 0..<10 {
            let west = rng.uniform(in: -400...100), south = rng.uniform(in: -400...100)
            let width = rng.uniform(in: 100...800), height = rng.uniform(in: 100...800)
            places.append(
                rectangle(
                    "osm:way/large\(i)", west: west, south: south, east: west + width, north: south + height,
                    inside: (west + width * 0.95, south + height * 0.95)))
        }
        let directory = TemporaryDirectory()
        defer { withExtendedLifetime(directory) {} }  // the file is used after the last mention of it
        let path = directory.file("places.db")
        try PlaceDatabase.replace(at: path, with: places)
        let catalog = try PlaceCatalog(path: path)
        // The same file through a cache that turns over every few queries, its pages released from RSS
        // after every 500 m between queries (most of them), gives the same places.
        let churning = try PlaceCatalog(path: path, cacheLimit: 16, releaseDistance: 500)

        var largeAreasFound = 0
        for _ in 0..<300 {
            let here = offset(east: rng.uniform(in: -350...350), north: rng.uniform(in: -350...350))
            let radius = rng.uniform(in: 50...250)
            let projection = LocalProjection(origin: here)
            let expected = Set(places.filter { $0.footprintDistance(from: projection) <= radius }.map(\.id))
            let found = try catalog.candidates(within: radius, of: here)
            #expect(try churning.candidates(within: radius, of: here) == found)
            #expect(expected.subtracting(found.map(\.id)).isEmpty)
            #expect(Set(found.map(\.id)).count == found.count, "each place once")
            largeAreasFound += found.filter { $0.id.contains("large") && expected.contains($0.id) }.count
            for place in found where place.area > 0 {
                #expect(place.outline != nil, "areas come with their outline, read from the file")
            }
        }
        #expect(largeAreasFound > 50)

        // Ranking from the mapped file is ranking every place in memory, exactly.
        let ranker = try Ranker()
        for _ in 0..<200 {
            let fix = Fix(
                receivedAt: 0,
                coordinate: offset(east: rng.uniform(in: -350...350), north: rng.uniform(in: -350...350)),
                mode: .twoD, accuracy: rng.uniform(in: 3...60))
            let ranking = try catalog.rank(fix, with: ranker, picks: PickMemory(), now: 0, limit: 20)
            #expect(try ranking == ranker.rank(fix: fix, candidates: places, picks: PickMemory(), now: 0, limit: 20))
            #expect(try churning.rank(fix, with: ranker, picks: PickMemory(), now: 0, limit: 20) == ranking)
        }
    }
}

extension PlaceCatalogTests {
    /// Mapped candidates take their kind's prior from the catalog's table by kind number: it must be the
    /// model's prior of the kind (exact, by key, or the other kinds'), and follow the ranker's model when
    /// it changes (a SIGHUP), as ranking the places in memory does.
    @Test func kindPriorsFollowTheRankersModel() throws {
        var rng = SplitMix64(seed: 12)
        let kinds = ["amenity=cafe", "amenity=restaurant", "shop=bakery", "shop=unlisted", "leisure=park", "x=y", ""]
        let places = (0..<400).map { i in
            Place(
                id: "osm:node/\(i)", name: "\(i)", kind: kinds[i % kinds.count],
                coordinate: offset(east: rng.uniform(in: -200...200), north: rng.uniform(in: -200...200)))
        }
        let directory = TemporaryDirectory()
        defer { withExtendedLifetime(directory) {} }  // the file is used after the last mention of it
        let path = directory.file("places.db")
        try PlaceDatabase.replace(at: path, with: places)
        let catalog = try PlaceCatalog(path: path)
        var changed = RankingModel.standard
        changed.kinds["shop"] = .init(weight: 9, pointExtent: 30)
        changed.kinds["amenity=cafe"] = .init(weight: 0.1)
        changed.otherKinds = .init(weight: 4, pointExtent: 2)
        let rankers = [try Ranker(), try Ranker(model: changed)]
        var differed = 0
        for round in 0..<120 {
            let ranker = rankers[(round / 3) % 2]  // the model changes every third ranking
            let fix = Fix(
                receivedAt: 0,
                coordinate: offset(east: rng.uniform(in: -150...150), north: rng.uniform(in: -150...150)),
                mode: .twoD, accuracy: rng.uniform(in: 3...40))
            let ranking = try catalog.rank(fix, with: ranker, picks: PickMemory(), now: 0, limit: 20)
            #expect(try ranking == ranker.rank(fix: fix, candidates: places, picks: PickMemory(), now: 0, limit: 20))
            let other = rankers[1 - (round / 3) % 2]
            if try ranking != other.rank(fix: fix, candidates: places, picks: PickMemory(), now: 0, limit: 20) {
                differed += 1
            }
        }
        #expect(differed > 100, "the two models rank differently, so a stale table would show")
    }
}

@Suite struct MappedFileTests {
    /// Something truncates the places file in place under a catalog that has it mapped: reads past the
    /// new end would raise SIGBUS. They read zeros instead, the catalog says the file is damaged, and
    /// the process lives on.
    @Test func aFileTruncatedUnderTheMappingIsReportedNotFatal() throws {
        var rng = SplitMix64(seed: 21)
        let places = (0..<20_000).map { i in
            Place(
                id: "osm:node/\(i)", name: "Place \(i)", kind: "amenity=cafe",
                coordinate: offset(east: rng.uniform(in: -3000...3000), north: rng.uniform(in: -3000...3000)))
        }
        let directory = TemporaryDirectory()
        defer { withExtendedLifetime(directory) {} }  // the file is used after the last mention of it
        let path = directory.file("places.db")
        try PlaceDatabase.replace(at: path, with: places)
        let catalog = try PlaceCatalog(path: path)
        let before = try catalog.candidates(within: 250, of: centre)
        #expect(!before.isEmpty && !catalog.placeSet.isDamaged)

        #expect(truncate(path, 8192) == 0)
        var failures = 0
        for _ in 0..<50 {
            let here = offset(east: rng.uniform(in: -3000...3000), north: rng.uniform(in: -3000...3000))
            do {
                _ = try catalog.candidates(within: 250, of: here)
            } catch {
                guard case .corrupt(_, let detail) = error else { throw error }
                #expect(detail.contains("truncated"))
                failures += 1
            }
        }
        #expect(catalog.placeSet.isDamaged)
        #expect(failures == 50, "every query after the truncation reports it")
        // A new file renamed into place opens as usual.
        try PlaceDatabase.replace(at: path, with: places)
        #expect(try PlaceCatalog(path: path).candidates(within: 250, of: centre) == before)
    }
}
