#if canImport(Glibc)
    import Glibc  // libm: exp2
#elseif canImport(Darwin)
    import Darwin
#endif

/// A past selection as learning sees it: which place, where the device was, and when.
public struct Pick: Sendable, Equatable {
    public var placeID: String
    /// The fix the selection was made at.
    public var coordinate: Coordinate
    /// σ per axis of that fix in metres (`Fix.accuracy`); nil when it stated none.
    public var accuracy: Double?
    /// Wall-clock seconds since the Unix epoch.
    public var time: Double

    public init(placeID: String, coordinate: Coordinate, accuracy: Double?, time: Double) {
        self.placeID = placeID
        self.coordinate = coordinate
        self.accuracy = accuracy
        self.time = time
    }

    /// The pick a marker stands for.
    public init(_ marker: Marker) {
        self.init(
            placeID: marker.place.place.id, coordinate: marker.location.coordinate,
            accuracy: marker.location.accuracy, time: marker.time)
    }
}

/// How picks become evidence (docs/DESIGN.md, "Learning from picks").
public struct LearningSettings: Sendable, Equatable {
    /// Seconds after which a pick counts half (`LearningHalfLife=`).
    public var halfLife: Double
    /// α, the pseudo-count of the spatial model against the picks (`LearningStrength=`): the weakest
    /// prior of the ladder (see `Ranker`), the one that holds where the picks keep contradicting the model.
    /// A pick made at this very spot moments ago counts 1.
    public var strength: Double
    /// Picks within max(minimum, perRadius95 × the fix's 95 % radius), at most `maximumNeighbourhood`
    /// metres, are the evidence for a fix.
    public var minimumNeighbourhood: Double
    public var neighbourhoodPerRadius95: Double
    /// Picks farther than this never change a ranking, whatever the fix's accuracy.
    public var maximumNeighbourhood: Double
    /// At most this many of the nearest picks count: beyond a few dozen the prior no longer matters,
    /// and a device that picked thousands of times at one spot ranks as fast as any other.
    public var maximumNeighbours: Int
    /// Width of a pick's kernel relative to the spread of two fixes taken at one place (see `Ranker`).
    public var kernelScale: Double
    /// Stronger priors weighed against `strength` by how well each explains the picks near a fix (see
    /// `Ranker`): strength × ladderRatio^k for k = 1 ... ladderSteps, sharing `ladderBelief` of the
    /// prior belief, `strength` itself holding the rest.
    public var ladderSteps: Int
    public var ladderRatio: Double
    public var ladderBelief: Double
    /// How much a pick made at the least similar time of week counts against one made at this time of
    /// week, 0 ... 1 (`LearningTimeFloor=`); 1 turns time-of-week weighting off. A pick made at
    /// hour-of-day distance Δ (on the circular day) from now counts
    ///
    ///     peak · (floor + (1 − floor) · exp(−Δ² / 2 width²) · (same kind of day ? 1 : otherDayKindWeight))
    ///
    /// times its age weight, the kinds of day being weekdays and the weekend (a night belongs to the day
    /// it began: days start at `dayStartHour`), in the time zone `PickMemory` was given.
    public var timeFloor: Double
    /// The kernel's width over the hours of the day, hours.
    public var timeOfDayWidth: Double
    /// 0 ... 1: a weekday pick seen from the weekend, or the other way round.
    public var otherDayKindWeight: Double
    /// ≥ 1: how much a pick made at this very time of week counts. Above 1 because a habit is evidence
    /// twice over, of the place and of the time: at its time of week a pick outweighs the spatial
    /// model sooner, and the floor keeps it from doing so at other times.
    public var timePeak: Double
    /// > 0: how much more alike in time of week a place's picks must be than picks at random times before
    /// its picks count by their time of week. A place's picks count `(1 − λ) × ` their age weight
    /// `+ λ × ` their time-of-week weight, λ = clamp((C − 1) / timeConcentration, 0, 1), C the mean
    /// kernel between two of its picks over the kernel's weekly mean (about 1 for picks at random times,
    /// the peak's multiple of it for picks at one time of week). 0: every place's picks count by time of
    /// week (λ = 1).
    public var timeConcentration: Double

