import PlacedCore
import PlacedJSON

#if canImport(Glibc)
    import Glibc
#endif

/// A ranked place as the interfaces send it. Missing fields read as empty or zero, so a reply
/// from a newer or older daemon still prints.
public struct PlaceRecord: Equatable, Sendable {
    public var id: String
    public var name: String
    public var kind: String
    public var address: String?
    public var latitude: Double
    public var longitude: Double
    /// Metres from the fix.
    public var distance: Double
    /// 0 to 1.
    public var likelihood: Double

    public init(_ json: JSON) {
        id = json["id"]?.string ?? ""
        name = json["name"]?.string ?? ""
        kind = json["kind"]?.string ?? ""
        address = json["address"]?.string
        latitude = json["latitude"]?.double ?? .nan
        longitude = json["longitude"]?.double ?? .nan
        distance = json["distance"]?.double ?? .nan
        likelihood = json["likelihood"]?.double ?? .nan
    }
}

public struct LocationRecord: Equatable, Sendable {
    public var latitude: Double
    public var longitude: Double
    public var accuracy: Double?
    public var mode: String
    /// Seconds since the fix arrived; absent for a restored marker's location.
    public var age: Double?

    /// Nil for null or an object without coordinates.
    public init?(_ json: JSON?) {
        guard let json, let latitude = json["latitude"]?.double, let longitude = json["longitude"]?.double else {
            return nil
        }
        self.latitude = latitude
        self.longitude = longitude
        accuracy = json["accuracy"]?.double
        mode = json["mode"]?.string ?? ""
        age = json["age"]?.double
    }
}

public struct MarkerRecord: Equatable, Sendable {
    public var place: PlaceRecord
    public var location: LocationRecord?
    public var time: String
    public var generation: Int?
    public var selection: Int?

    public init?(_ json: JSON?) {
        guard let json, let place = json["place"], place.object != nil else { return nil }
        self.place = PlaceRecord(place)
        location = LocationRecord(json["location"])
        time = json["time"]?.string ?? ""
        generation = json["generation"]?.int
        selection = json["selection"]?.int
    }
}

/// The readable output of each command. Pure: text in, text out, so tests pin it down.
public enum Format {
    /// `  #  LIKELY  DISTANCE  NAME  KIND  ID` and one row per place, best first.
    public static func placesTable(_ places: [PlaceRecord]) -> String {
        var table = TextTable(["#", "LIKELY", "DISTANCE", "NAME", "KIND", "ID"], rightAligned: [0, 1, 2])
        for (row, place) in places.enumerated() {
            table.add([
                String(row + 1), percent(place.likelihood), metres(place.distance), place.name, place.kind, place.id,
            ])
        }
        return table.rendered
    }

    /// The `places` listing: a line about the ranking, then the table.
    public static func current(_ reply: [String: JSON], fields: [String]? = nil) -> String {
        let records = reply["places"]?.array ?? []
        let places = records.map(PlaceRecord.init)
        let generation = reply["generation"]?.int ?? 0
        let location = LocationRecord(reply["location"])
        if generation == 0 && places.isEmpty {
            return location == nil ? "no ranking yet: placed has no position\n" : "no ranking yet\n"
        }
        var heading = "ranking \(generation)"
        if let location { heading += " at " + describe(location) }
        if reply["stale"]?.bool == true { heading += " (stale: the position source is lost)" }
        if let fields, !records.isEmpty { return heading + "\n" + placesWithFields(records, fields: fields) }
        return heading + "\n" + (places.isEmpty ? "no places near\n" : placesTable(places))
    }

    /// `rank`: the table alone (a what-if ranking has no generation).
    public static func ranked(_ reply: [String: JSON], fields: [String]? = nil) -> String {
        let records = reply["places"]?.array ?? []
        if let fields, !records.isEmpty { return placesWithFields(records, fields: fields) }
        let places = records.map(PlaceRecord.init)
        return places.isEmpty ? "no places near\n" : placesTable(places)
    }

    /// Places as `--fields` asked: per place its row number, then one `key  value` line per key it has,
    /// in the order asked (`*`: in the order the interface lists them).
    public static func placesWithFields(_ places: [JSON], fields: [String]) -> String {
        var text = ""
        for (row, place) in places.enumerated() {
            text += "\(row + 1)\n" + keyLines(place, fields: fields, indent: "  ")
        }
        return text
    }

