import Foundation
import PlacedCore
import PlacedTestSupport
import Testing

@testable import PlacedOSM

/// The address book by tile on disk answers as one book in memory over the same items, with one bucket
/// or many.
struct AddressSpillTests {
    @Test(arguments: [1, 7, 64]) func answersAsOneBookInMemory(buckets: Int) throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var random = SplitMix64(seed: UInt64(buckets))
        var book = AddressBook()
        let spill = try AddressSpill(in: directory.path, bucketCount: buckets)
        // About 30 km across, so items and places fall into many tiles, some near their edges.
        func point() -> Coordinate {
            Coordinate(
                latitude: 60.0 + Double(random.next() % 30_000) * 1e-5,
                longitude: 24.0 + Double(random.next() % 50_000) * 1e-5)
        }
        var corners: [Coordinate] = []
        for i in 0..<3_000 {
            let a = point()
            switch i % 3 {
            case 0:
                book.addPoint(a, address: "Katu \(i % 40)")
                spill.addPoint(a, address: "Katu \(i % 40)")
            case 1:
                let ring = [
                    a, Coordinate(latitude: a.latitude, longitude: a.longitude + 3e-4),
                    Coordinate(latitude: a.latitude + 2e-4, longitude: a.longitude + 3e-4), a,
                ]
                book.addBuilding(polygons: [[ring]], address: "Tie \(i % 17)")
                corners.append(a)
                spill.addBuilding(polygons: [[ring]], address: "Tie \(i % 17)")
            default:
                let line = (0..<5).map { Coordinate(latitude: a.latitude + Double($0) * 5e-4, longitude: a.longitude) }
                book.addStreet(name: "Street \(i % 23)", lines: [line])
                spill.addStreet(name: "Street \(i % 23)", lines: [line])
            }
        }
        // A street 220 km long: filed in every bucket rather than tile by tile.
        let long = [Coordinate(latitude: 59.0, longitude: 24.2), Coordinate(latitude: 61.0, longitude: 24.21)]
        book.addStreet(name: "Highway", lines: [long])
        spill.addStreet(name: "Highway", lines: [long])
        let inMemory = PlaceList()
        let onDisk = PlaceList()
        for i in 0..<4_000 {
            // Every fourth inside a building (just inside a corner), the others anywhere.
            var at = point()
            if i % 4 == 0, let corner = corners.popLast() {
                at = Coordinate(latitude: corner.latitude + 1e-5, longitude: corner.longitude + 5e-5)
            }
            let place = Place(id: "p\(i)", name: "P", kind: "k", address: i % 5 == 0 ? "Own" : nil, coordinate: at)
            inMemory.add(place)
            onDisk.add(place)
        }
        book.assign(to: inMemory, referenceLatitude: 60)
        try spill.assign(to: onDisk, referenceLatitude: 60, memoryLimit: 1)
        #expect(onDisk.places == inMemory.places)
        let sources = Set(onDisk.places.map(\.addressSource))
        #expect(sources.isSuperset(of: [.own, .building, .nearby, .street, .none]), "every kind of answer is tried")
    }
}
