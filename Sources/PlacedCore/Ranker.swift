#if canImport(Glibc)
    import Glibc  // libm: exp, pow
#elseif canImport(Darwin)
    import Darwin
#endif

/// One place of a ranking.
public struct RankedPlace: Sendable, Equatable {
    public var place: Place
    /// Metres from the fix to the place's footprint; 0 inside an area.
    public var distance: Double
    /// Probability, relative to the other places and "none of these", that the device is at this place.
    public var likelihood: Double

    public init(place: Place, distance: Double, likelihood: Double) {
        self.place = place
        self.distance = distance
        self.likelihood = likelihood
    }
}

/// The places near one fix, most likely first.
public struct Ranking: Sendable, Equatable {
    /// Counts the rankings a `RankingHistory` published, from 1; 0 for one never published (a what-if).
    public var generation: UInt64
    /// The fix the ranking was computed for.
    public var fix: Fix
    /// At most the requested number, ordered by likelihood, then distance, then id.
    public var places: [RankedPlace]
    /// Likelihood of "none of these": 1 minus the sum over *every* candidate, listed or not.
    public var noneLikelihood: Double
    /// Search radius R in metres: no place beyond it was considered.
    public var radius: Double
    /// Set while the location source is lost: the ranking is the last one, kept for reading.
    public var isStale: Bool

    public init(
        generation: UInt64 = 0, fix: Fix, places: [RankedPlace], noneLikelihood: Double, radius: Double,
        isStale: Bool = false
    ) {
        self.generation = generation
        self.fix = fix
        self.places = places
        self.noneLikelihood = noneLikelihood
        self.radius = radius
        self.isStale = isStale
    }
}

extension Ranking {
    /// The same ranking with only its first `limit` places.
    public func limited(to limit: Int) -> Ranking {
        var limited = self
        limited.places = Array(places.prefix(limit))
        return limited
    }
}

public enum RankingError: Error, Equatable, CustomStringConvertible {
    case invalidLimit(Int)
    case invalidFix(latitude: Double, longitude: Double)
    case invalidAccuracy(Double)
    case invalidSpeed(Double)
    case invalidModel(String)

    public var description: String {
        switch self {
        case .invalidLimit(let n): "invalid limit \(n): ask for 1 to \(Ranker.maximumLimit) places"
        case .invalidFix(let lat, let lon):
            "invalid fix \(lat),\(lon): latitude and longitude must be finite and in range"
        case .invalidAccuracy(let a): "invalid accuracy \(a): must be a finite number of metres >= 0"
        case .invalidSpeed(let v): "invalid speed \(v): must be a finite number of m/s >= 0"
        case .invalidModel(let problem): "invalid ranking model: \(problem)"
        }
    }
}

/// Ranks candidate places by the likelihood that a device at a fix is at each (DESIGN.md, "Likelihood
/// model"):
///
///     d_i  distance from the fix to the footprint (0 inside an area)
///     r_i  extent: √(area/π) for an area, the kind's point extent for a point
///     s_i² = σ² + (r_i/2)²
///     L_i  = exp(−d_i² / 2s_i²) / (2π s_i²)
///     w_i  = weight(kind_i) · (1 + selections_i)^β
///     L_0  = 1 / (πR²),  w_0 = w₀(speed)
///     likelihood_i = w_i L_i / (w_0 L_0 + Σ_j w_j L_j)
///
/// Pure and deterministic: the same fix, places and counts give the same ranking whatever order the
/// candidates come in.
public struct Ranker: Sendable {
    public static let defaultLimit = 5
    public static let maximumLimit = 20

    public let model: RankingModel

    public init(model: RankingModel = .standard) throws(RankingError) {
        if let problem = model.problem { throw .invalidModel(problem) }
        self.model = model
    }

    /// Search radius R for a fix, metres. A spatial query for candidates must return at least every
    /// place whose footprint (bounding box, or point) comes within R of the fix; more is harmless.
    public func searchRadius(for fix: Fix) -> Double { model.searchRadius(accuracy: fix.accuracy) }