    /// `details`: the place's keys, one aligned `key  value` line each: the open state first, in words.
    public static func details(_ reply: [String: JSON], fields: [String]? = nil) -> String {
        guard let place = reply["place"] else { return "" }
        var text = ""
        if let hours = hoursLine(place) { text += hours + "\n" }
        return text + keyLines(place, fields: fields ?? ["*"], indent: "")
    }

    /// The keys of a place, in the interface's order, the way `details` lists them.
    static let placeKeys = [
        "id", "name", "kind", "address", "address_source", "latitude", "longitude", "distance", "likelihood",
        "opening_hours", "open_now", "next_change", "intervals", "phone", "website", "email", "wheelchair", "cuisine",
        "brand", "brand_wikidata", "operator", "level", "description", "internet_access", "outdoor_seating",
        "takeaway", "diet", "payment", "attribution",
    ]

    /// "open now, closes at 19:00" / "closed, opens Mon 07:00"; nil when placed does not know.
    static func hoursLine(_ place: JSON) -> String? {
        guard let open = place["open_now"]?.bool else { return nil }
        var line = open ? "open now" : "closed now"
        if let next = place["next_change"]?.string, next.count >= 16 {
            let clock = next[next.index(next.startIndex, offsetBy: 11)..<next.index(next.startIndex, offsetBy: 16)]
            line += open ? ", closes at " : ", opens at "
            line += "\(clock) on \(next.prefix(10))"
        }
        return line
    }

    private static func keyLines(_ place: JSON, fields: [String], indent: String) -> String {
        let keys = fields.contains("*") ? placeKeys : fields
        var table = TextTable(["KEY", "VALUE"], rightAligned: [])
        for key in keys {
            guard let value = place[key], value != .null else { continue }
            table.add([indent + key, text(of: value, key: key)])
        }
        // No header: each line is one key.
        return table.rendered.split(separator: "\n", omittingEmptySubsequences: false).dropFirst().joined(
            separator: "\n")
    }

    /// A value as one line: lists joined by ", ", objects as `key=value`, intervals as `09:00-17:00`.
    static func text(of value: JSON, key: String) -> String {
        switch value {
        case .string(let s): return s
        case .bool(let b): return b ? "yes" : "no"
        case .number(let n):
            if key == "likelihood" { return percent(n) }
            if key == "distance" { return metres(n) }
            return n.rounded() == n && abs(n) < 1e15 ? String(Int(n)) : String(n)
        case .array(let items):
            if key == "intervals" {
                return items.isEmpty
                    ? "closed all day"
                    : items.map { item in
                        let span = "\(item["start"]?.string ?? "")-\(item["end"]?.string ?? "")"
                        return item["state"]?.string == "unknown" ? span + " (maybe)" : span
                    }.joined(separator: ", ")
            }
            return items.map { text(of: $0, key: "") }.joined(separator: ", ")
        case .object(let entries):
            return entries.sorted { $0.key < $1.key }.map { "\($0.key)=\(text(of: $0.value, key: ""))" }.joined(
                separator: ", ")
        default: return ""
        }
    }

    /// `status`: one aligned `key  value` line per fact.
    public static func status(_ reply: [String: JSON]) -> String {
        var lines: [(String, String)] = [("source", reply["source"]?.string ?? "unknown")]
        if let location = LocationRecord(reply["location"]) {
            lines.append(("location", describe(location, withAge: false)))
            if let age = location.age { lines.append(("fix age", duration(age))) }
        } else {
            lines.append(("location", "none yet"))
        }
        let generation = reply["generation"]?.int ?? 0
        lines.append(("generation", String(generation) + (reply["stale"]?.bool == true ? " (stale)" : "")))
        if let count = reply["places"]?.int { lines.append(("places", count.grouped + " loaded")) }
        if let filter = reply["distance_filter"]?.double { lines.append(("distance filter", metres(filter))) }
        lines.append(("marker", MarkerRecord(reply["marker"]).map(describe) ?? "none yet"))
        lines.append(("visit", reply["visit"].map(describeVisit) ?? "none open"))
        if let fleet = reply["fleet"], fleet.object != nil { lines.append(("fleet", describeFleet(fleet))) }
        let width = lines.map(\.0.count).max()! + 2
        return lines.map { $0.0 + String(repeating: " ", count: width - $0.0.count) + $0.1 + "\n" }.joined()
    }

