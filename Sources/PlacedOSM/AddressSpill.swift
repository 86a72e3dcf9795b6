import PlacedCore
import PlacedThreads

#if canImport(Glibc)
    import Glibc
#endif

/// The address book of an import too large for memory (`AddressBook` holds every building, street and
/// address point of the file): what it would hold is written to disk by spatial tile, and the places
/// get their addresses region by region, so memory holds one bucket of tiles at a time.
///
/// Each item goes to every tile its box touches once widened by the farthest a place may be from it and
/// still use it (250 m for streets, 30 m for addresses and outlines; a margin on top), so the tile a
/// place lies in holds everything its search could find. Tiles are hashed into `bucketCount` bucket
/// files. At the end the places without an address are listed into the same buckets; each bucket's items
/// are read into an `AddressBook` in the order they came (its ties are broken as one book over the whole
/// file breaks them), its places resolved, and the answers written to files by place number, which are
/// read back in order to hand the addresses to the sink.
final class AddressSpill {
    let directory: String
    let bucketCount: Int
    private var buckets: [ScratchFile] = []
    /// The first failure of an `add` (a full disk): `assign` throws it.
    private var failure: OSMError?
    private var seenBuckets: [Int] = []

    /// A tile's side, degrees of latitude (about 5.5 km) and of longitude.
    static let tileDegrees = 0.05
    /// How far beyond its box an item is filed, metres: its search radius and a margin for the
    /// projection's approximation.
    static let streetMargin = AddressBook.streetRadius * 1.2 + 10
    static let nearbyMargin = AddressBook.nearbyRadius * 1.2 + 10
    static let pointKind: UInt8 = 0
    static let buildingKind: UInt8 = 1
    static let streetKind: UInt8 = 2

    init(in directory: String, bucketCount: Int) throws(OSMError) {
        self.directory = directory
        self.bucketCount = max(1, bucketCount)
        for _ in 0..<self.bucketCount {
            buckets.append(try ScratchFile(in: directory, purpose: "addresses", bufferBytes: 64 << 10))
        }
    }

    /// A sensible bucket count: an import's address book takes about 8 bytes of memory per byte of .osm.pbf;
    /// a bucket should take a quarter of `memoryLimit`.
    static func bucketCount(fileBytes: Int, memoryLimit: Int) -> Int {
        let perBucket = max(memoryLimit / 4, 1 << 20)
        return min(max(1, (fileBytes.multipliedReportingOverflow(by: 8).partialValue + perBucket - 1) / perBucket), 128)
    }

    // MARK: Adding

    func addPoint(_ coordinate: Coordinate, address: String) {
        write(AddressBook.box(coordinate, coordinate), margin: Self.nearbyMargin) { (file) throws(OSMError) in
            try file.append(Self.pointKind)
            try file.append(coordinate.latitude.bitPattern)
            try file.append(coordinate.longitude.bitPattern)
            try file.append(address)
        }
    }

    func addBuilding(polygons: [[[Coordinate]]], address: String) {
        let outers = polygons.flatMap { $0.prefix(1) }.flatMap { $0 }
        guard !outers.isEmpty else { return }
        write(BoundingBox(enclosing: outers), margin: Self.nearbyMargin) { (file) throws(OSMError) in
            try file.append(Self.buildingKind)
            try file.append(address)
            try file.append(UInt32(polygons.count))
            for rings in polygons {
                try file.append(UInt32(rings.count))
                for ring in rings { try Self.append(ring, to: file) }
            }
        }
    }

    func addStreet(name: String, lines: [[Coordinate]]) {
        let points = lines.joined()
        guard !points.isEmpty else { return }  // no segment: nothing could ever find it
        write(BoundingBox(enclosing: Array(points)), margin: Self.streetMargin) { (file) throws(OSMError) in
            try file.append(Self.streetKind)
            try file.append(name)
            try file.append(UInt32(lines.count))
            for line in lines { try Self.append(line, to: file) }
        }
    }

    private static func append(_ points: [Coordinate], to file: ScratchFile) throws(OSMError) {
        try file.append(UInt32(points.count))
        for point in points {
            try file.append(point.latitude.bitPattern)
            try file.append(point.longitude.bitPattern)
        }
    }

    /// Writes an item once to each bucket holding a tile of `box` widened by `margin` metres.
    private func write(_ box: BoundingBox, margin: Double, _ body: (ScratchFile) throws(OSMError) -> Void) {
        guard failure == nil else { return }
        seenBuckets.removeAll(keepingCapacity: true)
        if Self.tileCount(of: box, margin: margin) > 16 * bucketCount {
            seenBuckets.append(contentsOf: 0..<bucketCount)  // a vast item (a long street): every bucket
        } else {
            Self.forEachTile(of: box, margin: margin) { tile in
                let bucket = self.bucket(of: tile)
                if !seenBuckets.contains(bucket) { seenBuckets.append(bucket) }
            }
        }
        do {
            for bucket in seenBuckets { try body(buckets[bucket]) }
        } catch {
            failure = error
        }
    }

