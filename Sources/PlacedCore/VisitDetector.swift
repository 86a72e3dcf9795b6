/// When a stay counts as a visit (docs/DESIGN.md, "Visits").
public struct VisitSettings: Sendable, Equatable {
    /// Metres: the device stays within this of the stay's running centre (`DwellRadius=`).
    public var radius: Double
    /// Seconds it must stay before the visit starts (`DwellTime=`).
    public var dwellTime: Double
    /// Seconds outside the radius that end a visit.
    public var departureTime: Double
    /// Metres per second: a fix reporting more is moving, not staying (a brisk walk is 2 m/s).
    public var maximumSpeed: Double
    /// Seconds without fixes after which a stay that has not yet become a visit starts over
    /// (`--gpsd-timeout`): its dwell cannot be vouched for. An open visit survives any gap; the next fix
    /// tells whether the device is still there.
    public var gapLimit: Double
    /// σ in metres assumed for a fix that states no accuracy.
    public var defaultSigma: Double

    public static let radiusRange = 5.0...500.0
    public static let dwellTimeRange = 10.0...3_600.0

    public init(
        radius: Double = 30, dwellTime: Double = 120, departureTime: Double = 30, maximumSpeed: Double = 2,
        gapLimit: Double = 30, defaultSigma: Double = RankingModel.standard.defaultAccuracy
    ) {
        self.radius = radius
        self.dwellTime = dwellTime
        self.departureTime = departureTime
        self.maximumSpeed = maximumSpeed
        self.gapLimit = gapLimit
        self.defaultSigma = defaultSigma
    }

    public static let standard = VisitSettings()

    /// The first setting that makes visits meaningless, or nil.
    public var problem: String? {
        if !Self.radiusRange.contains(radius) { return "dwell radius must be 5 to 500 m" }
        if !Self.dwellTimeRange.contains(dwellTime) { return "dwell time must be 10 to 3600 s" }
        if !(departureTime > 0) || !departureTime.isFinite { return "departure time must be > 0 s" }
        if !(maximumSpeed > 0) || !maximumSpeed.isFinite { return "dwell speed must be > 0 m/s" }
        if !(gapLimit >= 0) || !gapLimit.isFinite { return "gap limit must be >= 0 s" }
        if !(defaultSigma > 0) || !defaultSigma.isFinite { return "default accuracy must be > 0 m" }
        return nil
    }
}

public enum VisitError: Error, Equatable, CustomStringConvertible {
    case invalidSettings(String)

    public var description: String {
        switch self {
        case .invalidSettings(let problem): "invalid visit settings: \(problem)"
        }
    }
}

/// A stay at one spot.
public struct Visit: Sendable, Equatable {
    /// Counts the visits of one detector from its `firstID`.
    public var id: UInt64
    /// Monotonic microseconds of the stay's first fix: the arrival.
    public var startedAt: UInt64
    /// Monotonic microseconds of the last fix within the radius; nil while the visit is open.
    public var endedAt: UInt64?
    /// Monotonic microseconds of the latest fix within the radius.
    public var lastSeenAt: UInt64
    /// The fixes' position averaged, each weighted by 1/σ².
    public var centre: Coordinate
    /// σ per axis of `centre`, metres: shrinks as 1/√(Σ 1/σ²) with the fixes, but never below half the
    /// best single fix's, as GPS errors a few seconds apart are correlated.
    public var accuracy: Double
    /// Fixes averaged.
    public var fixes: Int
    /// The best fix mode among them.
    public var mode: FixMode

    /// Seconds from arrival to the end (or to the latest fix while open).
    public var duration: Double { Double((endedAt ?? lastSeenAt) - startedAt) / 1e6 }

    /// The visit's position as a fix, for ranking: its averaged centre and accuracy, at rest.
    public var position: Fix {
        Fix(receivedAt: lastSeenAt, coordinate: centre, mode: mode, accuracy: accuracy, speed: 0)
    }
}

public enum VisitEvent: Sendable, Equatable {
    case started(Visit)
    case ended(Visit)
}

/// Finds visits in a stream of fixes. Feed it every gated fix, moves and suppressed ones alike, in the
/// order they arrive: it judges by their monotonic receipt time (`Fix.receivedAt`), never by fix time.
///
/// A *stay* is the fixes within `radius` of their running (1/σ²-weighted) centre; a fix farther away,
/// or one reporting more than walking speed, is outside it. A stay becomes a visit once it has lasted
/// `dwellTime`: the visit started at its first fix. A visit ends once the device has been outside for
/// `departureTime`: it ended at its last fix inside. Robustness:
/// - jitter: a fix is outside only beyond max(radius, its own 95 % radius), and a stray fix outside is
///   forgotten as soon as one lands inside again;
/// - short stops (traffic lights) never last `dwellTime`;
/// - gaps: a stay keeps dwelling across a silence shorter than `gapLimit`; an open visit across any.
/// The fixes outside a stay form a stay of their own (the *next* one), so a device that walks from one
/// shop to the one next door has its arrival there dated by its first fix there, not by the departure.
public struct VisitDetector: Sendable {
    public let settings: VisitSettings
    /// The open visit, if any.
    public private(set) var visit: Visit?
    private var stay: Stay?
    private var next: Stay?
    /// Receipt time of the first fix outside `stay` since the last one inside.
    private var outsideSince: UInt64?
    private var lastFixAt: UInt64?
    private var nextID: UInt64