    /// `refresh`: what placed serves now (D-Bus has no place count to tell).
    public static func refreshed(_ status: [String: JSON]) -> String {
        var line = "refreshed: "
        if let count = status["places"]?.int { line += "\(count.grouped) places, " }
        line += "ranking \(status["generation"]?.int ?? 0)"
        if status["stale"]?.bool == true { line += " (stale)" }
        return line + "\n"
    }

    /// `history`: one row per selection, newest first.
    public static func history(_ reply: [String: JSON]) -> String {
        let markers = (reply["markers"]?.array ?? []).compactMap { MarkerRecord($0) }
        guard !markers.isEmpty else { return "no selections yet\n" }
        var table = TextTable(["SELECTION", "TIME", "NAME", "KIND", "ID", "RANKING"], rightAligned: [0, 5])
        for marker in markers {
            table.add([
                marker.selection.map(String.init) ?? "", marker.time, marker.place.name, marker.place.kind,
                marker.place.id, marker.generation.map(String.init) ?? "",
            ])
        }
        return table.rendered
    }

    /// `select`: what was recorded.
    public static func selected(_ reply: [String: JSON]) -> String {
        guard let marker = MarkerRecord(reply["marker"]) else { return "selected\n" }
        return "selected " + describe(marker) + "\n"
    }

    /// One `watch` update as one line (a ranking's top places, or a marker, or the position),
    /// prefixed with the local time `clock`.
    public static func watchUpdate(_ update: [String: JSON], clock: String) -> String {
        var lines: [String] = []
        if let placesJSON = update["places"]?.array {
            let places = placesJSON.map(PlaceRecord.init)
            var line = "\(clock)  ranking \(update["generation"]?.int ?? 0)"
            if let location = LocationRecord(update["location"]) { line += " at " + describe(location, withAge: false) }
            if update["stale"]?.bool == true { line += " (stale)" }
            line += ": "
            line +=
                places.isEmpty
                ? "no places near"
                : places.prefix(3).map { "\($0.name) \(percent($0.likelihood))" }.joined(separator: ", ")
            if places.count > 3 { line += ", +\(places.count - 3) more" }
            lines.append(line)
        }
        if let marker = MarkerRecord(update["marker"]) {
            lines.append("\(clock)  marker \(describe(marker))")
        }
        if let visit = update["visit"] {
            lines.append("\(clock)  visit \(describeVisit(visit))")
        }
        if lines.isEmpty {
            // Neither a ranking nor a marker: the source was lost or is back.
            let state = update["stale"]?.bool == true ? "is stale: the position source is lost" : "is current"
            lines.append("\(clock)  ranking \(update["generation"]?.int ?? 0) \(state)")
        }
        return lines.map { $0 + "\n" }.joined()
    }

    // MARK: Pieces

    /// `60.1699000,24.9384000 ±10 m (2d), 3.2 s old`.
    public static func describe(_ location: LocationRecord, withAge: Bool = true) -> String {
        var text = "\(location.latitude.formatted(decimals: 7)),\(location.longitude.formatted(decimals: 7))"
        if let accuracy = location.accuracy { text += " ±\(metres(accuracy))" }
        if !location.mode.isEmpty { text += " (\(location.mode))" }
        if withAge, let age = location.age { text += ", \(duration(age)) old" }
        return text
    }

    /// A visit record: `12 since 2026-…Z (3 min) at 60.1699000,24.9384000 ±4 m, at Café Ekberg 82.0%`, or
    /// `12 ended after 14 min at Café Ekberg` once it ended.
    public static func describeVisit(_ visit: JSON) -> String {
        let id = visit["id"]?.int.map(String.init) ?? "?"
        let minutes = (visit["duration"]?.double ?? 0) / 60
        let length = minutes < 1 ? "\(Int(visit["duration"]?.double ?? 0)) s" : "\(Int(minutes.rounded())) min"
        let place = PlaceRecord(visit["place"] ?? visit["places"]?.array?.first ?? .null)
        let named = place.name.isEmpty ? "" : " at \(place.name)"
        if visit["ended"] != nil {
            let how =
                visit["automatic"]?.bool == true
                ? " (selected automatically)" : visit["selection"] != nil ? " (selected)" : ""
            return "\(id) ended after \(length)\(named)\(how)"
        }
        var text = "\(id) since \(visit["started"]?.string ?? "?") (\(length))"
        if let latitude = visit["latitude"]?.double, let longitude = visit["longitude"]?.double {
            text += " at \(latitude.formatted(decimals: 7)),\(longitude.formatted(decimals: 7))"
            if let accuracy = visit["accuracy"]?.double { text += " ±\(metres(accuracy))" }
        }
        if !place.name.isEmpty {
            text += ", likely \(place.name)" + (place.likelihood.isFinite ? " \(percent(place.likelihood))" : "")
        }
        return text
    }

