import CSQLite
import Foundation
import PlacedCore
import PlacedTestSupport
import Testing

@testable import PlacedStore

private let cafe = Place(
    id: "osm:node/1", name: "Café Ekberg", kind: "amenity=cafe",
    address: "Bulevardi 9, 00120 Helsinki",
    coordinate: Coordinate(latitude: 60.1642, longitude: 24.9380))

private let station = Place(
    id: "osm:way/2", name: "Helsingin päärautatieasema", kind: "railway=station",
    coordinate: Coordinate(latitude: 60.1710, longitude: 24.9414), area: 25_000,
    bounds: BoundingBox(
        minLatitude: 60.1700, minLongitude: 24.9400, maxLatitude: 60.1720, maxLongitude: 24.9430),
    outline: [
        Coordinate(latitude: 60.1700, longitude: 24.9400),
        Coordinate(latitude: 60.1720, longitude: 24.9400),
        Coordinate(latitude: 60.1720, longitude: 24.9430),
        Coordinate(latitude: 60.1700, longitude: 24.9400),
    ],
    // Details come after the outline in a record: every reader must step over both.
    details: PlaceDetails(tags: [
        (key: "opening_hours", value: "Mo-Su 05:00-24:00"), (key: "wheelchair", value: "yes"),
        (key: "website", value: "https://vr.fi"), (key: "description:sv", value: "Järnvägsstation"),
    ]))

private let kiosk = Place(
    id: "osm:node/3", name: "R-kioski", kind: "shop=kiosk",
    coordinate: Coordinate(latitude: 60.1699, longitude: 24.9384))

/// Some thousands of seeded places, so the tree has inner nodes and several leaves.
private func syntheticPlaces(_ count: Int, seed: UInt64) -> [Place] {
    var random = SplitMix64(seed: seed)
    let kinds = ["amenity=cafe", "shop=bakery", "amenity=bench", "tourism=museum"]
    return (0..<count).map { i in
        Place(
            id: "osm:node/\(1000 + i)", name: "Place \(i)", kind: kinds[i % kinds.count],
            address: i % 3 == 0 ? "Street \(i)" : nil,
            coordinate: Coordinate(
                latitude: 60.17 + random.gaussian() * 0.02, longitude: 24.94 + random.gaussian() * 0.04),
            area: i % 5 == 0 ? Double(i) : 0,
            details: i % 7 == 0
                ? PlaceDetails(tags: [
                    (key: "opening_hours", value: "Mo-Fr 0\(i % 10):00-17:00"), (key: "phone", value: "+\(i)"),
                ])
                : PlaceDetails())
    }
}

private func isCorrupt(_ body: () throws -> Void) -> Bool {
    do {
        try body()
        return false
    } catch {
        guard case .corrupt = error as? PlaceDatabaseError else { return false }
        return true
    }
}

@Suite struct PlaceDatabaseTests {
    /// The names column is split on its UTF-8 bytes: as a split on Characters would split it, whatever
    /// follows a separator (a combining mark joins no control), with empty entries and entries without
    /// a language dropped, and the last of a repeated language kept.
    @Test func localizedNamesSplitAsCharactersWould() {
        func bySplittingCharacters(_ text: String) -> [String: String] {
            var names: [String: String] = [:]
            for entry in text.split(separator: "\u{1E}") {
                let parts = entry.split(separator: "\u{1F}", maxSplits: 1, omittingEmptySubsequences: false)
                if parts.count == 2 { names[String(parts[0])] = String(parts[1]) }
            }
            return names
        }
        var random = SplitMix64(seed: 12)
        let pieces = [
            "\u{1E}", "\u{1F}", "\u{301}", "\u{200D}", "sv", "fi", "e\u{301}", "\u{E9}", "カ", "😀", "\r\n", " ",
        ]
        var decoded = 0
        for _ in 0..<20_000 {
            let text = (0..<Int(random.next() % 10)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }
                .joined()
            let names = LocalizedNamesCoding.decode(text)
            #expect(names == bySplittingCharacters(text), "\(text.debugDescription)")
            decoded += names.count
        }
        #expect(decoded > 3_000)
        #expect(LocalizedNamesCoding.decode(nil) == [:])
    }