    /// Local hour at which one day's night ends and the next day begins, for weekday or weekend.
    public static let dayStartHour = 4.0

    public static let defaultHalfLife = 90 * 86_400.0
    /// With the default ladder, kernel and neighbourhood, tuned on `placed-bench learn --seed 1` (seed 2
    /// held out): the largest α at which one pick puts a place ranked 2 to 5 first at over 95 % of spots.
    public static let defaultStrength = 0.7
    /// What `LearningHalfLife=` and `LearningStrength=` accept.
    public static let halfLifeRange = 86_400.0...(3_650 * 86_400.0)
    public static let strengthRange = 0.1...100.0
    /// Tuned on `placed-bench routine --seed 1` (seed 2 held out): the largest top 1 at regular places
    /// from day 7 that keeps one-off visits within 0.4 points of the spatial model alone.
    public static let defaultTimeFloor = 0.01
    public static let defaultTimeOfDayWidth = 1.0
    public static let defaultOtherDayKindWeight = 0.3
    public static let defaultTimePeak = 2.5
    /// Tuned on `placed-bench routine` and `placed-bench learn --only routine`, seed 1 (seed 2 held out): 8
    /// keeps the routine's figures and brings places picked at random hours back to learning by place.
    public static let defaultTimeConcentration = 8.0

    public init(
        halfLife: Double = LearningSettings.defaultHalfLife, strength: Double = LearningSettings.defaultStrength,
        minimumNeighbourhood: Double = 40, neighbourhoodPerRadius95: Double = 2, maximumNeighbourhood: Double = 150,
        maximumNeighbours: Int = 32, kernelScale: Double = 0.85, ladderSteps: Int = 4, ladderRatio: Double = 4,
        ladderBelief: Double = 0.2, timeFloor: Double = LearningSettings.defaultTimeFloor,
        timeOfDayWidth: Double = LearningSettings.defaultTimeOfDayWidth,
        otherDayKindWeight: Double = LearningSettings.defaultOtherDayKindWeight,
        timePeak: Double = LearningSettings.defaultTimePeak,
        timeConcentration: Double = LearningSettings.defaultTimeConcentration
    ) {
        self.halfLife = halfLife
        self.strength = strength
        self.minimumNeighbourhood = minimumNeighbourhood
        self.neighbourhoodPerRadius95 = neighbourhoodPerRadius95
        self.maximumNeighbourhood = maximumNeighbourhood
        self.maximumNeighbours = maximumNeighbours
        self.kernelScale = kernelScale
        self.ladderSteps = ladderSteps
        self.ladderRatio = ladderRatio
        self.ladderBelief = ladderBelief
        self.timeFloor = timeFloor
        self.timeOfDayWidth = timeOfDayWidth
        self.otherDayKindWeight = otherDayKindWeight
        self.timePeak = timePeak
        self.timeConcentration = timeConcentration
    }

    /// Whether a pick's time of week changes how much it counts.
    public var weighsTimeOfWeek: Bool { timeFloor < 1 }

    /// How much a pick counts when it was made `quartersApart` quarter hours of the day from now (on the
    /// circular day: 0 ... 48), on the same kind of day (weekday or weekend) or not: `timePeak` at the
    /// same time, never below `timePeak × timeFloor`; 1 when time of week does not count.
    public func timeOfWeekWeight(quartersApart: Int, sameKindOfDay: Bool) -> Double {
        guard weighsTimeOfWeek else { return 1 }
        let hours = Double(quartersApart) / 4
        let similar = exp(-hours * hours / (2 * timeOfDayWidth * timeOfDayWidth))
        return timePeak * (timeFloor + (1 - timeFloor) * similar * (sameKindOfDay ? 1 : otherDayKindWeight))
    }

    /// The mean of `timeOfWeekWeight` over the quarter hours of a week, seen from a weekday.
    public var weeklyMeanTimeWeight: Double {
        guard weighsTimeOfWeek else { return 1 }
        let day = (0..<96).map { Double(min($0, 96 - $0)) }
        return day.reduce(0) { sum, apart in
            sum + 5 * timeOfWeekWeight(quartersApart: Int(apart), sameKindOfDay: true)
                + 2 * timeOfWeekWeight(quartersApart: Int(apart), sameKindOfDay: false)
        } / (7 * 96)
    }