    static func tile(of point: Coordinate) -> (row: Int, column: Int) {
        (Int((point.latitude / tileDegrees).rounded(.down)), Int((point.longitude / tileDegrees).rounded(.down)))
    }

    /// The first and last tile of `box` widened by `margin` metres.
    private static func tileRange(of box: BoundingBox, margin: Double) -> (
        low: (row: Int, column: Int), high: (row: Int, column: Int)
    ) {
        let latitudeMargin = margin / 110_000
        let poleward = min(89.9, max(abs(box.minLatitude), abs(box.maxLatitude)) + latitudeMargin)
        let longitudeMargin = margin / max(111_320 * cos(poleward * .pi / 180), 1)
        let low = tile(
            of: Coordinate(latitude: box.minLatitude - latitudeMargin, longitude: box.minLongitude - longitudeMargin))
        let high = tile(
            of: Coordinate(latitude: box.maxLatitude + latitudeMargin, longitude: box.maxLongitude + longitudeMargin))
        return (low, high)
    }

    private static func tileCount(of box: BoundingBox, margin: Double) -> Int {
        let (low, high) = tileRange(of: box, margin: margin)
        return (high.row - low.row + 1) * (high.column - low.column + 1)
    }

    private static func forEachTile(of box: BoundingBox, margin: Double, _ body: ((row: Int, column: Int)) -> Void) {
        let (low, high) = tileRange(of: box, margin: margin)
        for row in low.row...high.row {
            for column in low.column...high.column { body((row, column)) }
        }
    }

    func bucket(of tile: (row: Int, column: Int)) -> Int {
        var hash = UInt64(bitPattern: Int64(tile.row)) &* 0x9E37_79B9_7F4A_7C15
        hash ^= UInt64(bitPattern: Int64(tile.column)) &+ 0x632B_E59B_D9B4_E019 &+ (hash << 6) &+ (hash >> 2)
        hash = (hash ^ (hash >> 31)) &* 0xBF58_476D_1CE4_E5B9
        return Int((hash ^ (hash >> 29)) % UInt64(bucketCount))
    }

    // MARK: Assigning