    @Test func roundTripKeepsEveryField() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        let places = [cafe, station, kiosk] + syntheticPlaces(3000, seed: 7)
        try PlaceDatabase.replace(at: path, with: places)

        let database = try PlaceDatabase.open(path: path)
        #expect(database.placeCount == places.count)
        #expect(database.importedAt.count == 20 && database.importedAt.hasSuffix("Z"))
        let set = try database.load()
        #expect(set.count == places.count)
        #expect(Set(set.kinds) == Set(places.map(\.kind)))

        var seen = Set<String>()
        for number in 0..<set.count {
            let place = try set.place(at: number)
            let original = try #require(places.first { $0.id == place.id })
            #expect(place == original)
            #expect(set.coordinate(of: number) == original.coordinate)
            #expect(set.kind(of: number) == original.kind)
            #expect(set.areas[number] == Float(original.area))
            #expect(Double(set.reaches[number]) >= original.reach, "never short of the footprint")
            #expect(Double(set.reaches[number]) <= original.reach * 1.000_001)
            #expect((set.reaches[number] == 0) == (original.area == 0 || original.bounds == nil))
            #expect(try set.placeIndex(ofID: original.id) == number)
            seen.insert(place.id)
        }
        #expect(seen.count == places.count)
        #expect(try set.placeIndex(ofID: "osm:node/999999999") == nil)
        #expect(throws: PlaceDatabaseError.noSuchPlace(index: places.count, count: places.count)) {
            try set.place(at: places.count)
        }
        #expect(throws: PlaceDatabaseError.noSuchPlace(index: -1, count: places.count)) { try set.place(at: -1) }

        // The loaded index numbers places like the table: the nearest to the kiosk is the kiosk.
        let nearest = set.index.nearest(1, to: kiosk.coordinate)
        #expect(try set.place(at: nearest[0].index).id == kiosk.id)
        #expect(nearest[0].distance == 0)
    }

    /// A writer whose memory limit is far below the places orders them through several buckets on disk,
    /// and derives addresses through its patch file: the same file as from memory.
    @Test func writingThroughBucketsAndAddressPatchesGivesTheSameFile() throws {
        let directory = TemporaryDirectory()
        let places = syntheticPlaces(30_000, seed: 9) + [station]
        let reference = directory.file("reference.db")
        var resolved = places
        for i in resolved.indices where resolved[i].address == nil {
            resolved[i].address = i % 2 == 0 ? "near Street \(i % 7)" : nil
            resolved[i].addressSource = i % 2 == 0 ? .street : .none
        }
        try PlaceDatabase.replace(at: reference, with: resolved)

        let path = directory.file("places.db")
        let writer = try PlaceFileWriter(path: path, memoryLimit: 1 << 20)
        for place in places { writer.add(place) }
        var next = 0
        writer.assignAddresses { coordinate in
            while resolved[next].address == places[next].address && places[next].address != nil { next += 1 }
            defer { next += 1 }
            #expect(coordinate == places[next].coordinate)
            return (resolved[next].address, resolved[next].addressSource)
        }
        var steps: [String] = []
        try writer.finish { steps.append($0) }
        #expect(steps.contains { $0.contains("buckets") && !$0.contains(" 1 bucket") }, "\(steps)")
        #expect(writer.addressSources[.street] == resolved.filter { $0.addressSource == .street }.count)

        let expected = try PlaceDatabase.open(path: reference).load()
        let written = try PlaceDatabase.open(path: path).load()
        #expect(written.count == expected.count)
        for number in 0..<expected.count {
            #expect(try written.place(at: number) == expected.place(at: number))
            #expect(written.reaches[number] == expected.reaches[number])
        }
        #expect(directory.leftovers.isEmpty)
    }

    /// The rows go in on a thread of their own, in batches, while the pack is written: every row still
    /// holds the place the pack has at its number (rowid = number + 1), across many batches.
    @Test func theSQLiteRowsMatchThePackPlaceByPlace() throws {
        let directory = TemporaryDirectory()
        let places = syntheticPlaces(3 * RowInserter.batchSize + 17, seed: 4) + [station]
        let path = directory.file("places.db")
        try PlaceDatabase.replace(at: path, with: places)
        let set = try PlaceDatabase.open(path: path).load()
        let database = try Database(path: path)
        let rows = try database.prepare("SELECT rowid, id, name, kind, latitude, longitude FROM places ORDER BY rowid")
        var count = 0
        while try rows.step() {
            let number = Int(rows.int64(at: 0)) - 1
            #expect(number == count)
            let place = try set.place(at: number)
            #expect(rows.text(at: 1) == place.id)
            #expect(rows.text(at: 2) == place.name)
            #expect(rows.text(at: 3) == place.kind)
            #expect(rows.double(at: 4) == place.coordinate.latitude)
            #expect(rows.double(at: 5) == place.coordinate.longitude)
            count += 1
        }
        #expect(count == places.count)
        #expect(Set((0..<count).map { try! set.place(at: $0).id }) == Set(places.map(\.id)))
    }

    /// Places with every optional column set and unset, empty and non-ASCII texts, localized names.
    private static func variedPlaces(_ count: Int, seed: UInt64) -> [Place] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { i in
            let latitude = 60.17 + random.gaussian() * 0.02
            let longitude = 24.94 + random.gaussian() * 0.04
            var place = Place(
                id: "osm:way/\(100_000 + i)", name: i % 7 == 0 ? "" : "Paikka \(i) ä",
                kind: i % 2 == 0 ? "amenity=cafe" : "",
                address: i % 3 == 0 ? "Katu \(i)" : i % 3 == 1 ? nil : "",
                coordinate: Coordinate(latitude: latitude, longitude: longitude),
                addressSource: AddressSource.allCases[i % AddressSource.allCases.count])
            if i % 4 == 0 {
                place.localizedNames = ["sv": "Plats \(i)", "fi": i % 8 == 0 ? "" : "Paikka"]
            }
            if i % 5 == 0 {
                let ring = (0..<(3 + i % 6)).map { k in
                    Coordinate(latitude: latitude + Double(k) * 1e-4, longitude: longitude - Double(k % 2) * 1e-4)
                }
                place.outline = ring + [ring[0]]
                place.bounds = BoundingBox(enclosing: ring)
                place.area = Double(i) + 0.5
            } else if i % 5 == 1 {
                place.bounds = BoundingBox(
                    minLatitude: latitude, minLongitude: longitude, maxLatitude: latitude + 1e-3,
                    maxLongitude: longitude + 1e-3)
            }
            return place
        }
    }

    /// Every column of every row is what its place holds (the rows are bound from the spilled records'
    /// bytes, not from decoded places): NULL where the place has nothing, '' where it has empty text.
    @Test func everyColumnOfEveryRowHoldsItsPlace() throws {
        let directory = TemporaryDirectory()
        let places = Self.variedPlaces(2 * RowInserter.batchSize + 5, seed: 9) + [cafe, station, kiosk]
        let path = directory.file("places.db")
        try PlaceDatabase.replace(at: path, with: places)
        let byID = Dictionary(uniqueKeysWithValues: places.map { ($0.id, $0) })
        let database = try Database(path: path)
        let rows = try database.prepare(
            """
            SELECT id, name, kind, address, typeof(address), latitude, longitude, area, min_lat, min_lon, max_lat,
                max_lon, typeof(min_lat), hex(outline), typeof(outline), address_source, names, typeof(names),
                typeof(id) || typeof(name) || typeof(kind) || typeof(address_source)
            FROM places ORDER BY rowid
            """)
        var count = 0
        while try rows.step() {
            let place = try #require(byID[rows.text(at: 0) ?? ""])
            #expect(rows.text(at: 1) == place.name)
            #expect(rows.text(at: 2) == place.kind)
            #expect(rows.text(at: 3) == place.address)
            #expect(rows.text(at: 4) == (place.address == nil ? "null" : "text"))
            #expect(rows.double(at: 5) == place.coordinate.latitude)
            #expect(rows.double(at: 6) == place.coordinate.longitude)
            #expect(rows.double(at: 7) == place.area)
            if let bounds = place.bounds {
                #expect(rows.double(at: 8) == bounds.minLatitude)
                #expect(rows.double(at: 9) == bounds.minLongitude)
                #expect(rows.double(at: 10) == bounds.maxLatitude)
                #expect(rows.double(at: 11) == bounds.maxLongitude)
            }
            #expect(rows.text(at: 12) == (place.bounds == nil ? "null" : "real"))
            let outline = place.outline ?? []
            #expect(rows.text(at: 13) == OutlineCoding.encode(outline).map { String(format: "%02X", $0) }.joined())
            #expect(rows.text(at: 14) == (outline.isEmpty ? "null" : "blob"))
            #expect(rows.text(at: 15) == place.addressSource.rawValue)
            #expect(rows.text(at: 16) == LocalizedNamesCoding.encode(place.localizedNames))
            #expect(rows.text(at: 17) == (place.localizedNames.isEmpty ? "null" : "text"))
            #expect(rows.text(at: 18) == "texttexttexttext")
            count += 1
        }
        #expect(count == places.count)
    }

    @Test func eachAddressSourceHasItsCode() {
        for (code, source) in PlacePack.sourceCodes.enumerated() { #expect(PlacePack.sourceCode(of: source) == code) }
        #expect(Set(PlacePack.sourceCodes) == Set(AddressSource.allCases))
    }

    /// A record's columns read in place are the fields `RecordEncoder` wrote; a cut record reads as none.
    @Test func aRecordsColumnsAreReadInPlace() throws {
        for place in Self.variedPlaces(40, seed: 3) + [cafe, station, kiosk] {
            var encoder = RecordEncoder()
            encoder.encode(place)
            try encoder.bytes.withUnsafeBytes { raw in
                let columns = try #require(RecordColumns(raw))
                #expect(String(decoding: columns.id, as: UTF8.self) == place.id)
                #expect(String(decoding: columns.name, as: UTF8.self) == place.name)
                #expect(columns.address.map { String(decoding: $0, as: UTF8.self) } == place.address)
                #expect(
                    columns.names.map { String(decoding: $0, as: UTF8.self) }
                        == LocalizedNamesCoding.encode(place.localizedNames))
                #expect(columns.area == place.area)
                #expect(columns.bounds == place.bounds)
                #expect(columns.outline.map(Array.init) ?? [] == OutlineCoding.encode(place.outline ?? []))
                #expect(PlacePack.sourceCodes[columns.sourceCode] == place.addressSource)
                for cut in [1, 3, raw.count / 2] where cut < raw.count && place.outline != nil {
                    #expect(RecordColumns(UnsafeRawBufferPointer(rebasing: raw[..<cut])) == nil)
                }
            }
        }
    }

    /// A file of the schema before this one (4: pack version 1, indexes without node blocks) is refused by
    /// name; `PlaceFileUpgrade` rewrites it in this schema with the very pack an import writes, so the
    /// same places and answers.
    @Test func aFileOfTheSchemaBeforeIsRefusedAndUpgradesToTheSameFile() throws {
        let directory = TemporaryDirectory()
        let current = directory.file("current.db")
        let places = syntheticPlaces(20_000, seed: 13) + [cafe, station, kiosk]
        try PlaceDatabase.replace(at: current, with: places)
        let old = directory.file("old.db")
        try PlaceFileUpgrade.rewrite(current, to: old, schema: 4)
        #expect(throws: PlaceDatabaseError.unsupportedSchema(path: old, version: "4")) {
            _ = try PlaceDatabase.open(path: old)
        }
        func pack(_ path: String) throws -> [UInt8] {
            let bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
            let start = bytes[(bytes.count - 24)..<(bytes.count - 16)].reversed().reduce(0) { $0 << 8 | Int($1) }
            return Array(bytes[start...])
        }
        #expect(try pack(old) != pack(current), "the old layout has no node blocks")
        let upgraded = directory.file("upgraded.db")
        try PlaceFileUpgrade.rewrite(old, to: upgraded)
        #expect(try pack(upgraded) == pack(current))
        let expected = try PlaceDatabase.open(path: current).load()
        let written = try PlaceDatabase.open(path: upgraded).load()
        #expect(written.count == expected.count)
        for number in stride(from: 0, to: expected.count, by: 7) {
            #expect(try written.place(at: number) == expected.place(at: number))
        }
        for place in places.prefix(200) {
            #expect(written.index.within(300, of: place.coordinate) == expected.index.within(300, of: place.coordinate))
            #expect(
                written.areaIndex.members(within: 300, of: place.coordinate)
                    == expected.areaIndex.members(within: 300, of: place.coordinate))
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == [
                "current.db", "old.db", "upgraded.db",
            ])
    }

    /// A schema-5 file (the pack as now, records without details) is refused by name and upgraded in place
    /// to this schema with the same places.
    @Test func aSchema5FileUpgradesInPlace() throws {
        let directory = TemporaryDirectory()
        let current = directory.file("current.db")
        try PlaceDatabase.replace(at: current, with: syntheticPlaces(2_000, seed: 21) + [cafe, station])
        let path = directory.file("places.db")
        try PlaceFileUpgrade.rewrite(current, to: path, schema: 5)
        #expect(throws: PlaceDatabaseError.unsupportedSchema(path: path, version: "5")) {
            _ = try PlaceDatabase.open(path: path)
        }
        #expect(try PlaceFileUpgrade.upgrade(inPlace: path) == .upgraded(from: "5"))
        let upgraded = try PlaceDatabase.open(path: path).load()
        let expected = try PlaceDatabase.open(path: current).load()
        #expect(upgraded.count == expected.count)
        for number in stride(from: 0, to: expected.count, by: 13) {
            #expect(try upgraded.place(at: number) == expected.place(at: number))
        }
    }

    /// `upgrade(inPlace:)`, what `placectl upgrade` runs: a schema-4 file becomes the file an import writes,
    /// keeping its mode; a file of this schema is left as it was; a damaged or foreign file is a named error
    /// that leaves it byte for byte as it was and nothing beside it.
    @Test func anUpgradeInPlaceRewritesOnlyAFileOfTheSchemaBefore() throws {
        let directory = TemporaryDirectory()
        let current = directory.file("current.db")
        try PlaceDatabase.replace(at: current, with: syntheticPlaces(3_000, seed: 5) + [cafe, station])
        let path = directory.file("places.db")
        try PlaceFileUpgrade.rewriteInPreviousSchema(current, to: path)
        #expect(chmod(path, 0o640) == 0)
        #expect(try PlaceFileUpgrade.upgrade(inPlace: path) == .upgraded(from: "4"))
        #expect(FileManager.default.contents(atPath: path) != nil)
        let upgraded = try PlaceDatabase.open(path: path).load()
        let expected = try PlaceDatabase.open(path: current).load()
        #expect(upgraded.count == expected.count)
        #expect(try upgraded.place(at: 17) == expected.place(at: 17))
        var status = stat()
        #expect(stat(path, &status) == 0 && status.st_mode & 0o7777 == 0o640)

        let bytes = FileManager.default.contents(atPath: path)
        var before = stat()
        #expect(stat(path, &before) == 0)
        #expect(try PlaceFileUpgrade.upgrade(inPlace: path) == .alreadyCurrent)
        var after = stat()
        #expect(stat(path, &after) == 0 && after.st_ino == before.st_ino)
        #expect(FileManager.default.contents(atPath: path) == bytes)

        // Damaged: the old file's pack cut short; foreign: an SQLite database of someone else's.
        let damaged = directory.file("damaged.db")
        try PlaceFileUpgrade.rewriteInPreviousSchema(current, to: damaged)
        var size = stat()
        #expect(stat(damaged, &size) == 0 && truncate(damaged, size.st_size - 4096) == 0)
        let foreign = directory.file("foreign.db")
        try Database(path: foreign, mode: .readWriteCreate).execute("CREATE TABLE notes (text TEXT)")
        let cases: [(String, (PlaceDatabaseError) -> Bool)] = [
            (damaged, { if case .corrupt = $0 { true } else { false } }),
            (foreign, { $0 == .unsupportedSchema(path: foreign, version: nil) }),
        ]
        for (file, expectedError) in cases {
            let unchanged = FileManager.default.contents(atPath: file)
            do {
                _ = try PlaceFileUpgrade.upgrade(inPlace: file)
                Issue.record("\(file) upgraded")
            } catch {
                #expect(expectedError(error), "\(error)")
            }
            #expect(FileManager.default.contents(atPath: file) == unchanged)
        }
        #expect(throws: PlaceDatabaseError.missing(path: directory.file("none.db"))) {
            _ = try PlaceFileUpgrade.upgrade(inPlace: directory.file("none.db"))
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == [
                "current.db", "damaged.db", "foreign.db", "places.db",
            ])
    }

    @Test func emptyPlaceListIsAValidDatabase() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        try PlaceDatabase.replace(at: path, with: [])
        let set = try PlaceDatabase.open(path: path).load()
        #expect(set.count == 0)
        #expect(set.index.within(250, of: cafe.coordinate).isEmpty)
    }

    @Test func replaceSwapsTheFileWhileAnOldReaderKeepsItsData() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        try PlaceDatabase.replace(at: path, with: [cafe, kiosk])
        let old = try PlaceDatabase.open(path: path).load()

        try PlaceDatabase.replace(at: path, with: [station])
        #expect(directory.leftovers.isEmpty)
        let new = try PlaceDatabase.open(path: path).load()
        #expect(new.count == 1)
        #expect(try new.place(at: 0) == station)
        // The old set still reads its own (now unlinked) file: a daemon serves it until it swaps.
        #expect(old.count == 2)
        #expect(try Set([old.place(at: 0).id, old.place(at: 1).id]) == [cafe.id, kiosk.id])
    }

    @Test func targetThatIsADirectoryFailsAndLeavesNoTemporaryFile() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        #expect(throws: PlaceDatabaseError.cannotWrite(path: path, operation: "rename", errno: EISDIR)) {
            try PlaceDatabase.replace(at: path, with: [cafe])
        }
        #expect(directory.leftovers.isEmpty)
        var isDirectory: ObjCBool = false
        #expect(
            FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
                && isDirectory.boolValue)
    }

    @Test func missingParentDirectoryIsANamedError() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("absent/places.db")
        #expect(
            throws: PlaceDatabaseError.cannotWrite(
                path: path + ".new-\(getpid())", operation: "create", errno: ENOENT)
        ) {
            try PlaceDatabase.replace(at: path, with: [cafe])
        }
    }

    @Test func badInputLeavesTheOldDatabaseServing() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        try PlaceDatabase.replace(at: path, with: [cafe, kiosk])

        var duplicate = station
        duplicate.id = cafe.id
        #expect(throws: PlaceDatabaseError.invalidPlace(id: cafe.id, reason: "duplicate id")) {
            try PlaceDatabase.replace(at: path, with: [cafe, station, duplicate])
        }
        var nowhere = station
        nowhere.coordinate = Coordinate(latitude: .nan, longitude: 24)
        #expect {
            try PlaceDatabase.replace(at: path, with: [nowhere])
        } throws: { error in
            guard case .invalidPlace(let id, _) = error as? PlaceDatabaseError else { return false }
            return id == station.id
        }
        var negative = station
        negative.area = -1
        #expect(throws: PlaceDatabaseError.self) {
            try PlaceDatabase.replace(at: path, with: [negative])
        }

        #expect(directory.leftovers.isEmpty)
        let set = try PlaceDatabase.open(path: path).load()
        #expect(set.count == 2)
    }

    @Test func missingFileIsNamed() {
        let directory = TemporaryDirectory()
        let path = directory.file("nothing.db")
        #expect(throws: PlaceDatabaseError.missing(path: path)) { try PlaceDatabase.open(path: path) }
    }

    @Test func foreignFileIsNotADatabase() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: path))
        #expect(throws: PlaceDatabaseError.notADatabase(path: path)) {
            try PlaceDatabase.open(path: path)
        }
    }

    @Test func otherSQLiteDatabaseIsTheWrongSchema() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("other.db")
        try Database(path: path).execute("CREATE TABLE things(x INTEGER)")
        #expect(throws: PlaceDatabaseError.unsupportedSchema(path: path, version: nil)) {
            try PlaceDatabase.open(path: path)
        }

        let future = directory.file("future.db")
        try PlaceDatabase.replace(at: future, with: [cafe])
        try Database(path: future, mode: .readWrite).execute(
            "UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        #expect(throws: PlaceDatabaseError.unsupportedSchema(path: future, version: "99")) {
            try PlaceDatabase.open(path: future)
        }
    }

    @Test func truncatedFileIsRejected() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        try PlaceDatabase.replace(at: path, with: syntheticPlaces(5000, seed: 3))
        let size = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(truncate(path, off_t(size / 2)) == 0)
        #expect(isCorrupt { _ = try PlaceDatabase.open(path: path).load() })
    }

    @Test func damagedMetaOrPackIsCorrupt() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("places.db")
        let places = syntheticPlaces(500, seed: 5)
        for damage in [
            "UPDATE meta SET value = '7' WHERE key = 'place_count'",
            "UPDATE meta SET value = '00' WHERE key = 'pack_id'",
            // A tool growing the SQLite part writes its new pages over the pack.
            "CREATE TABLE more(x); INSERT INTO more SELECT randomblob(1000) FROM places",
        ] {
            try PlaceDatabase.replace(at: path, with: places)
            try Database(path: path, mode: .readWrite).execute(damage)
            #expect(isCorrupt { _ = try PlaceDatabase.open(path: path).load() }, "\(damage)")
        }
        // Bytes of the pack: its trailer, its header, a section's length, the index's magic.
        try PlaceDatabase.replace(at: path, with: places)
        let good = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let packStart = Int(good[(good.count - 24)..<(good.count - 16)].reversed().reduce(0) { $0 << 8 | Int($1) })
        for (offset, bytes) in [
            (good.count - 32, [UInt8](repeating: 0, count: 8)), (packStart, [0x41]),
            (packStart + 56, [0xFF, 0xFF, 0xFF]), (packStart + 4096, [0x00]),
        ] {
            var damaged = good
            damaged.replaceSubrange(offset..<offset + bytes.count, with: bytes)
            try Data(damaged).write(to: URL(fileURLWithPath: path))
            #expect(isCorrupt { _ = try PlaceDatabase.open(path: path).load() }, "byte \(offset)")
        }
        try Data(good.dropLast(100)).write(to: URL(fileURLWithPath: path))
        #expect(isCorrupt { _ = try PlaceDatabase.open(path: path).load() }, "cut short")
    }

    @Test func sqliteErrorsCarryCodeAndMessage() throws {
        let database = try Database(path: ":memory:")
        #expect {
            try database.execute("SELEKT 1")
        } throws: { error in
            guard let error = error as? SQLiteError else { return false }
            return error.primaryCode == SQLITE_ERROR && error.message.contains("syntax error")
                && error.description.contains("SELEKT")
        }
        try database.execute("CREATE TABLE t(x TEXT NOT NULL UNIQUE)")
        let insert = try database.prepare("INSERT INTO t VALUES (?)")
        try insert.bind("a\u{0}b", at: 1)
        try insert.step()
        insert.reset()
        #expect(throws: SQLiteError.self) { try insert.step() }  // same value again: UNIQUE
        let read = try database.prepare("SELECT x, length(CAST(x AS BLOB)) FROM t")
        #expect(try read.step())
        #expect(read.text(at: 0) == "a\u{0}b")
        #expect(read.int64(at: 1) == 3)
    }

    /// Text is bound from the string's own UTF-8: "" is an empty text (not NULL), non-ASCII and a
    /// substring's bytes as they are.
    @Test func textIsBoundByteForByte() throws {
        let database = try Database(path: ":memory:")
        try database.execute("CREATE TABLE t(x TEXT)")
        let insert = try database.prepare("INSERT INTO t VALUES (?)")
        let long = String(repeating: "Mannerheimintie ", count: 40)
        let texts = ["", "a", "Ääkkönen 𝄞 café", String("xxPuistokatuxx".dropFirst(2).dropLast(2)), long]
        for text in texts {
            try insert.bind(text, at: 1)
            try insert.step()
            insert.reset()
        }
        let read = try database.prepare("SELECT x, x IS NULL, length(CAST(x AS BLOB)) FROM t ORDER BY rowid")
        for text in texts {
            #expect(try read.step())
            #expect(read.text(at: 0) == text)
            #expect(read.int64(at: 1) == 0)
            #expect(read.int64(at: 2) == Int64(text.utf8.count))
        }
    }

    @Test func transactionRollsBackOnError() throws {
        struct Boom: Error {}
        let database = try Database(path: ":memory:")
        try database.execute("CREATE TABLE t(x INTEGER)")
        #expect(throws: Boom.self) {
            try database.transaction {
                try database.execute("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        #expect(try database.scalarInt64("SELECT count(*) FROM t") == 0)
        try database.transaction { try database.execute("INSERT INTO t VALUES (2)") }
        #expect(try database.scalarInt64("SELECT count(*) FROM t") == 1)
    }
}