    /// Quarter hours of the day between two quarter hours of the week, on the circular day: 0 ... 48.
    public static func quartersApart(_ a: Int, _ b: Int) -> Int {
        let apart = abs(a - b) % 96
        return min(apart, 96 - apart)
    }

    /// Whether quarter hour `quarter` of the week (0 ..< 672 from Monday 00:00) falls on a Saturday or
    /// Sunday, the day beginning at `dayStartHour`.
    public static func isWeekend(quarter: Int) -> Bool {
        let shifted = (quarter - Int(dayStartHour * 4) + 672) % 672
        return shifted >= 5 * 96
    }

    /// The prior strengths α_k and how much each is believed before any pick is seen.
    public var strengths: [(strength: Double, belief: Double)] {
        guard ladderSteps > 0, ladderBelief > 0 else { return [(strength, 1)] }
        var result = [(strength, 1 - ladderBelief)]
        var alpha = strength
        for _ in 0..<ladderSteps {
            alpha *= ladderRatio
            result.append((alpha, ladderBelief / Double(ladderSteps)))
        }
        return result
    }

    public static let standard = LearningSettings()

    /// Radius in metres around a fix of σ `sigma` within which picks are evidence.
    public func neighbourhood(sigma: Double) -> Double {
        min(max(minimumNeighbourhood, neighbourhoodPerRadius95 * Fix.radius95(fromSigma: sigma)), maximumNeighbourhood)
    }

    /// The first setting that makes learning meaningless, or nil.
    public var problem: String? {
        if !Self.halfLifeRange.contains(halfLife) {
            return "learning half-life must be 1 to 3650 days"
        }
        if !Self.strengthRange.contains(strength) { return "learning strength must be 0.1 to 100" }
        if !(minimumNeighbourhood >= 0) || !(neighbourhoodPerRadius95 >= 0) || !neighbourhoodPerRadius95.isFinite
            || !(maximumNeighbourhood >= minimumNeighbourhood) || !maximumNeighbourhood.isFinite
        {
            return "learning neighbourhood must be finite, >= 0 and minimum <= maximum"
        }
        if maximumNeighbours < 1 { return "learning must count at least one neighbour" }
        if !(kernelScale > 0) || !kernelScale.isFinite { return "learning kernel scale must be > 0" }
        if ladderSteps < 0 || !(ladderRatio > 1) || !ladderRatio.isFinite || !(0...1).contains(ladderBelief)
            || (ladderSteps > 0 && ladderBelief >= 1)
        {
            return "learning strength ladder must have steps >= 0, ratio > 1 and belief in [0, 1)"
        }
        if !(0...1).contains(timeFloor) { return "learning time floor must be 0 to 1" }
        if !(timeOfDayWidth > 0) || !timeOfDayWidth.isFinite { return "learning time-of-day width must be > 0" }
        if !(0...1).contains(otherDayKindWeight) { return "learning other-day-kind weight must be 0 to 1" }
        if !(timePeak >= 1) || !timePeak.isFinite { return "learning time peak must be >= 1" }
        if !(timeConcentration >= 0) || !timeConcentration.isFinite {
            return "learning time concentration must be >= 0"
        }
        return nil
    }
}

public enum LearningError: Error, Equatable, CustomStringConvertible {
    case invalidSettings(String)

    public var description: String {
        switch self {
        case .invalidSettings(let problem): "invalid learning settings: \(problem)"
        }
    }
}