    /// Ranks `candidates` for `fix`. Candidates may be all places or a spatial query's result: places
    /// whose footprint lies beyond R are ignored. Place ids are assumed unique; a place listed twice
    /// counts once. `selectionCounts` maps place ids to how often users selected them.
    ///
    /// - Parameter limit: 1 ... `maximumLimit`; anything else is `RankingError.invalidLimit`, because a
    ///   client asking for 0 or 1000 places has a bug worth seeing.
    /// - Returns: a ranking with generation 0 (publish it with `RankingHistory`). Nothing near is an
    ///   empty list with `noneLikelihood` 1, not an error.
    public func rank<Candidates: Sequence<Place>>(
        fix: Fix, candidates: Candidates, selectionCounts: [String: Int] = [:],
        limit: Int = defaultLimit
    ) throws(RankingError) -> Ranking {
        try Self.validate(fix: fix, limit: limit)

        let sigma = model.sigma(accuracy: fix.accuracy)
        let variance = sigma * sigma
        let radius = model.searchRadius(accuracy: fix.accuracy)
        let projection = LocalProjection(origin: fix.coordinate)
        let beta = model.selectionExponent

        var scored: [Scored] = []
        for place in candidates {
            // Cheap bound first: most candidates of a radius query are outside R, and an outline is long.
            guard place.lowerBoundDistance(from: projection) <= radius else { continue }
            let distance = place.footprintDistance(from: projection)
            guard distance <= radius else { continue }
            let prior = model.prior(ofKind: place.kind)
            let extent = place.area > 0 ? (place.area / .pi).squareRoot() : prior.pointExtent
            let s2 = variance + extent * extent / 4
            var weight = prior.weight
            if !selectionCounts.isEmpty, let count = selectionCounts[place.id], count > 0 {
                weight *= pow(1 + Double(count), beta)
            }
            let density = exp(-distance * distance / (2 * s2)) / (2 * .pi * s2)
            scored.append(Scored(place: place, distance: distance, score: weight * density))
        }

        // A canonical order before summing, so the total (and so every likelihood) does not depend on the
        // order the candidates arrived in; it also brings a place listed twice next to itself.
        scored.sort { $0.score != $1.score ? $0.score > $1.score : $0.place.id < $1.place.id }
        var unique: [Scored] = []
        unique.reserveCapacity(scored.count)
        for s in scored where unique.last?.place.id != s.place.id { unique.append(s) }

        let none = model.noneWeight(speed: fix.speed) / (.pi * radius * radius)
        var total = none
        for s in unique { total += s.score }
        for index in unique.indices { unique[index].likelihood = unique[index].score / total }
        unique.sort {
            if $0.likelihood != $1.likelihood { return $0.likelihood > $1.likelihood }
            if $0.distance != $1.distance { return $0.distance < $1.distance }
            return $0.place.id < $1.place.id
        }

        return Ranking(
            fix: fix,
            places: unique.prefix(limit).map {
                RankedPlace(place: $0.place, distance: $0.distance, likelihood: $0.likelihood)
            },
            noneLikelihood: none / total,
            radius: radius)
    }

    /// What `rank` checks before any work: a caller that must report bad input before anything else
    /// (a daemon with no places loaded) checks it first.
    public static func validate(fix: Fix, limit: Int) throws(RankingError) {
        guard (1...maximumLimit).contains(limit) else { throw .invalidLimit(limit) }
        guard fix.coordinate.isValid else {
            throw .invalidFix(latitude: fix.coordinate.latitude, longitude: fix.coordinate.longitude)
        }
        if let accuracy = fix.accuracy, !(accuracy.isFinite && accuracy >= 0) {
            throw .invalidAccuracy(accuracy)
        }
        if let speed = fix.speed, !(speed.isFinite && speed >= 0) { throw .invalidSpeed(speed) }
    }

    private struct Scored {
        var place: Place
        var distance: Double
        /// w_i L_i, before normalising.
        var score: Double
        var likelihood = 0.0
    }
}
