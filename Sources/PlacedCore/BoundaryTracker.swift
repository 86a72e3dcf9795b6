/// How an own place's boundary resists GPS jitter.
public struct BoundarySettings: Sendable, Equatable {
    /// Metres a fix must be inside (or outside) the boundary to count, beyond its own 95 % radius.
    public var margin: Double
    /// Seconds the fixes must keep counting for the other side before the state changes.
    public var dwell: Double

    public init(margin: Double = 10, dwell: Double = 10) {
        self.margin = margin
        self.dwell = dwell
    }

    /// The first meaningless setting, or nil.
    public var problem: String? {
        if !(margin.isFinite && margin >= 0) { return "boundary margin must be a finite number of metres >= 0" }
        if !(dwell.isFinite && dwell >= 0) { return "boundary dwell must be a finite number of seconds >= 0" }
        return nil
    }
}

/// Crossing an own place's boundary.
public struct BoundaryEvent: Sendable, Equatable {
    public enum Transition: String, Sendable {
        case entered = "enter"
        case left = "leave"
    }

    public var transition: Transition
    public var place: Place
    /// The fix that confirmed the crossing.
    public var fix: Fix

    public init(transition: Transition, place: Place, fix: Fix) {
        self.transition = transition
        self.place = place
        self.fix = fix
    }
}

/// Which own places the device is inside, with hysteresis: a fix counts for "inside" only when its
/// whole 95 % circle, and `margin` more, lies inside the boundary (and for "outside" likewise outside);
/// a fix whose circle straddles the boundary counts for neither and toggles nothing. The state turns
/// once fixes have counted for the other side for `dwell` seconds with none counting back. A place
/// starts outside unless the tracker is made with it inside (the daemon's last crossings, kept on
/// disk): a device that starts inside one it was not in enters it after the dwell.
public struct BoundaryTracker: Sendable {
    public private(set) var settings: BoundarySettings
    /// Ids of the places the device is inside.
    public private(set) var inside: Set<String> = []
    /// Places whose fixes count for the other side, since when (monotonic microseconds).
    private var pending: [String: UInt64] = [:]
    private var nearby: [OwnSite] = []

    public init(settings: BoundarySettings = BoundarySettings(), inside: Set<String> = []) throws(RankingError) {
        if let problem = settings.problem { throw .invalidModel(problem) }
        self.settings = settings
        self.inside = inside
    }

    /// New settings, keeping which places the device is inside (a reload must not enter them again).
    public mutating func change(to settings: BoundarySettings) throws(RankingError) {
        if let problem = settings.problem { throw .invalidModel(problem) }
        self.settings = settings
    }

    /// The 95 % radius assumed for a fix that states none.
    public static let defaultRadius95 = 25.0

    /// Judges `fix` against the places near it and those the device is inside; returns the crossings
    /// it confirms, entries after leaves, each group by id.
    public mutating func consider(_ fix: Fix, places: inout OwnPlaceIndex) -> [BoundaryEvent] {
        let radius95 = fix.radius95 ?? Self.defaultRadius95
        let needed = max(radius95, 0) + settings.margin
        places.candidates(within: needed, of: fix.coordinate, into: &nearby)
        let projection = LocalProjection(origin: fix.coordinate)
        var seen: Set<String> = []
        var events: [BoundaryEvent] = []

        func judge(_ site: OwnSite) {
            let id = site.id
            guard seen.insert(id).inserted else { return }
            let signed = site.signedDistance(from: projection)
            let wasInside = inside.contains(id)
            let countsInside = signed <= -needed
            let countsOutside = signed >= needed
            guard countsInside || countsOutside else { return }  // straddling: neither
            if countsInside == wasInside {
                pending[id] = nil
                return
            }
            let since = pending[id] ?? fix.receivedAt
            pending[id] = since
            guard fix.receivedAt >= since, Double(fix.receivedAt - since) >= settings.dwell * 1e6 else { return }
            pending[id] = nil
            if countsInside {
                inside.insert(id)
                events.append(BoundaryEvent(transition: .entered, place: site.place, fix: fix))
            } else {
                inside.remove(id)
                events.append(BoundaryEvent(transition: .left, place: site.place, fix: fix))
            }
        }
        for site in nearby { judge(site) }
        // Places the device is inside or about to enter, though beyond the query (a far edge).
        for id in inside.union(pending.keys).sorted() {
            if let site = places.site(id: id) { judge(site) } else { forget(id) }
        }
        return events.sorted {
            $0.transition != $1.transition ? $0.transition == .left : $0.place.id < $1.place.id
        }
    }

    /// Forgets a place that was deleted: no event, as it no longer exists to be left.
    public mutating func forget(_ id: String) {
        inside.remove(id)
        pending[id] = nil
    }
}