/// Every past pick, indexed by where it was made, for the ranker to take the picks near a fix as
/// evidence. Built once from the selection log at start, then appended on each selection. Pure: the
/// selection log stays the only store.
///
/// Picks of one place at one exact position and accuracy (a kiosk's static position) share one entry,
/// their age weights summed: weights are kept relative to one reference time, so they add, and a query
/// multiplies them all by one factor for its `now`. Entries are numbered in the order picks arrive; the
/// oldest live in a kd-tree (`PlaceIndex`), the newest few in a short list scanned linearly until the
/// tree is rebuilt. Queries order by (distance, entry number) either way, so a memory built from a log
/// in one pass and one appended to pick by pick give the same evidence, bit for bit.
public struct PickMemory: Sendable {
    public let settings: LearningSettings
    /// The device's time zone: a pick's time of week is local (`LearningSettings.timeOfWeekWeight`).
    public let timeZone: TimeZoneRules
    /// Picks remembered (entries may hold several).
    public private(set) var count = 0

    /// A group of picks: one place, one position, one accuracy.
    struct Entry: Sendable {
        var coordinate: Coordinate
        /// σ of the fix in metres; NaN when it stated none.
        var sigma: Double
        var place: Int32
        /// Σ 2^((t − referenceTime) / halfLife) over the entry's picks.
        var weight: Double
        /// The same sum by the quarter hour of the week the picks were made in, when time of week counts
        /// (`settings.weighsTimeOfWeek`); empty otherwise. A kiosk's one entry has at most 672.
        var quarters: [Quarter] = []
    }

    struct Quarter: Sendable {
        /// Quarter hour of the local week, from Monday 00:00: 0 ..< 672.
        var number: UInt16
        var weight: Double
    }
    /// `settings.timeOfWeekWeight` by quarters apart (0 ... 48), on the same kind of day and then not:
    /// looked up, not computed, for each quarter of each pick near a fix.
    private let timeWeights: [Double]
    private let weeklyMeanTimeWeight: Double

    private struct EntryKey: Hashable {
        var place: Int32
        var latitude: UInt64
        var longitude: UInt64
        var sigma: UInt64
    }

    private var placeIDs: [String] = []
    /// By place number, when `settings.timeConcentration > 0`: how alike in time of week its picks are.
    private var placeTimes: [PlaceTimes] = []

    struct PlaceTimes: Sendable {
        var quarters: [Quarter] = []
        /// Σ w, Σ w², and Σ over pairs of distinct picks of w·w'·kernel / weekly mean (each pair twice).
        var weight = 0.0
        var squares = 0.0
        var pairs = 0.0

        /// λ: 1 for a place picked at one time of week, or too few times to tell (the prior: `priorPairs`
        /// pairs as alike as `alikeAtOnce`, two picks at the same quarter hour); towards 0 for one picked
        /// at random times.
        func share(_ concentration: Double, alikeAtOnce: Double) -> Double {
            let distinct = max(weight * weight - squares, 0)
            let alike = (pairs + PlaceTimes.priorPairs * alikeAtOnce) / (distinct + PlaceTimes.priorPairs)
            return min(max((alike - 1) / concentration, 0), 1)
        }

        static let priorPairs = 2.0
    }
    private var placeNumbers: [String: Int32] = [:]
    private(set) var entries: [Entry] = []
    private var entryNumbers: [EntryKey: Int32] = [:]
    /// Over `entries[0..<indexed]`, numbered like them.
    private var tree = PlaceIndex(coordinates: [])
    private var indexed = 0
    /// Weights are 2^((t − referenceTime) / halfLife); moved on in steps of `rebaseStep` half-lives,
    /// an exact power-of-two rescaling, so no weight overflows however long the daemon runs.
    private var referenceTime: Double?
    /// The newest pick's time: a query's `now` is never taken as earlier (a clock set back).
    private var newestTime = -Double.infinity

    /// Pending entries beyond this many rebuild the tree: picks come at a person's pace, a rebuild of
    /// 10,000 entries takes about a millisecond.
    static let pendingLimit = 32
    static let rebaseStep = 256.0

    /// - Parameter timeZone: the device's, where a pick's time of week is read; UTC by default.
    public init(
        settings: LearningSettings = .standard, timeZone: TimeZoneRules = TimeZoneRules(fixedOffset: 0),
        picks: some Sequence<Pick> = [Pick]()
    ) throws(LearningError) {
        if let problem = settings.problem { throw .invalidSettings(problem) }
        self.settings = settings
        self.timeZone = timeZone
        timeWeights =
            settings.weighsTimeOfWeek
            ? [true, false].flatMap { same in
                (0...48).map { settings.timeOfWeekWeight(quartersApart: $0, sameKindOfDay: same) }
            } : []
        weeklyMeanTimeWeight = settings.weeklyMeanTimeWeight
        for pick in picks { insert(pick) }
        rebuild()
    }

