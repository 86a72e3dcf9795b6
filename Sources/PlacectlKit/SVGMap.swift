import PlacedCore

#if canImport(Glibc)
    import Glibc
#endif

/// Draws a `MapScene` as SVG, with no library: the map layer (green, water, squares, buildings,
/// rail, paths, streets with their names), the own places' outlines with their names, the fix and its accuracy circle, the ranked places as
/// numbered pins with a list of names and likelihoods, the marker with its title and address, a
/// scale bar and the OpenStreetMap attribution. Sized for legibility at 800×480, a common in-vehicle
/// screen: 12–14 px text with a halo, pins 10 px across.
///
/// The plane is a local east/north projection around the centre (`LocalProjection`), north up;
/// `scene.radius` metres reach from the centre to the nearer edges.
public struct SVGMap {
    public let scene: MapScene
    public let width: Int
    public let height: Int

    public init(scene: MapScene, width: Int = 800, height: Int = 480) {
        self.scene = scene
        self.width = width
        self.height = height
    }

    /// Pixels per metre.
    public var scale: Double { Double(min(width, height)) / (2 * max(scene.radius, 1)) }

    private var projection: LocalProjection { LocalProjection(origin: scene.center) }

    /// Where a coordinate falls on the picture, in pixels from the top left.
    public func point(_ c: Coordinate) -> (x: Double, y: Double) {
        let p = projection.project(c)
        return (Double(width) / 2 + p.x * scale, Double(height) / 2 - p.y * scale)
    }

    // MARK: Style

    static let font = "DejaVu Sans, Verdana, Arial, sans-serif"
    static let land = "#f2efe9"
    static let fixBlue = "#1a73e8"
    static let markerRed = "#d93025"
    static let ownPurple = "#8e24aa"

    /// Street width in metres by highway class: drawn at the map's scale, 2 to 14 px, narrower than
    /// the real carriageway so that parallel ways (a dual carriageway, its tram lines) stay apart.
    static func streetWidth(_ featureClass: String) -> Double {
        switch featureClass {
        case "motorway", "trunk", "primary": 8
        case "secondary", "motorway_link", "trunk_link", "primary_link": 7
        case "tertiary", "secondary_link", "tertiary_link": 6
        case "residential", "unclassified", "living_street", "road", "busway": 5
        default: 3
        }
    }

    static func streetColour(_ featureClass: String) -> String {
        switch featureClass {
        case "motorway", "trunk", "motorway_link", "trunk_link": "#f9b29c"
        case "primary", "primary_link": "#fcd6a4"
        case "secondary", "secondary_link": "#f7fabf"
        default: "#ffffff"
        }
    }

    // MARK: Drawing