    /// The fleet export's status: `connected to mqtts://broker.example:8883, backlog 0`, or
    /// `backoff (mqtt://10.0.0.5:1883), backlog 4,012; last error: ...`, with what was dropped or refused.
    public static func describeFleet(_ fleet: JSON) -> String {
        let state = fleet["state"]?.string ?? "unknown"
        var text = state
        if let broker = fleet["broker"]?.string { text += state == "connected" ? " to \(broker)" : " (\(broker))" }
        if let device = fleet["device"]?.string, !device.isEmpty { text += " as \(device)" }
        text += ", backlog \((fleet["backlog"]?.int ?? 0).grouped)"
        if let dropped = fleet["dropped"]?.int, dropped > 0 { text += ", \(dropped.grouped) dropped" }
        if let rejected = fleet["rejected"]?.int, rejected > 0 { text += ", \(rejected.grouped) refused by the broker" }
        if let error = fleet["lastError"]?.string, state != "connected" { text += "; last error: \(error)" }
        return text
    }

    /// `Café Ekberg (osm:node/1), selection 7 at 2026-…Z in ranking 4`.
    public static func describe(_ marker: MarkerRecord) -> String {
        var text = "\(marker.place.name) (\(marker.place.id))"
        if let selection = marker.selection { text += ", selection \(selection)" }
        if !marker.time.isEmpty { text += " at \(marker.time)" }
        if let generation = marker.generation { text += " in ranking \(generation)" }
        return text
    }

    /// 0.4213 → `42.1%`.
    public static func percent(_ fraction: Double) -> String {
        fraction.isFinite ? (fraction * 100).formatted(decimals: 1) + "%" : "?"
    }

    /// 1234.4 → `1,234 m`.
    public static func metres(_ distance: Double) -> String {
        distance.isFinite ? Int(distance.rounded()).grouped + " m" : "?"
    }

    /// 3.24 → `3.2 s`, 75 → `1 min 15 s`, 7300 → `2 h 1 min`.
    public static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "?" }
        if seconds < 60 { return seconds.formatted(decimals: seconds < 10 ? 1 : 0) + " s" }
        let whole = Int(seconds.rounded())
        if whole < 3600 { return "\(whole / 60) min \(whole % 60) s" }
        return "\(whole / 3600) h \(whole % 3600 / 60) min"
    }

    /// The local wall-clock time, `12:08:46`, for watch lines.
    public static func clock(_ seconds: time_t = time(nil)) -> String {
        var whole = seconds
        var parts = tm()
        localtime_r(&whole, &parts)
        func pad(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(pad(parts.tm_hour)):\(pad(parts.tm_min)):\(pad(parts.tm_sec))"
    }
}

/// Columns aligned by the widest cell, two spaces apart; the last column is not padded.
public struct TextTable: Sendable {
    public let headers: [String]
    public let rightAligned: Set<Int>
    public private(set) var rows: [[String]] = []

    public init(_ headers: [String], rightAligned: Set<Int> = []) {
        self.headers = headers
        self.rightAligned = rightAligned
    }

    public mutating func add(_ row: [String]) { rows.append(row) }

    public var rendered: String {
        let all = [headers] + rows
        let widths = headers.indices.map { column in all.map { TextTable.width(of: $0[column]) }.max() ?? 0 }
        return all.map { row in
            var line = ""
            for (column, cell) in row.enumerated() {
                let gap = String(repeating: " ", count: widths[column] - TextTable.width(of: cell))
                if column > 0 { line += "  " }
                if rightAligned.contains(column) {
                    line += gap + cell
                } else {
                    line += column == row.count - 1 ? cell : cell + gap
                }
            }
            return line + "\n"
        }.joined()
    }

    /// Terminal columns: one per character, two for East Asian wide characters and most emoji.
    static func width(of text: String) -> Int {
        text.reduce(0) { total, character in
            guard let scalar = character.unicodeScalars.first else { return total }
            switch scalar.value {
            case 0x1100...0x115F, 0x2E80...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F,
                0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x3FFFD:
                return total + 2
            default:
                return total + 1
            }
        }
    }
}