    /// Remembers a new pick (a selection just recorded). Picks with an invalid position or time are
    /// ignored: the log only holds valid ones.
    public mutating func append(_ pick: Pick) {
        insert(pick)
        if entries.count - indexed > Self.pendingLimit { rebuild() }
    }

    public var isEmpty: Bool { count == 0 }

    private mutating func insert(_ pick: Pick) {
        guard pick.coordinate.isValid, pick.time.isFinite else { return }
        let place: Int32
        if let known = placeNumbers[pick.placeID] {
            place = known
        } else {
            place = Int32(placeIDs.count)
            placeIDs.append(pick.placeID)
            if settings.timeConcentration > 0 { placeTimes.append(PlaceTimes()) }
            placeNumbers[pick.placeID] = place
        }
        if referenceTime == nil { referenceTime = pick.time }
        let ahead = (pick.time - referenceTime!) / settings.halfLife
        if ahead > Self.rebaseStep {
            // Whole steps only: a power of two scales every weight exactly (or to 0, for picks so old).
            let steps = (ahead / Self.rebaseStep).rounded(.down)
            referenceTime! += steps * Self.rebaseStep * settings.halfLife
            let scale = exp2(-steps * Self.rebaseStep)
            for i in entries.indices {
                entries[i].weight *= scale
                for q in entries[i].quarters.indices { entries[i].quarters[q].weight *= scale }
            }
            for p in placeTimes.indices {
                placeTimes[p].weight *= scale
                placeTimes[p].squares *= scale * scale
                placeTimes[p].pairs *= scale * scale
                for q in placeTimes[p].quarters.indices { placeTimes[p].quarters[q].weight *= scale }
            }
        }
        let weight = exp2((pick.time - referenceTime!) / settings.halfLife)
        newestTime = max(newestTime, pick.time)
        count += 1

        let sigma = pick.accuracy.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil } ?? .nan
        let key = EntryKey(
            place: place, latitude: pick.coordinate.latitude.bitPattern,
            longitude: pick.coordinate.longitude.bitPattern, sigma: sigma.bitPattern)
        let quarter = settings.weighsTimeOfWeek ? Quarter(number: quarterOfWeek(pick.time), weight: weight) : nil
        if let quarter, settings.timeConcentration > 0 {
            var times = placeTimes[Int(place)]
            let number = Int(quarter.number)
            let weekend = LearningSettings.isWeekend(quarter: number)
            var alike = 0.0
            for earlier in times.quarters {
                let other = Int(earlier.number)
                let same = LearningSettings.isWeekend(quarter: other) == weekend
                alike += earlier.weight * timeWeights[(same ? 0 : 49) + LearningSettings.quartersApart(other, number)]
            }
            times.pairs += 2 * weight * alike / weeklyMeanTimeWeight
            times.weight += weight
            times.squares += weight * weight
            if let q = times.quarters.firstIndex(where: { $0.number == quarter.number }) {
                times.quarters[q].weight += weight
            } else {
                times.quarters.append(quarter)
            }
            placeTimes[Int(place)] = times
        }
        if let number = entryNumbers[key] {
            entries[Int(number)].weight += weight
            if let quarter {
                if let q = entries[Int(number)].quarters.firstIndex(where: { $0.number == quarter.number }) {
                    entries[Int(number)].quarters[q].weight += weight
                } else {
                    entries[Int(number)].quarters.append(quarter)
                }
            }
            return
        }
        entryNumbers[key] = Int32(entries.count)
        entries.append(
            Entry(
                coordinate: pick.coordinate, sigma: sigma, place: place, weight: weight,
                quarters: quarter.map { [$0] } ?? []))
    }

    /// The local quarter hour of the week at `time` (Unix seconds), from Monday 00:00: 0 ..< 672; 0 for
    /// a time no clock shows.
    func quarterOfWeek(_ time: Double) -> UInt16 {
        guard abs(time) < 1e13 else { return 0 }
        let whole = Int(time.rounded(.down))
        // 1970-01-01 was a Thursday: three days after a Monday.
        let local = whole + timeZone.period(at: whole).utcOffset + 3 * 86_400
        let week = 7 * 86_400
        return UInt16(((local % week + week) % week) / 900)
    }

    private mutating func rebuild() {
        tree = PlaceIndex(coordinates: entries.map(\.coordinate))
        indexed = entries.count
    }

    /// A remembered group of picks near a fix.
    public struct NearbyPick: Sendable, Equatable {
        /// Number of the place picked; `placeID(_:)` names it.
        public var place: Int32
        /// Where the picks were made.
        public var coordinate: Coordinate
        /// Metres from the fix to there.
        public var distance: Double
        /// σ of the fix they were made at, metres; nil when it stated none.
        public var sigma: Double?
        /// How much the picks count at the query's time: 1 for one pick made then, halving every
        /// half-life, and times `LearningSettings.timeOfWeekWeight` of when each was made.
        public var weight: Double
    }

    public func placeID(_ number: Int32) -> String { placeIDs[Int(number)] }

    /// The picks within `radius` metres of `center`, at most `settings.maximumNeighbours` of them,
    /// nearest first (ties by the order they were made), weighted by their age at `now` (wall-clock
    /// seconds since the Unix epoch; a `now` before the newest pick counts as its time).
    public func nearby(_ center: Coordinate, within radius: Double, now: Double) -> [NearbyPick] {
        var found: [NearbyPick] = []
        var scratch: [PlaceIndex.Neighbor] = []
        nearby(center, within: radius, now: now, into: &found, scratch: &scratch)
        return found
    }

    /// The same into reusable arrays (emptied first).
    public func nearby(
        _ center: Coordinate, within radius: Double, now: Double, into found: inout [NearbyPick],
        scratch: inout [PlaceIndex.Neighbor]
    ) {
        found.removeAll(keepingCapacity: true)
        guard let referenceTime, center.isValid, radius >= 0 else { return }
        let limit = settings.maximumNeighbours
        tree.nearest(limit, to: center, maxDistance: radius, into: &scratch)
        if indexed < entries.count {
            // The same metric as the tree's, so an entry's distance does not depend on where it lives.
            for number in indexed..<entries.count {
                let d = PlaceIndex.distance(from: center, to: entries[number].coordinate)
                if d <= radius { scratch.append(PlaceIndex.Neighbor(index: number, distance: d)) }
            }
            scratch.sort { $0.distance < $1.distance || ($0.distance == $1.distance && $0.index < $1.index) }
        }
        if scratch.count > limit { scratch.removeLast(scratch.count - limit) }
        let age = max(now.isFinite ? now : newestTime, newestTime) - referenceTime
        let factor = exp2(-age / settings.halfLife)
        let nowQuarter = settings.weighsTimeOfWeek ? Int(quarterOfWeek(now.isFinite ? now : newestTime)) : 0
        let nowIsWeekend = LearningSettings.isWeekend(quarter: nowQuarter)
        for neighbor in scratch {
            let entry = entries[neighbor.index]
            var weight = entry.weight
            if settings.weighsTimeOfWeek {
                weight = 0
                for quarter in entry.quarters {
                    let number = Int(quarter.number)
                    let same = LearningSettings.isWeekend(quarter: number) == nowIsWeekend
                    let apart = LearningSettings.quartersApart(number, nowQuarter)
                    weight += quarter.weight * timeWeights[same ? apart : 49 + apart]
                }
                if settings.timeConcentration > 0 {
                    let share = placeTimes[Int(entry.place)].share(
                        settings.timeConcentration, alikeAtOnce: timeWeights[0] / weeklyMeanTimeWeight)
                    weight = (1 - share) * entry.weight + share * weight
                }
            }
            found.append(
                NearbyPick(
                    place: entry.place, coordinate: entry.coordinate, distance: neighbor.distance,
                    sigma: entry.sigma.isNaN ? nil : entry.sigma,
                    weight: weight * factor))
        }
    }
}