    public func render() -> String {
        var svg = SVGWriter()
        svg.open(
            "svg",
            [
                ("xmlns", "http://www.w3.org/2000/svg"), ("width", "\(width)"), ("height", "\(height)"),
                ("viewBox", "0 0 \(width) \(height)"), ("font-family", Self.font),
            ])
        svg.element(
            "title",
            text: "Map around \(scene.center.latitude.formatted(decimals: 5)), "
                + "\(scene.center.longitude.formatted(decimals: 5)) — \(Place.attribution)")
        svg.leaf("rect", [("width", "\(width)"), ("height", "\(height)"), ("fill", Self.land)])

        let visible = scene.features.filter(isVisible)
        func areas(_ kind: MapFeature.Kind, _ attributes: [(String, String)]) {
            let paths = visible.filter { $0.kind == kind }.compactMap { feature -> String? in
                guard case .polygons(let polygons) = feature.geometry else { return nil }
                return polygons.joined().map { ring in path(ring, closed: true) }.joined()
            }
            guard !paths.isEmpty else { return }
            svg.open("g", [("id", "\(kind.rawValue)")] + attributes)
            for d in paths { svg.leaf("path", [("d", d)]) }
            svg.close("g")
        }
        func lines(_ kind: MapFeature.Kind, id: String, _ attributes: [(String, String)], width: (MapFeature) -> Double)
        {
            let drawn = visible.filter { $0.kind == kind }.compactMap { feature -> (String, Double)? in
                guard case .line(let points) = feature.geometry else { return nil }
                return (path(points, closed: false), width(feature))
            }
            guard !drawn.isEmpty else { return }
            svg.open("g", [("id", id), ("fill", "none")] + attributes)
            for (d, strokeWidth) in drawn { svg.leaf("path", [("d", d), ("stroke-width", number(strokeWidth))]) }
            svg.close("g")
        }

        areas(.green, [("fill", "#cdebb0"), ("stroke", "#b5d99c"), ("stroke-width", "0.6"), ("fill-rule", "evenodd")])
        areas(.water, [("fill", "#aad3df"), ("fill-rule", "evenodd")])
        lines(.water, id: "waterways", [("stroke", "#aad3df"), ("stroke-linecap", "round")]) { _ in 3 }
        areas(.square, [("fill", "#e5dfd6"), ("stroke", "#cfc5b8"), ("stroke-width", "0.8"), ("fill-rule", "evenodd")])
        areas(
            .building, [("fill", "#d9d0c9"), ("stroke", "#bfb1a5"), ("stroke-width", "0.6"), ("fill-rule", "evenodd")])
        lines(.rail, id: "rail", [("stroke", "#7a7a7a")]) { $0.featureClass == "tram" ? 1.2 : 2 }
        lines(.path, id: "paths", [("stroke", "#b08f74"), ("stroke-dasharray", "3 2")]) { _ in 1.1 }
        let streetWidth = { (feature: MapFeature) in min(14, max(2, Self.streetWidth(feature.featureClass) * scale)) }
        lines(
            .street, id: "street-casings",
            [("stroke", "#b7aca0"), ("stroke-linecap", "round"), ("stroke-linejoin", "round")]
        ) {
            streetWidth($0) + 1.6
        }
        for colour in Set(visible.filter { $0.kind == .street }.map { Self.streetColour($0.featureClass) }).sorted() {
            let coloured = visible.filter { $0.kind == .street && Self.streetColour($0.featureClass) == colour }
            let drawn = coloured.compactMap { feature -> (String, Double)? in
                guard case .line(let points) = feature.geometry else { return nil }
                return (path(points, closed: false), streetWidth(feature))
            }
            svg.open(
                "g",
                [
                    ("class", "streets"), ("fill", "none"), ("stroke", colour), ("stroke-linecap", "round"),
                    ("stroke-linejoin", "round"),
                ])
            for (d, strokeWidth) in drawn { svg.leaf("path", [("d", d), ("stroke-width", number(strokeWidth))]) }
            svg.close("g")
        }

        var occupied = reservedAreas()
        drawOwnPlaces(into: &svg, avoiding: &occupied)
        streetLabels(visible, into: &svg, avoiding: &occupied)
        drawFix(into: &svg)
        drawPins(into: &svg)
        drawMarker(into: &svg)
        drawLegend(into: &svg)
        drawScaleBar(into: &svg)
        drawAttribution(into: &svg)
        svg.close("svg")
        return svg.text
    }

    private func isVisible(_ feature: MapFeature) -> Bool {
        let b = feature.bounds
        let low = point(Coordinate(latitude: b.minLatitude, longitude: b.minLongitude))
        let high = point(Coordinate(latitude: b.maxLatitude, longitude: b.maxLongitude))
        return high.x >= -20 && low.x <= Double(width) + 20 && low.y >= -20 && high.y <= Double(height) + 20
    }

    /// Path data: `M x y L x y …` (and `Z` for a ring), to a tenth of a pixel.
    private func path(_ points: [Coordinate], closed: Bool) -> String {
        var d = ""
        var previous: (x: Double, y: Double)?
        for (index, c) in points.enumerated() {
            let p = point(c)
            // Vertices within a third of a pixel of the last one drawn add nothing at this scale.
            if let last = previous, abs(p.x - last.x) < 0.3, abs(p.y - last.y) < 0.3, index != points.count - 1 {
                continue
            }
            d += (d.isEmpty ? "M" : "L") + number(p.x) + " " + number(p.y)
            previous = p
        }
        return closed ? d + "Z" : d
    }