    /// Gives every place of `sink` without an address the one a single `AddressBook` of every item would
    /// give it, bucket by bucket; `memoryLimit` sizes the files the answers are sorted through.
    func assign(to sink: PlaceSink, referenceLatitude: Double, memoryLimit: Int) throws(OSMError) {
        if let failure { throw failure }
        var places: [ScratchFile] = []
        for _ in 0..<bucketCount {
            places.append(try ScratchFile(in: directory, purpose: "places to address", bufferBytes: 64 << 10))
        }
        var lacking = 0
        var failure: OSMError?
        sink.forEachPlaceLackingAddress { number, point in
            guard failure == nil else { return }
            do throws(OSMError) {
                let file = places[bucket(of: Self.tile(of: point))]
                try file.append(UInt32(number))
                try file.append(point.latitude.bitPattern)
                try file.append(point.longitude.bitPattern)
                lacking += 1
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        guard lacking > 0 else { return }

        // Answers by place number: each file a range of numbers, small enough to sort in memory. The
        // buckets are resolved on two threads (the import's other core), each with answer files of its own.
        let total = max(sink.count, 1)
        let answerCount = min(max(1, lacking * 64 / max(memoryLimit / 4, 1 << 20) + 1), 128)
        var answers: [[ScratchFile]] = []
        for _ in 0..<Self.workers {
            var files: [ScratchFile] = []
            for _ in 0..<answerCount {
                files.append(try ScratchFile(in: directory, purpose: "addresses found", bufferBytes: 64 << 10))
            }
            answers.append(files)
        }
        let buckets = self.buckets
        let work = (0..<Self.workers).map { worker in
            BucketWork { [places] () throws(OSMError) in
                for bucket in stride(from: worker, to: buckets.count, by: Self.workers) {
                    try Self.resolve(
                        bucket: buckets[bucket], places: places[bucket], into: answers[worker], total: total,
                        referenceLatitude: referenceLatitude)
                }
            }
        }
        try BucketWork.runInParallel(work)
        self.buckets = []
        places = []

        // Handed over in number order, one range at a time (both workers' answers for it merged).
        var file = -1
        var parts: [ScratchBytes] = []
        var order: [(number: UInt32, part: Int, offset: Int)] = []
        var next = 0
        var mismatch: String?
        sink.assignAddresses { point in
            do throws(OSMError) {
                while next == order.count {
                    file += 1
                    guard file < answerCount else {
                        throw .scratch(path: directory, operation: "read", reason: "more places than answers")
                    }
                    parts = []
                    order = []
                    next = 0
                    for worker in 0..<Self.workers {
                        let bytes = try answers[worker][file].readAll()
                        answers[worker][file].close()
                        parts.append(bytes)
                        var cursor = ScratchCursor(bytes.bytes, name: answers[worker][file].name)
                        while !cursor.isAtEnd {
                            let start = cursor.offset
                            order.append((try cursor.read(UInt32.self), worker, start))
                            _ = try cursor.read(UInt64.self)
                            _ = try cursor.read(UInt64.self)
                            _ = try cursor.read(UInt16.self)
                            _ = try cursor.string()
                        }
                    }
                    order.sort { $0.number < $1.number }
                }
                let entry = order[next]
                next += 1
                let bytes = parts[entry.part].bytes
                var cursor = ScratchCursor(UnsafeRawBufferPointer(rebasing: bytes[entry.offset...]), name: directory)
                _ = try cursor.read(UInt32.self)
                let answered = Coordinate(latitude: try cursor.double(), longitude: try cursor.double())
                if answered != point && mismatch == nil {
                    mismatch = "place \(entry.number) is at \(point), its answer at \(answered)"
                }
                let code = min(Int(try cursor.read(UInt8.self)), AddressSource.allCases.count - 1)
                let hasAddress = try cursor.read(UInt8.self) != 0
                let address = try cursor.string()
                return (hasAddress ? address : nil, AddressSource.allCases[code])
            } catch {
                if mismatch == nil { mismatch = "\(error)" }
                return (nil, .none)
            }
        }
        if let mismatch { throw .scratch(path: directory, operation: "match the addresses found to", reason: mismatch) }
    }

    static let workers = 2

    /// One bucket: its items made into a book, its places resolved, the answers filed by number range.
    private static func resolve(
        bucket: ScratchFile, places: ScratchFile, into answers: [ScratchFile], total: Int, referenceLatitude: Double
    ) throws(OSMError) {
        let placeBytes = try places.readAll()
        places.close()
        let itemBytes = try bucket.readAll()
        bucket.close()
        guard !placeBytes.isEmpty else { return }
        let book = try Self.book(from: ScratchCursor(itemBytes.bytes, name: bucket.name))
        let resolve = book.resolver(referenceLatitude: referenceLatitude)
        var cursor = ScratchCursor(placeBytes.bytes, name: places.name)
        while !cursor.isAtEnd {
            let number = Int(try cursor.read(UInt32.self))
            let point = Coordinate(latitude: try cursor.double(), longitude: try cursor.double())
            let (address, source) = resolve(point)
            let file = answers[min(answers.count - 1, number * answers.count / total)]
            try file.append(UInt32(number))
            try file.append(point.latitude.bitPattern)
            try file.append(point.longitude.bitPattern)
            try file.append(UInt8(AddressSource.allCases.firstIndex(of: source) ?? 0))
            try file.append(UInt8(address == nil ? 0 : 1))
            try file.append(address ?? "")
        }
    }

    /// An `AddressBook` of one bucket's items, added in the order they came.
    private static func book(from cursor: ScratchCursor) throws(OSMError) -> AddressBook {
        var cursor = cursor
        var book = AddressBook()
        func points() throws(OSMError) -> [Coordinate] {
            let count = Int(try cursor.read(UInt32.self))
            var points: [Coordinate] = []
            points.reserveCapacity(count)
            for _ in 0..<count {
                points.append(Coordinate(latitude: try cursor.double(), longitude: try cursor.double()))
            }
            return points
        }
        while !cursor.isAtEnd {
            switch try cursor.read(UInt8.self) {
            case pointKind:
                let point = Coordinate(latitude: try cursor.double(), longitude: try cursor.double())
                book.addPoint(point, address: try cursor.string())
            case buildingKind:
                let address = try cursor.string()
                var polygons: [[[Coordinate]]] = []
                for _ in 0..<Int(try cursor.read(UInt32.self)) {
                    var rings: [[Coordinate]] = []
                    for _ in 0..<Int(try cursor.read(UInt32.self)) { rings.append(try points()) }
                    polygons.append(rings)
                }
                book.addBuilding(polygons: polygons, address: address)
            case streetKind:
                let name = try cursor.string()
                var lines: [[Coordinate]] = []
                for _ in 0..<Int(try cursor.read(UInt32.self)) { lines.append(try points()) }
                book.addStreet(name: name, lines: lines)
            case let kind:
                throw .scratch(path: cursor.name, operation: "read", reason: "unknown item kind \(kind)")
            }
        }
        return book
    }
}

/// Work run on a thread of its own (POSIX threads: PlacedOSM uses neither Foundation nor Dispatch);
/// each piece touches only files and values of its own.
final class BucketWork: @unchecked Sendable {
    let body: () throws(OSMError) -> Void
    var failure: OSMError?

    init(_ body: @escaping () throws(OSMError) -> Void) { self.body = body }

    func run() {
        do { try body() } catch { failure = error }
    }

    /// Runs the first piece on this thread and the others on threads of their own; throws the first failure.
    static func runInParallel(_ pieces: [BucketWork]) throws(OSMError) {
        var threads: [pthread_t] = []
        for piece in pieces.dropFirst() {
            if let thread = startThread({ piece.run() }) {
                threads.append(thread)
            } else {
                piece.run()  // no thread to be had: here, after the others
            }
        }
        pieces.first?.run()
        for thread in threads { pthread_join(thread, nil) }
        if let failure = pieces.lazy.compactMap(\.failure).first { throw failure }
    }
}