    public init(settings: VisitSettings = .standard, firstID: UInt64 = 1) throws(VisitError) {
        if let problem = settings.problem { throw .invalidSettings(problem) }
        self.settings = settings
        nextID = firstID
    }

    /// Judges one fix; returns what happened: an end, a start, or an end and then a start.
    public mutating func consider(_ fix: Fix) -> [VisitEvent] {
        guard fix.coordinate.isValid else { return [] }
        let now = fix.receivedAt
        var events: [VisitEvent] = []
        if let last = lastFixAt, now >= last, Double(now - last) / 1e6 > settings.gapLimit {
            // Nothing vouches for the silence: a stay that is not yet a visit starts over.
            if visit == nil {
                stay = nil
                outsideSince = nil
            }
            next = nil
        }
        lastFixAt = max(lastFixAt ?? now, now)

        let moving = (fix.speed ?? 0) > settings.maximumSpeed
        guard var current = stay else {
            if !moving { stay = Stay(fix, settings) }
            return events
        }
        if !moving && current.admits(fix) {
            current.add(fix)
            stay = current
            outsideSince = nil
            next = nil
            if var open = visit {
                current.update(&open)
                visit = open
            } else if current.span >= settings.dwellTime {
                events.append(.started(start(current)))
            }
            return events
        }

        // Outside the stay: the beginning of the next one, unless moving.
        if moving {
            next = nil
        } else if var candidate = next, candidate.admits(fix) {
            candidate.add(fix)
            next = candidate
        } else {
            next = Stay(fix, settings)
        }
        let since = outsideSince ?? now
        outsideSince = since
        guard now >= since, Double(now - since) / 1e6 >= settings.departureTime else { return events }

        if var ended = visit {
            ended.endedAt = current.lastInsideAt
            events.append(.ended(ended))
            visit = nil
        }
        stay = next
        next = nil
        outsideSince = nil
        if let successor = stay, successor.span >= settings.dwellTime {
            events.append(.started(start(successor)))
        }
        return events
    }

    private mutating func start(_ stay: Stay) -> Visit {
        var started = Visit(
            id: nextID, startedAt: stay.firstAt, endedAt: nil, lastSeenAt: stay.lastInsideAt, centre: stay.centre,
            accuracy: stay.sigma, fixes: stay.count, mode: stay.mode)
        stay.update(&started)
        nextID += 1
        visit = started
        return started
    }

    /// The fixes of one stay, averaged on a plane around its first.
    private struct Stay: Sendable {
        let settings: VisitSettings
        let plane: LocalProjection
        var sumWeight = 0.0
        var sumEast = 0.0
        var sumNorth = 0.0
        var bestSigma = Double.infinity
        var count = 0
        var firstAt: UInt64
        var lastInsideAt: UInt64
        var mode = FixMode.twoD
        var centre: Coordinate

        init(_ fix: Fix, _ settings: VisitSettings) {
            self.settings = settings
            plane = LocalProjection(origin: fix.coordinate)
            firstAt = fix.receivedAt
            lastInsideAt = fix.receivedAt
            centre = fix.coordinate
            add(fix)
        }

        func sigma(of fix: Fix) -> Double { max(fix.accuracy ?? settings.defaultSigma, 0.5) }

        /// Within the radius of the centre, or within the fix's own 95 % radius: a fix that vague cannot
        /// show the device left.
        func admits(_ fix: Fix) -> Bool {
            let reach = max(settings.radius, Fix.radius95(fromSigma: sigma(of: fix)))
            return LocalProjection(origin: centre).distance(to: fix.coordinate) <= reach
        }

        mutating func add(_ fix: Fix) {
            let s = sigma(of: fix)
            let weight = 1 / (s * s)
            let p = plane.project(fix.coordinate)
            sumWeight += weight
            sumEast += weight * p.x
            sumNorth += weight * p.y
            bestSigma = min(bestSigma, s)
            count += 1
            lastInsideAt = max(lastInsideAt, fix.receivedAt)
            if fix.mode > mode { mode = fix.mode }
            centre = plane.coordinate(east: sumEast / sumWeight, north: sumNorth / sumWeight)
        }

        /// σ of the centre.
        var sigma: Double { max(1 / sumWeight.squareRoot(), bestSigma / 2) }

        /// Seconds from the first fix to the latest inside.
        var span: Double { Double(lastInsideAt - firstAt) / 1e6 }

        func update(_ visit: inout Visit) {
            visit.centre = centre
            visit.accuracy = sigma
            visit.fixes = count
            visit.lastSeenAt = lastInsideAt
            visit.mode = mode
        }
    }
}