    // MARK: Labels

    /// Boxes labels keep clear of: the legend, the marker and its callout, the pins, the fix, the
    /// scale bar and the attribution.
    private func reservedAreas() -> [Box] {
        var boxes = [legendBox(), scaleBarBox(), attributionBox(), calloutBox()].compactMap { $0 }
        func around(_ c: Coordinate, _ halfWidth: Double, above: Double, below: Double) {
            let p = point(c)
            boxes.append(Box(minX: p.x - halfWidth, minY: p.y - above, maxX: p.x + halfWidth, maxY: p.y + below))
        }
        for place in scene.places { around(place.coordinate, 10, above: 10, below: 10) }
        if let fix = scene.fix { around(fix.coordinate, 8, above: 8, below: 8) }
        if let marker = scene.marker { around(marker.coordinate, 11, above: 30, below: 2) }
        return boxes
    }

    /// Each street name once, along a straight stretch in view (the longest first, at its middle, then
    /// nearer its ends), most important streets first, where it overlaps no other label, pin or panel.
    private func streetLabels(_ visible: [MapFeature], into svg: inout SVGWriter, avoiding occupied: inout [Box]) {
        struct Stretch {
            let a: (x: Double, y: Double)
            let b: (x: Double, y: Double)
            let length: Double
        }
        var lines: [String: [[(x: Double, y: Double)]]] = [:]
        var ranks: [String: Double] = [:]
        for feature in visible where feature.kind == .street || feature.kind == .path {
            guard let name = feature.name, case .line(let points) = feature.geometry else { continue }
            ranks[name] = max(
                ranks[name] ?? 0, Self.streetWidth(feature.featureClass) + (feature.kind == .street ? 10 : 0))
            lines[name, default: []].append(points.map(point))
        }
        // A street is mapped as many ways, split at every junction: joined end to end again, its
        // straight runs are long enough for its name.
        var stretches: [String: [Stretch]] = [:]
        for (name, parts) in lines {
            for line in Self.joined(parts) {
                for (a, b) in Self.straightRuns(line, tolerance: 2) {
                    guard let (a, b) = clipped(a, b, margin: 4) else { continue }
                    let length = ((b.x - a.x) * (b.x - a.x) + (b.y - a.y) * (b.y - a.y)).squareRoot()
                    stretches[name, default: []].append(Stretch(a: a, b: b, length: length))
                }
            }
        }
        let fontSize = 12.0
        let order = ranks.keys.sorted {
            (ranks[$0]!, stretches[$0]?.map(\.length).max() ?? 0, $0) > (
                ranks[$1]!, stretches[$1]?.map(\.length).max() ?? 0, $1
            )
        }
        var placed: [(String, Double, Double, Double)] = []
        names: for name in order {
            let textWidth = Self.textWidth(name, fontSize: fontSize)
            for stretch in (stretches[name] ?? []).sorted(by: { $0.length > $1.length }).prefix(8) {
                guard stretch.length >= textWidth + 8 else { break }
                var angle = atan2(stretch.b.y - stretch.a.y, stretch.b.x - stretch.a.x) * 180 / .pi
                if angle > 90 { angle -= 180 }
                if angle < -90 { angle += 180 }
                let slack = (stretch.length - textWidth - 8) / 2 / stretch.length
                for t in [0.5, 0.5 - slack / 2, 0.5 + slack / 2, 0.5 - slack, 0.5 + slack] {
                    let middle = (
                        stretch.a.x + t * (stretch.b.x - stretch.a.x), stretch.a.y + t * (stretch.b.y - stretch.a.y)
                    )
                    let box = Box.rotated(center: middle, width: textWidth + 4, height: fontSize + 4, degrees: angle)
                    guard !occupied.contains(where: { $0.overlaps(box) }) else { continue }
                    occupied.append(box)
                    placed.append((name, middle.0, middle.1, angle))
                    continue names
                }
            }
        }
        guard !placed.isEmpty else { return }
        svg.open(
            "g",
            [
                ("id", "street-names"), ("font-size", number(fontSize)), ("fill", "#333333"), ("stroke", "#ffffff"),
                ("stroke-width", "3"), ("stroke-linejoin", "round"), ("paint-order", "stroke"),
                ("text-anchor", "middle"),
            ])
        for (name, x, y, angle) in placed {
            svg.element(
                "text",
                [
                    ("x", number(x)), ("y", number(y + fontSize * 0.35)),
                    ("transform", "rotate(\(number(angle)) \(number(x)) \(number(y)))"),
                ], text: name)
        }
        svg.close("g")
    }

