import PlacedJSON

/// What the page shows, merged from placed's `Watch` replies: the first reply carries the whole
/// state; later ones a new ranking (with `places`), a marker, a change of staleness, or a visit.
/// Pure: the gateway feeds it replies and sends its `snapshot` to every page.
public struct KioskState: Equatable, Sendable {
    /// Whether placed-web hears placed.
    public enum Upstream: Equatable, Sendable {
        case connecting
        case connected
        /// The reason, in a few words ("connect(/run/placed/io.placed.Places): No such file or directory").
        case unreachable(String)
    }

    public var upstream: Upstream = .connecting
    public var generation = 0
    public var stale = false
    public var location: JSON?
    public var places: [JSON] = []
    public var marker: JSON?
    /// The visit under way, when placed reports one (`visit` in Watch replies: its start, its end).
    public var visit: JSON?

    public init() {}

    /// Takes one Watch reply. `first`: the reply that opens a Watch, which replaces everything.
    public mutating func apply(watchReply parameters: [String: JSON], first: Bool) {
        if first {
            let upstream = upstream
            self = KioskState()
            self.upstream = upstream
        }
        upstream = .connected
        if let generation = parameters["generation"]?.int { self.generation = generation }
        if let stale = parameters["stale"]?.bool { self.stale = stale }
        if let location = parameters["location"], location.object != nil { self.location = location }
        if let places = parameters["places"]?.array { self.places = places }
        if let marker = parameters["marker"] { self.marker = marker.isNull ? nil : marker }
        // A visit is announced when it starts and when it ends (with `ended`); rankings between say nothing of it.
        if let visit = parameters["visit"] {
            self.visit = visit.isNull || !(visit["ended"]?.isNull ?? true) ? nil : visit
        }
    }

    /// placed went away: the last ranking stays on screen, marked as unreachable.
    public mutating func lose(_ reason: String) { upstream = .unreachable(reason) }

    /// The page's view: `{"upstream":"connected"|"connecting"|"unreachable", "reason", "generation",
    /// "stale", "location", "places", "marker", "visit"}`; absent values are left out.
    public var snapshot: JSON {
        var object: [String: JSON] = [
            "generation": .number(Double(generation)), "stale": .bool(stale), "places": .array(places),
        ]
        switch upstream {
        case .connecting: object["upstream"] = "connecting"
        case .connected: object["upstream"] = "connected"
        case .unreachable(let reason):
            object["upstream"] = "unreachable"
            object["reason"] = .string(reason)
        }
        if let location { object["location"] = location }
        if let marker { object["marker"] = marker }
        if let visit { object["visit"] = visit }
        return .object(object)
    }
}
