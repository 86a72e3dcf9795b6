import Foundation
import PlacedCore
import PlacedJSON
import PlacedOSM
import PlacedWire
import Testing

@testable import PlacectlKit

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// `placectl map`'s drawing, from a features array as placed's `Map` sends it: the SVG is XML with
/// the marker, the top five names and the attribution; the PNG has the size asked for.
@Suite struct MapRendererTests {
    static let center = Coordinate(latitude: 60.1699, longitude: 24.9384)

    /// The repository's Helsinki extract, found from this file's path.
    static let helsinki: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("data/helsinki-center.osm.pbf").standardized.path

    /// The features of the Helsinki extract within 300 m, through the wire form (GeoJSON and back).
    static let features: [MapFeature] = {
        guard let extract = try? OSM.extractPlaces(path: helsinki), let all = extract.features else { return [] }
        let projection = LocalProjection(origin: center)
        return all.filter { $0.bounds.distance(from: projection) <= 300 }.compactMap {
            MapFeature(geoJSON: $0.geoJSON(language: "sv"))
        }
    }()

    static let names = ["Forum", "Café & Bar <Ekberg>", "Stockmann", "Helsingin päärautatieasema", "Sokos", "Kiosk"]

    static func scene(features: [MapFeature] = MapRendererTests.features) -> MapScene {
        let projection = LocalProjection(origin: center)
        let places = names.enumerated().map { index, name in
            MapScene.RankedPlace(
                id: "osm:node/\(index)", name: name,
                coordinate: projection.coordinate(east: Double(index) * 30 - 60, north: Double(index % 3) * 25 - 20),
                likelihood: [0.43, 0.21, 0.12, 0.05, 0.02, 0.004][index])
        }
        return MapScene(
            center: center, radius: 150, features: features,
            fix: .init(coordinate: projection.coordinate(east: 5, north: -5), accuracy: 24),
            places: places,
            marker: .init(
                title: "Forum", address: "Mannerheimintie 14–20, 00100 Helsinki", coordinate: places[0].coordinate))
    }