    /// Lines joined where one ends at another's end (within half a pixel), in either direction.
    static func joined(_ parts: [[(x: Double, y: Double)]]) -> [[(x: Double, y: Double)]] {
        func meets(_ p: (x: Double, y: Double), _ q: (x: Double, y: Double)) -> Bool {
            abs(p.x - q.x) < 0.5 && abs(p.y - q.y) < 0.5
        }
        var remaining = parts.filter { $0.count >= 2 }
        var joined: [[(x: Double, y: Double)]] = []
        while var line = remaining.popLast() {
            var grew = true
            while grew {
                grew = false
                for (index, part) in remaining.enumerated() {
                    if meets(line[line.count - 1], part[0]) {
                        line += part.dropFirst()
                    } else if meets(line[line.count - 1], part[part.count - 1]) {
                        line += part.reversed().dropFirst()
                    } else if meets(line[0], part[part.count - 1]) {
                        line = part + line.dropFirst()
                    } else if meets(line[0], part[0]) {
                        line = part.reversed() + line.dropFirst()
                    } else {
                        continue
                    }
                    remaining.remove(at: index)
                    grew = true
                    break
                }
            }
            joined.append(line)
        }
        return joined
    }

    /// The line cut into chords that no vertex between their ends leaves by more than `tolerance`
    /// pixels: where a straight label can sit.
    static func straightRuns(_ line: [(x: Double, y: Double)], tolerance: Double) -> [(
        (x: Double, y: Double), (x: Double, y: Double)
    )] {
        var runs: [((x: Double, y: Double), (x: Double, y: Double))] = []
        var start = 0
        while start < line.count - 1 {
            var end = start + 1
            while end + 1 < line.count {
                let a = line[start]
                let b = line[end + 1]
                let dx = b.x - a.x
                let dy = b.y - a.y
                let length = max((dx * dx + dy * dy).squareRoot(), 1e-9)
                let straight = line[(start + 1)...end].allSatisfy { p in
                    abs((p.x - a.x) * dy - (p.y - a.y) * dx) / length <= tolerance
                }
                guard straight else { break }
                end += 1
            }
            runs.append((line[start], line[end]))
            start = end
        }
        return runs
    }

    /// The part of segment a–b inside the picture less `margin` (Liang–Barsky); nil when none is.
    private func clipped(_ a: (x: Double, y: Double), _ b: (x: Double, y: Double), margin: Double)
        -> ((x: Double, y: Double), (x: Double, y: Double))?
    {
        var low = 0.0
        var high = 1.0
        let dx = b.x - a.x
        let dy = b.y - a.y
        for (p, q) in [
            (-dx, a.x - margin), (dx, Double(width) - margin - a.x), (-dy, a.y - margin),
            (dy, Double(height) - margin - a.y),
        ] {
            if p == 0 {
                if q < 0 { return nil }
            } else {
                let t = q / p
                if p < 0 { low = max(low, t) } else { high = min(high, t) }
            }
        }
        guard low < high else { return nil }
        return ((a.x + low * dx, a.y + low * dy), (a.x + high * dx, a.y + high * dy))
    }

    private func inView(_ p: (x: Double, y: Double), margin: Double = 0) -> Bool {
        p.x >= -margin && p.x <= Double(width) + margin && p.y >= -margin && p.y <= Double(height) + margin
    }

