import PlacedCore

/// Which ways and multipolygon relations make the map layer (docs/DESIGN.md, "Map layer"), and as what.
///
/// First rule that applies: a building (closed way or multipolygon); water areas and waterways;
/// squares (`place=square`, or a highway drawn as an area: `area=yes` or a multipolygon); green
/// areas; streets and paths (lines); railways and tram lines. Lines in tunnels are left out: the
/// map shows the surface.
enum MapRules {
    struct Classification: Equatable {
        let kind: MapFeature.Kind
        let featureClass: String
        let isArea: Bool
    }

    static let waterAreas: [(role: UInt8, values: [StaticString])] = [
        (PlaceRules.natural, ["water"]), (PlaceRules.waterway, ["riverbank", "dock"]),
        (PlaceRules.landuse, ["reservoir", "basin", "pond", "salt_pond"]),
    ]
    static let waterways: [StaticString] = ["river", "stream", "canal", "drain", "ditch"]
    static let greenAreas: [(role: UInt8, values: [StaticString])] = [
        (
            PlaceRules.leisure,
            ["park", "garden", "playground", "pitch", "nature_reserve", "golf_course", "dog_park", "common"]
        ),
        (
            PlaceRules.landuse,
            [
                "grass", "forest", "meadow", "recreation_ground", "village_green", "cemetery", "allotments",
                "orchard", "flowerbed", "plant_nursery", "vineyard", "greenfield",
            ]
        ),
        (PlaceRules.natural, ["wood", "scrub", "grassland", "heath", "wetland", "fell"]),
    ]
    static let streets: [StaticString] = [
        "motorway", "trunk", "primary", "secondary", "tertiary", "unclassified", "residential", "living_street",
        "service", "road", "busway", "motorway_link", "trunk_link", "primary_link", "secondary_link",
        "tertiary_link",
    ]
    static let paths: [StaticString] = [
        "pedestrian", "footway", "path", "cycleway", "steps", "track", "bridleway", "trail", "corridor",
    ]
    static let railways: [StaticString] = [
        "rail", "tram", "light_rail", "subway", "narrow_gauge", "funicular", "monorail", "preserved",
    ]

    /// What the element is on the map, if anything. `isClosed`: a way whose first and last node are
    /// the same (a ring); a multipolygon relation counts as closed and as an area.
    static func classify(_ tags: ElementTags, strings: StringTable, isClosed: Bool, isRelation: Bool)
        -> Classification?
    {
        guard tags.mayBeMapFeature else { return nil }
        let canBeArea = isClosed || isRelation
        func match(_ role: UInt8, _ values: [StaticString]) -> String? {
            guard let value = tags.value(role, in: strings), values.contains(where: { value.equals($0) }) else {
                return nil
            }
            return ElementTags.text(value)
        }
        func area(_ kind: MapFeature.Kind, _ featureClass: String) -> Classification? {
            canBeArea ? Classification(kind: kind, featureClass: featureClass, isArea: true) : nil
        }
        let inTunnel = tags.value(PlaceRules.tunnel, in: strings).map { !$0.isEmpty && !$0.equals("no") } ?? false
        func line(_ kind: MapFeature.Kind, _ featureClass: String) -> Classification? {
            isRelation || inTunnel ? nil : Classification(kind: kind, featureClass: featureClass, isArea: false)
        }

        if let building = tags.buildingValue(strings) { return area(.building, building) }
        for (role, values) in waterAreas {
            if let value = match(role, values) { return area(.water, value) }
        }
        if let value = match(PlaceRules.waterway, waterways) { return line(.water, value) }
        if tags.value(PlaceRules.place, is: "square", in: strings) { return area(.square, "square") }
        let highway = match(PlaceRules.highway, streets) ?? match(PlaceRules.highway, paths)
        if let highway, isRelation || (isClosed && tags.value(PlaceRules.area, is: "yes", in: strings)) {
            return area(.square, highway)
        }
        for (role, values) in greenAreas {
            if let value = match(role, values) { return area(.green, value) }
        }
        if let value = match(PlaceRules.highway, streets) { return line(.street, value) }
        if let value = match(PlaceRules.highway, paths) { return line(.path, value) }
        if let value = match(PlaceRules.railway, railways) { return line(.rail, value) }
        return nil
    }
}