    /// Every text node of an XML document; throws when it does not parse.
    static func texts(ofXML svg: String) throws -> (texts: [String], elements: [String: Int], ids: Set<String>) {
        final class Collector: NSObject, XMLParserDelegate {
            var texts: [String] = []
            var current = ""
            var elements: [String: Int] = [:]
            var ids: Set<String> = []
            func parser(
                _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]
            ) {
                elements[name, default: 0] += 1
                if let id = attributes["id"] { ids.insert(id) }
                current = ""
            }
            func parser(_ parser: XMLParser, foundCharacters string: String) { current += string }
            func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?)
            {
                if name == "text" || name == "title" { texts.append(current) }
                current = ""
            }
        }
        let parser = XMLParser(data: Data(svg.utf8))
        let collector = Collector()
        parser.delegate = collector
        guard parser.parse() else {
            throw FixtureFailure("the SVG is not XML: \(parser.parserError.map { "\($0)" } ?? "?")")
        }
        return (collector.texts, collector.elements, collector.ids)
    }

    @Test func helsinkiFeaturesAreThere() {
        #expect(Self.features.count > 300, "the extract's map layer around the station (found \(Self.features.count))")
    }

    @Test func svgIsXMLWithTheMarkerTheTopFiveAndTheAttribution() throws {
        let map = SVGMap(scene: Self.scene(), width: 800, height: 480)
        let svg = map.render()
        let (texts, elements, ids) = try Self.texts(ofXML: svg)
        #expect(svg.hasPrefix(#"<?xml version="1.0" encoding="UTF-8"?>"#))
        #expect(svg.contains(#"width="800" height="480" viewBox="0 0 800 480""#))
        for name in Self.names.prefix(5) {
            #expect(texts.contains(name), "\(name) is listed")
        }
        #expect(texts.contains("43 %") && texts.contains("<1 %"), "likelihoods")
        #expect(
            texts.contains("Forum") && texts.contains("Mannerheimintie 14–20, 00100 Helsinki"), "the marker's callout")
        #expect(texts.contains(Place.attribution))
        #expect(
            ids.isSuperset(of: ["marker", "fix", "accuracy", "places", "ranking", "scale", "attribution", "building"]))
        #expect((elements["path"] ?? 0) > 300, "the map layer is drawn")
        #expect(
            texts.contains { ["Mannerheimvägen", "Kajsaniemigatan", "Järnvägstorget"].contains($0) },
            "street names in Swedish")
        #expect(texts.contains("\(Int(map.scaleBarMetres)) m"))
        // The accuracy circle is the 95 % radius at the map's scale: 24 m at 480 / 300 px a metre.
        #expect(svg.contains(#"id="accuracy" cx="408" cy="248" r="38.4""#))
    }

    @Test func namesThatNeedEscapingStayText() throws {
        let svg = SVGMap(scene: Self.scene(features: [])).render()
        #expect(svg.contains("Café &amp; Bar &lt;Ekberg&gt;"))
        #expect(try Self.texts(ofXML: svg).texts.contains("Café & Bar <Ekberg>"))
    }

    @Test func aMarkerOffTheMapIsStillNamed() throws {
        var scene = Self.scene(features: [])
        scene.marker?.coordinate = Coordinate(latitude: 60.2, longitude: 24.9)
        let texts = try Self.texts(ofXML: SVGMap(scene: scene).render()).texts
        #expect(texts.contains("Forum (off the map)"))
    }

    @Test func theMarkersHoursAreALineOfItsLabel() throws {
        var scene = Self.scene(features: [])
        scene.marker?.hours = "open until 21:00"
        let texts = try Self.texts(ofXML: SVGMap(scene: scene).render()).texts
        #expect(texts.contains("open until 21:00"))
        scene.marker?.hours = nil
        #expect(try !Self.texts(ofXML: SVGMap(scene: scene).render()).texts.contains { $0.contains("until") })
    }

    @Test func hoursReadFromDetailsSayUntilWhenWithTheDayWhenNotToday() throws {
        // 2026-12-06 12:00 UTC is 14:00 in Helsinki (+02:00), a Sunday.
        let noon = CivilDateTime(year: 2026, month: 12, day: 6, hour: 12).secondsSinceEpoch
        func hours(_ text: String) throws -> String? {
            MapScene.Marker.hours(details: try JSON(parsing: Array(text.utf8)), now: noon)
        }
        #expect(try hours(#"{"open_now": true, "next_change": "2026-12-06T21:00:00+02:00"}"#) == "open until 21:00")
        #expect(
            try hours(#"{"open_now": false, "next_change": "2026-12-07T07:00:00+02:00"}"#) == "closed until Mon 07:00")
        // 22:30 UTC on the 6th is 00:30 on the 7th in Helsinki: a change at 02:00 is the same day there.
        let late = CivilDateTime(year: 2026, month: 12, day: 6, hour: 22, minute: 30).secondsSinceEpoch
        #expect(
            MapScene.Marker.hours(
                details: try JSON(
                    parsing: Array(#"{"open_now": true, "next_change": "2026-12-07T02:00:00+02:00"}"#.utf8)),
                now: late) == "open until 02:00")
        #expect(try hours(#"{"open_now": true}"#) == "open")
        #expect(try hours(#"{"opening_hours": "Mo-Fr 08:00-18:00"}"#) == nil)
    }

    @Test func scaleBarIsARoundLengthUpToAFifthOfTheWidth() {
        for (radius, metres) in [(150.0, 100.0), (50, 20), (500, 200), (10, 5)] {
            var scene = Self.scene(features: [])
            scene.radius = radius
            let map = SVGMap(scene: scene)
            #expect(map.scaleBarMetres == metres, "radius \(radius)")
            #expect(map.scaleBarMetres * map.scale <= 160)
        }
    }

    @Test func pngRendersAtTheRequestedSize() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("placed-map-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (width, height) in [(800, 480), (400, 300)] {
            let path = directory.appendingPathComponent("map-\(width).png").path
            let svg = SVGMap(scene: Self.scene(), width: width, height: height).render()
            // Fails with the reason when rsvg-convert is missing: scripts/packages lists librsvg2-bin.
            try MapPNG.write(svg: svg, width: width, height: height, to: path)
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            let size = try #require(MapPNG.size(ofPNG: bytes))
            #expect(size.width == width && size.height == height)
            #expect(bytes.count > 10_000, "a drawn map, not an empty picture")
        }
        #expect(throws: MapPNG.Failure.self) {
            try MapPNG.write(svg: "<svg", width: 10, height: 10, to: directory.appendingPathComponent("bad.png").path)
        }
        #expect(MapPNG.size(ofPNG: Array("not a png at all, not at all".utf8)) == nil)
    }

    @Test func ownPlacesAreOutlinedCirclesAndPolygonsWithTheirHoles() throws {
        let projection = LocalProjection(origin: Self.center)
        func square(_ half: Double, east: Double) -> [Coordinate] {
            [(-1, -1), (1, -1), (1, 1), (-1, 1), (-1, -1)].map {
                projection.coordinate(east: east + $0.0 * half, north: 100 + $0.1 * half)
            }
        }
        let gate = OwnPlace(
            id: "own:gate", name: "Gate <3>", kind: "gate",
            geometry: .circle(centre: projection.coordinate(east: -80, north: 40), radius: 25))
        let yard = OwnPlace(
            id: "own:yard", name: "Yard",
            geometry: .polygons([[square(30, east: 80), square(10, east: 80).reversed()]]))
        let far = OwnPlace(
            id: "own:far", name: "Far",
            geometry: .circle(centre: projection.coordinate(east: 5000, north: 0), radius: 9))
        var scene = Self.scene(features: [])
        scene.ownPlaces = [gate, yard, far]
        let map = SVGMap(scene: scene, width: 800, height: 480)
        let svg = map.render()
        let (texts, _, ids) = try Self.texts(ofXML: svg)
        #expect(ids.isSuperset(of: ["own-places", "own-place-names"]))
        // The circle at its place and the map's scale (1.6 px a metre): 25 m is 40 px.
        let centre = map.point(gate.geometry.boundingCircle.centre)
        let circle = try #require(svg.split(separator: "\n").first { $0.hasPrefix(#"<circle class="own-place""#) })
        func attribute(_ name: String) -> Double? {
            circle.split(separator: " ").first { $0.hasPrefix(name + "=") }.flatMap {
                Double($0.dropFirst(name.count + 2).prefix { $0 != "\"" })
            }
        }
        #expect(abs((attribute("cx") ?? 0) - centre.x) <= 0.05 && abs((attribute("cy") ?? 0) - centre.y) <= 0.05)
        #expect(attribute("r") == 40)
        // The polygon is one path of two rings, the hole left open by the even-odd rule.
        let polygon = try #require(svg.split(separator: "\n").first { $0.hasPrefix(#"<path class="own-place""#) })
        #expect(polygon.filter { $0 == "Z" }.count == 2)
        #expect(svg.contains(#"id="own-places" fill="\#(SVGMap.ownPurple)" fill-opacity="0.12""#))
        #expect(svg.contains(#"fill-rule="evenodd""#))
        #expect(texts.contains("Gate <3> (own:gate)") && texts.contains("Yard (own:yard)"), "titles")
        #expect(texts.contains("Gate <3>") && texts.contains("Yard"), "names on the map")
        #expect(!texts.contains { $0.contains("Far") }, "a place off the map is not drawn")

        // From an OwnPlaces reply: the places within reach only.
        let reply = [gate, yard, far].map(\.geoJSON) + [["type": "Feature"]]
        #expect(MapScene.ownPlaces(reply, within: 300, of: Self.center).map(\.id) == ["own:gate", "own:yard"])
        #expect(MapScene.ownPlaces(reply, within: 5000, of: Self.center).count == 3)
        #expect(!SVGMap(scene: Self.scene(features: [])).render().contains("own-place"), "none: nothing drawn")
    }

    @Test func sceneFromVarlinkReplies() throws {
        let forum: JSON = [
            "id": "osm:way/289767497", "name": "Forum", "kind": "shop=mall", "latitude": 60.169283,
            "longitude": 24.938127, "distance": 25.07, "likelihood": 0.438, "address": "Mannerheimintie 20",
        ]
        let current: [String: JSON] = [
            "generation": 3, "stale": false, "places": [forum],
            "location": ["latitude": 60.1699, "longitude": 24.9384, "accuracy": 12, "mode": "3d"],
        ]
        let status: [String: JSON] = ["marker": ["place": forum, "time": "2026-11-29T12:00:00Z"]]
        let map: [String: JSON] = ["features": .array(Self.features.prefix(20).map { $0.geoJSON() })]
        let scene = try MapScene(current: current, status: status, map: map, center: nil, radius: 150)
        #expect(scene.center == Coordinate(latitude: 60.1699, longitude: 24.9384))
        #expect(scene.fix?.accuracy == 12)
        #expect(scene.places.map(\.name) == ["Forum"] && scene.places[0].likelihood == 0.438)
        #expect(
            scene.marker == .init(title: "Forum", address: "Mannerheimintie 20", coordinate: scene.places[0].coordinate)
        )
        #expect(scene.features.count == min(20, Self.features.count))
        #expect(throws: ClientError.self) {
            try MapScene(current: [:], status: [:], map: map, center: nil, radius: 150)
        }
        #expect(throws: ClientError.self) {
            try MapScene(current: current, status: status, map: [:], center: nil, radius: 150)
        }
        #expect(abs(MapScene.queryRadius(radius: 150, width: 800, height: 480) - 291.5) < 0.1)

        // The marker keeps the name its selection recorded; the ranking names it in the reader's language.
        var swedish = current
        swedish["places"] = [.object(forum.object!.merging(["name": "Forum (sv)"]) { $1 })]
        let named = try MapScene(current: swedish, status: status, map: map, center: nil, radius: 150)
        #expect(named.marker?.title == "Forum (sv)")
    }
}

struct FixtureFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