    /// Text width for layout: DejaVu Sans averages a little under 0.6 em a character.
    static func textWidth(_ text: String, fontSize: Double, bold: Bool = false) -> Double {
        Double(text.count) * fontSize * (bold ? 0.65 : 0.58)
    }

    // MARK: Own places

    /// Each own place in view as its outline over the map layer, filled lightly (a hole stays open:
    /// even-odd), and its name at its interior point where no other label is.
    private func drawOwnPlaces(into svg: inout SVGWriter, avoiding occupied: inout [Box]) {
        let shown = scene.ownPlaces.filter { place in
            let (centre, radius) = place.geometry.boundingCircle
            let p = point(centre)
            let r = radius * scale
            return p.x + r >= 0 && p.x - r <= Double(width) && p.y + r >= 0 && p.y - r <= Double(height)
        }
        guard !shown.isEmpty else { return }
        svg.open(
            "g",
            [
                ("id", "own-places"), ("fill", Self.ownPurple), ("fill-opacity", "0.12"), ("stroke", Self.ownPurple),
                ("stroke-width", "2"), ("stroke-dasharray", "6 3"), ("fill-rule", "evenodd"),
            ])
        for place in shown {
            let element: String
            var attributes = [("class", "own-place")]
            switch place.geometry {
            case let .circle(centre, radius):
                let p = point(centre)
                element = "circle"
                attributes += [("cx", number(p.x)), ("cy", number(p.y)), ("r", number(radius * scale))]
            case .polygons(let polygons):
                element = "path"
                attributes.append(("d", polygons.joined().map { path($0, closed: true) }.joined()))
            }
            svg.open(element, attributes)
            svg.element("title", text: "\(place.name) (\(place.id))")
            svg.close(element)
        }
        svg.close("g")
        svg.open(
            "g",
            [
                ("id", "own-place-names"), ("font-size", "12"), ("font-style", "italic"), ("fill", Self.ownPurple),
                ("text-anchor", "middle"), ("stroke", "#ffffff"), ("stroke-width", "3"), ("paint-order", "stroke"),
            ])
        for place in shown {
            let p = point(place.geometry.interiorPoint)
            let label = Self.shortened(place.name)
            let halfWidth = Self.textWidth(label, fontSize: 12) / 2
            let box = Box(minX: p.x - halfWidth, minY: p.y - 12, maxX: p.x + halfWidth, maxY: p.y + 3)
            guard inView(p), !occupied.contains(where: { $0.overlaps(box) }) else { continue }
            occupied.append(box)
            svg.element("text", [("x", number(p.x)), ("y", number(p.y))], text: label)
        }
        svg.close("g")
    }

    // MARK: Fix, pins, marker

    private func drawFix(into svg: inout SVGWriter) {
        guard let fix = scene.fix else { return }
        let p = point(fix.coordinate)
        svg.open("g", [("id", "fix")])
        if let accuracy = fix.accuracy, accuracy > 0 {
            svg.leaf(
                "circle",
                [
                    ("id", "accuracy"), ("cx", number(p.x)), ("cy", number(p.y)), ("r", number(accuracy * scale)),
                    ("fill", Self.fixBlue), ("fill-opacity", "0.15"), ("stroke", Self.fixBlue),
                    ("stroke-opacity", "0.6"),
                    ("stroke-width", "1.2"),
                ])
        }
        svg.leaf(
            "circle",
            [
                ("cx", number(p.x)), ("cy", number(p.y)), ("r", "6"), ("fill", Self.fixBlue), ("stroke", "#ffffff"),
                ("stroke-width", "2"),
            ])
        svg.close("g")
    }

