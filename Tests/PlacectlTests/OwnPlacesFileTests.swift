import PlacedCore
import PlacedJSON
import PlacedWire
import Testing

@testable import PlacectlKit

@Suite struct OwnPlacesFileTests {
    @Test func addMakesACircleAndRefusesBadInputByName() throws {
        let place = try OwnPlacesFile.place(key: "depot", name: "Depot", at: "60.17,24.95", radius: 40, kind: nil)
        #expect(place.id == "own:depot" && place.kind == "own")
        #expect(place.geometry == .circle(centre: Coordinate(latitude: 60.17, longitude: 24.95), radius: 40))
        #expect(try OwnPlacesFile.place(key: "own:d", name: "D", at: "60,24", radius: 1, kind: "x").id == "own:d")
        #expect(throws: UsageError.self) {
            try OwnPlacesFile.place(key: "depot", name: "Depot", at: "60.17 24.95", radius: 40, kind: nil)
        }
        do {
            _ = try OwnPlacesFile.place(key: "a b", name: "Depot", at: "60,24", radius: 40, kind: nil)
            Issue.record("a key with a space was taken")
        } catch {
            #expect(error.description.contains("invalid id \"own:a b\""))
        }
        #expect(OwnPlacesFile.id("depot") == "own:depot" && OwnPlacesFile.id("own:depot") == "own:depot")
    }

    @Test func theListingHasALineAPlace() throws {
        let circle = OwnPlace(
            id: "own:depot", name: "Depot", kind: "depot",
            geometry: .circle(centre: Coordinate(latitude: 60.17, longitude: 24.95), radius: 40))
        let ring = [(60.17, 24.94), (60.17, 24.941), (60.171, 24.941), (60.17, 24.94)].map {
            Coordinate(latitude: $0.0, longitude: $0.1)
        }
        let yard = OwnPlace(id: "own:yard", name: "Yard", geometry: .polygons([[ring]]))
        let text = OwnPlacesFile.listing(["places": .array([circle.geoJSON, yard.geoJSON])])
        #expect(
            text == """
                own:depot  Depot  depot  40 m around 60.170000,24.950000
                own:yard   Yard   own    polygon, 4 positions

                """)
        #expect(OwnPlacesFile.listing(["places": []]) == "no own places\n")
    }

    @Test func watchPrintsATransitionLine() {
        let update: JSON = [
            "generation": 3, "stale": false,
            "transition": [
                "event": "enter", "id": "own:depot", "name": "Depot", "kind": "depot",
                "location": ["latitude": 60.1699, "longitude": 24.9384, "accuracy": 5, "mode": "3d"],
                "time": "2026-12-06T13:00:00.000Z",
            ],
        ]
        #expect(
            Format.watchUpdate(update.object!, clock: "13:00:00")
                == "13:00:00  entered Depot (own:depot) at 60.1699000,24.9384000 ±5 m (3d)\n")
        var left = update.object!
        left["transition"] = ["event": "leave", "id": "own:depot", "name": "Depot"]
        #expect(Format.watchUpdate(left, clock: "13:00:09") == "13:00:09  left Depot (own:depot)\n")
    }
}