    private func drawPins(into svg: inout SVGWriter) {
        guard !scene.places.isEmpty else { return }
        svg.open("g", [("id", "places"), ("font-size", "11"), ("font-weight", "bold"), ("text-anchor", "middle")])
        // The most likely last, so that it is drawn on top.
        for (index, place) in scene.places.enumerated().reversed() {
            let p = point(place.coordinate)
            guard inView(p) else { continue }
            svg.open("g", [("class", "pin")])
            svg.element("title", text: "\(index + 1). \(place.name) \(Self.percent(place.likelihood))")
            svg.leaf(
                "circle",
                [
                    ("cx", number(p.x)), ("cy", number(p.y)), ("r", "9"), ("fill", index == 0 ? "#0b57d0" : "#5f6368"),
                    ("stroke", "#ffffff"), ("stroke-width", "1.5"),
                ])
            svg.element(
                "text", [("x", number(p.x)), ("y", number(p.y + 4)), ("fill", "#ffffff")], text: "\(index + 1)")
            svg.close("g")
        }
        svg.close("g")
    }

    static func percent(_ likelihood: Double) -> String {
        let value = likelihood * 100
        return value > 0 && value < 1 ? "<1 %" : "\(Int(value.rounded())) %"
    }

    private func drawMarker(into svg: inout SVGWriter) {
        guard let marker = scene.marker else { return }
        let tip = point(marker.coordinate)
        svg.open("g", [("id", "marker")])
        if inView(tip) {
            // A teardrop 28 px tall with its point on the place.
            let (x, y) = (tip.x, tip.y)
            let d =
                "M\(number(x)) \(number(y))C\(number(x - 3)) \(number(y - 9)) \(number(x - 10)) \(number(y - 14)) "
                + "\(number(x - 10)) \(number(y - 19))A10 10 0 1 1 \(number(x + 10)) \(number(y - 19))"
                + "C\(number(x + 10)) \(number(y - 14)) \(number(x + 3)) \(number(y - 9)) \(number(x)) \(number(y))Z"
            svg.leaf("path", [("d", d), ("fill", Self.markerRed), ("stroke", "#8c1d18"), ("stroke-width", "1")])
            svg.leaf("circle", [("cx", number(x)), ("cy", number(y - 19)), ("r", "3.5"), ("fill", "#ffffff")])
        }
        if let box = calloutBox() {
            svg.leaf(
                "rect",
                [
                    ("x", number(box.minX)), ("y", number(box.minY)), ("width", number(box.maxX - box.minX)),
                    ("height", number(box.maxY - box.minY)), ("rx", "4"), ("fill", "#ffffff"), ("fill-opacity", "0.95"),
                    ("stroke", "#9aa0a6"), ("stroke-width", "1"),
                ])
            let title = inView(tip) ? marker.title : "\(marker.title) (off the map)"
            svg.element(
                "text",
                [
                    ("x", number(box.minX + 8)), ("y", number(box.minY + 18)), ("font-size", "14"),
                    ("font-weight", "bold"),
                ],
                text: title)
            var line = box.minY + 35
            if let address = marker.address {
                svg.element(
                    "text",
                    [("x", number(box.minX + 8)), ("y", number(line)), ("font-size", "12"), ("fill", "#3c4043")],
                    text: address)
                line += 18
            }
            if let hours = marker.hours {
                let color = hours.hasPrefix("open") ? "#1a7f37" : "#b3261e"
                svg.element(
                    "text",
                    [("x", number(box.minX + 8)), ("y", number(line)), ("font-size", "12"), ("fill", color)],
                    text: hours)
            }
        }
        svg.close("g")
    }

    /// The marker's callout: above the marker, kept inside the picture; in the top right corner when
    /// the marker is off the map.
    private func calloutBox() -> Box? {
        guard let marker = scene.marker else { return nil }
        let title = marker.title + (inView(point(marker.coordinate)) ? "" : " (off the map)")
        let boxWidth =
            max(
                Self.textWidth(title, fontSize: 14, bold: true), Self.textWidth(marker.address ?? "", fontSize: 12),
                Self.textWidth(marker.hours ?? "", fontSize: 12)) + 16
        let boxHeight = 26.0 + (marker.address == nil ? 0 : 18) + (marker.hours == nil ? 0 : 18)
        let tip = point(marker.coordinate)
        var x = tip.x - boxWidth / 2
        var y = tip.y - 34 - boxHeight
        if !inView(tip) {
            x = Double(width) - boxWidth - 8
            y = 8
        }
        x = min(max(x, 4), Double(width) - boxWidth - 4)
        y = min(max(y, 4), Double(height) - boxHeight - 30)
        return Box(minX: x, minY: y, maxX: x + boxWidth, maxY: y + boxHeight)
    }

    // MARK: Legend, scale bar, attribution

    static let legendRow = 20.0
    static let legendNameLength = 30

    private func legendBox() -> Box? {
        guard !scene.places.isEmpty else { return nil }
        let longest = scene.places.map { Self.textWidth(Self.shortened($0.name), fontSize: 13) }.max() ?? 0
        let boxWidth = min(max(longest + 90, 180), Double(width) / 2)
        return Box(minX: 8, minY: 8, maxX: 8 + boxWidth, maxY: 8 + 10 + Self.legendRow * Double(scene.places.count))
    }

    static func shortened(_ name: String) -> String {
        name.count <= legendNameLength ? name : String(name.prefix(legendNameLength - 1)) + "…"
    }

    private func drawLegend(into svg: inout SVGWriter) {
        guard let box = legendBox() else { return }
        svg.open("g", [("id", "ranking"), ("font-size", "13")])
        svg.leaf(
            "rect",
            [
                ("x", number(box.minX)), ("y", number(box.minY)), ("width", number(box.maxX - box.minX)),
                ("height", number(box.maxY - box.minY)), ("rx", "4"), ("fill", "#ffffff"), ("fill-opacity", "0.92"),
                ("stroke", "#9aa0a6"),
            ])
        for (index, place) in scene.places.enumerated() {
            let y = box.minY + 5 + Self.legendRow * Double(index) + Self.legendRow / 2
            svg.leaf(
                "circle",
                [
                    ("cx", number(box.minX + 14)), ("cy", number(y)), ("r", "8"),
                    ("fill", index == 0 ? "#0b57d0" : "#5f6368"),
                ])
            svg.element(
                "text",
                [
                    ("x", number(box.minX + 14)), ("y", number(y + 4)), ("fill", "#ffffff"), ("font-size", "11"),
                    ("font-weight", "bold"), ("text-anchor", "middle"),
                ], text: "\(index + 1)")
            svg.element(
                "text", [("x", number(box.minX + 28)), ("y", number(y + 4.5)), ("fill", "#202124")],
                text: Self.shortened(place.name))
            svg.element(
                "text",
                [("x", number(box.maxX - 8)), ("y", number(y + 4.5)), ("fill", "#3c4043"), ("text-anchor", "end")],
                text: Self.percent(place.likelihood))
        }
        svg.close("g")
    }

    /// The longest round length (1, 2 or 5 × 10ⁿ metres) up to a fifth of the width.
    public var scaleBarMetres: Double {
        let limit = Double(width) / 5 / scale
        var best = 1.0
        var magnitude = 1.0
        while magnitude <= limit {
            for step in [1.0, 2.0, 5.0] where step * magnitude <= limit { best = step * magnitude }
            magnitude *= 10
        }
        return best
    }

    private func scaleBarBox() -> Box? {
        Box(minX: 8, minY: Double(height) - 34, maxX: 24 + scaleBarMetres * scale + 40, maxY: Double(height) - 4)
    }

    private func drawScaleBar(into svg: inout SVGWriter) {
        let metres = scaleBarMetres
        let length = metres * scale
        let x = 16.0
        let y = Double(height) - 14
        let label = metres >= 1000 ? "\((metres / 1000).formatted(decimals: 0)) km" : "\(Int(metres)) m"
        svg.open("g", [("id", "scale"), ("font-size", "12")])
        svg.leaf(
            "path",
            [
                ("d", "M\(number(x)) \(number(y - 6))V\(number(y))H\(number(x + length))V\(number(y - 6))"),
                ("fill", "none"), ("stroke", "#ffffff"), ("stroke-width", "4"),
            ])
        svg.leaf(
            "path",
            [
                ("d", "M\(number(x)) \(number(y - 6))V\(number(y))H\(number(x + length))V\(number(y - 6))"),
                ("fill", "none"), ("stroke", "#202124"), ("stroke-width", "1.5"),
            ])
        svg.element(
            "text",
            [
                ("x", number(x + length + 6)), ("y", number(y)), ("fill", "#202124"), ("stroke", "#ffffff"),
                ("stroke-width", "3"), ("paint-order", "stroke"),
            ], text: label)
        svg.close("g")
    }

    private func attributionBox() -> Box? {
        let textWidth = Self.textWidth(Place.attribution, fontSize: 11)
        return Box(
            minX: Double(width) - textWidth - 12, minY: Double(height) - 18, maxX: Double(width),
            maxY: Double(height))
    }

    private func drawAttribution(into svg: inout SVGWriter) {
        guard let box = attributionBox() else { return }
        svg.open("g", [("id", "attribution"), ("font-size", "11")])
        svg.leaf(
            "rect",
            [
                ("x", number(box.minX)), ("y", number(box.minY)), ("width", number(box.maxX - box.minX)),
                ("height", number(box.maxY - box.minY)), ("fill", "#ffffff"), ("fill-opacity", "0.8"),
            ])
        svg.element(
            "text",
            [
                ("x", number(Double(width) - 6)), ("y", number(Double(height) - 5)), ("text-anchor", "end"),
                ("fill", "#202124"),
            ],
            text: Place.attribution)
        svg.close("g")
    }

    /// A pixel value to a tenth.
    private func number(_ value: Double) -> String {
        // Far off the picture is as good as 10⁶ px off it (and keeps the Int conversion in range).
        let tenths = Int((min(max(value, -1e6), 1e6) * 10).rounded())
        let sign = tenths < 0 ? "-" : ""
        let magnitude = abs(tenths)
        return magnitude % 10 == 0 ? "\(sign)\(magnitude / 10)" : "\(sign)\(magnitude / 10).\(magnitude % 10)"
    }
}

/// An axis-aligned box in pixels, for keeping labels apart.
struct Box {
    var minX: Double
    var minY: Double
    var maxX: Double
    var maxY: Double

    func overlaps(_ other: Box) -> Bool {
        minX < other.maxX && other.minX < maxX && minY < other.maxY && other.minY < maxY
    }

    /// The box around a `width`×`height` rectangle centred at `center`, turned by `degrees`.
    static func rotated(center: (Double, Double), width: Double, height: Double, degrees: Double) -> Box {
        let radians = degrees * .pi / 180
        let halfWidth = (abs(cos(radians)) * width + abs(sin(radians)) * height) / 2
        let halfHeight = (abs(sin(radians)) * width + abs(cos(radians)) * height) / 2
        return Box(
            minX: center.0 - halfWidth, minY: center.1 - halfHeight, maxX: center.0 + halfWidth,
            maxY: center.1 + halfHeight)
    }
}

/// Writes XML text: elements with escaped attributes and text.
struct SVGWriter {
    private(set) var text = #"<?xml version="1.0" encoding="UTF-8"?>"# + "\n"

    mutating func open(_ name: String, _ attributes: [(String, String)] = []) {
        text += "<\(name)\(Self.attributes(attributes))>\n"
    }

    mutating func close(_ name: String) { text += "</\(name)>\n" }

    mutating func leaf(_ name: String, _ attributes: [(String, String)]) {
        text += "<\(name)\(Self.attributes(attributes))/>\n"
    }

    mutating func element(_ name: String, _ attributes: [(String, String)] = [], text content: String) {
        text += "<\(name)\(Self.attributes(attributes))>\(Self.escaped(content))</\(name)>\n"
    }

    private static func attributes(_ attributes: [(String, String)]) -> String {
        attributes.map { " \($0.0)=\"\(escaped($0.1))\"" }.joined()
    }

    /// The five XML specials, and the control characters XML 1.0 cannot hold dropped.
    static func escaped(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            default: if scalar.value >= 0x20 { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }
}
