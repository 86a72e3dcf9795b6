#if canImport(Glibc)
    import Glibc  // libm: exp, pow
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whether a place is open at a fix's time, by its opening hours: the caller evaluates them
/// (`OpeningHours.status(at:in:)`), `.unknown` where a place has none or they do not say.
public typealias OpenState = OpeningHoursRule.State

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
    /// Σ n: how many past picks (weighted by age and distance) the ranking learned from; 0 when it is the
    /// spatial model's alone.
    public var evidence: Double

    public init(
        generation: UInt64 = 0, fix: Fix, places: [RankedPlace], noneLikelihood: Double, radius: Double,
        isStale: Bool = false, evidence: Double = 0
    ) {
        self.generation = generation
        self.fix = fix
        self.places = places
        self.noneLikelihood = noneLikelihood
        self.radius = radius
        self.isStale = isStale
        self.evidence = evidence
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

/// Ranks candidate places by the likelihood that a device at a fix is at each (docs/DESIGN.md,
/// "Likelihood model"):
///
///     d_i  distance from the fix to the footprint (0 inside an area)
///     r_i  extent: √(area/π) for an area, the kind's point extent for a point
///     s_i² = σ² + (r_i/2)²
///     L_i  = exp(−d_i² / 2s_i²) / (2π s_i²)
///     w_i  = weight(kind_i) · (1 + selections_i)^β · (closed_i ? c : 1)
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

    /// Ranks `candidates` for `fix` by the spatial model alone. Candidates may be all places or a spatial
    /// query's result: places whose footprint lies beyond R are ignored. Place ids are assumed unique; a
    /// place listed twice counts once. `selectionCounts` maps place ids to how often users selected them.
    ///
    /// - Parameter limit: 1 ... `maximumLimit`; anything else is `RankingError.invalidLimit`, because a
    ///   client asking for 0 or 1000 places has a bug worth seeing.
    /// - Returns: a ranking with generation 0 (publish it with `RankingHistory`). Nothing near is an
    ///   empty list with `noneLikelihood` 1, not an error.
    ///
    /// - Parameter openState: whether a candidate is open at the fix's time, by its opening hours; nil (the
    ///   default) is unknown for every candidate, which leaves the ranking as if no place had hours. A
    ///   closed place's weight is multiplied by `model.closedWeight`.
    public func rank<Candidates: Sequence>(
        fix: Fix, candidates: Candidates, selectionCounts: [String: Int] = [:],
        openState: ((Candidates.Element) -> OpenState)? = nil, limit: Int = defaultLimit
    ) throws(RankingError) -> Ranking where Candidates.Element: RankingCandidate {
        try Self.validate(fix: fix, limit: limit)
        var scored = spatialLikelihoods(
            fix: fix, candidates: candidates, selectionCounts: selectionCounts, openState: openState)
        return finish(fix: fix, &scored, limit: limit)
    }

    /// Ranks `candidates` for `fix` as the daemon does: the spatial model, then the picks made near the fix
    /// as evidence (docs/DESIGN.md, "Learning from picks"). With p_i the spatial likelihoods ("none" included)
    /// and n_i the picks of place i near the fix, weighted by age and by how close they were made,
    ///
    ///     likelihood_i = (α p_i + n_i) / (α + Σ_j n_j)
    ///
    /// the mean of a Dirichlet prior of strength α centred on the spatial model, updated by the counts.
    ///
    /// α is not one number but a ladder, α_k = strength · 4^k for k = 0 ... 4, believed 80 % / 5 % each
    /// before any pick, each then weighed by how well its Dirichlet-multinomial explains the picks seen here
    /// (its marginal likelihood), and the result is the average over the ladder. Picks that keep naming a
    /// place the model thinks unlikely here are best explained by a weak prior, so one or two picks put that
    /// place first; many picks spread the way the model expects are best explained by a strong one, so
    /// they leave the model in charge. A single α cannot do both: a weak one followed every stray pick in a
    /// dense centre (calibration error 0.039 instead of 0.010 on the snap visits, top 1 down 4 points), a
    /// strong one needed many picks (`placed-bench learn`).
    ///
    /// A pick of place i made at distance d counts w = 2^(−age/halfLife) · exp(−d² / 2h²),
    /// h² = k²(σ² + σ_pick² + r_i²/2): the spread of two fixes taken at the same place (each fix's noise, and
    /// where in the place each stood: r_i is the extent of the spatial model, a position inside it varying
    /// by r_i/2 per axis). Only the nearest picks within `picks.settings.neighbourhood(sigma:)` count, so
    /// picks farther away leave the ranking exactly as the spatial model has it. A pick of a place that is
    /// not a candidate here (beyond R, or gone from the data) counts for "none of these": the device was at
    /// a place this list does not hold. Every value stays in [0, 1], the candidates and "none" still sum
    /// to 1, and the result is deterministic.
    ///
    /// - Parameter now: wall-clock seconds since the Unix epoch, the time the picks' ages and times of
    ///   week are taken at.
    /// - Parameter openState: as for the spatial model alone.
    public func rank<Candidates: Sequence>(
        fix: Fix, candidates: Candidates, selectionCounts: [String: Int] = [:], picks: PickMemory, now: Double,
        openState: ((Candidates.Element) -> OpenState)? = nil, limit: Int = defaultLimit
    ) throws(RankingError) -> Ranking where Candidates.Element: RankingCandidate {
        try Self.validate(fix: fix, limit: limit)
        var scored = spatialLikelihoods(
            fix: fix, candidates: candidates, selectionCounts: selectionCounts, openState: openState)
        let evidence = learn(from: picks, fix: fix, now: now, &scored)
        var ranking = finish(fix: fix, &scored, limit: limit)
        ranking.evidence = evidence
        return ranking
    }

    /// The candidates within R with their spatial likelihoods (the last element: "none of these"),
    /// in a canonical order so no sum depends on the order the candidates came in.
    private func spatialLikelihoods<Candidates: Sequence>(
        fix: Fix, candidates: Candidates, selectionCounts: [String: Int],
        openState: ((Candidates.Element) -> OpenState)?
    ) -> ScoredList<Candidates.Element> where Candidates.Element: RankingCandidate {
        let sigma = model.sigma(accuracy: fix.accuracy)
        let variance = sigma * sigma
        let radius = model.searchRadius(accuracy: fix.accuracy)
        let projection = LocalProjection(origin: fix.coordinate)
        let beta = model.selectionExponent

        // Named by position, not copied: an array of candidates is shared as it is.
        let all = Array(candidates)
        var scored: [Scored] = []
        for position in all.indices {
            let place = all[position]
            // Cheap bound first: most candidates of a radius query are outside R, and an outline is long.
            guard place.lowerBoundDistance(from: projection) <= radius else { continue }
            let distance = place.footprintDistance(from: projection)
            guard distance <= radius else { continue }
            let prior = place.prior(in: model)
            let extent = place.area > 0 ? (place.area / .pi).squareRoot() : prior.pointExtent
            let s2 = variance + extent * extent / 4
            var weight = prior.weight
            if beta > 0, !selectionCounts.isEmpty, let count = selectionCounts[place.id], count > 0 {
                weight *= pow(1 + Double(count), beta)
            }
            // Asked only of the candidates within R: evaluating opening hours is the costly part.
            if let openState, openState(place) == .closed { weight *= model.closedWeight }
            let density = exp(-distance * distance / (2 * s2)) / (2 * .pi * s2)
            scored.append(Scored(candidate: position, distance: distance, extent: extent, score: weight * density))
        }

        // A canonical order before summing, so the total (and so every likelihood) does not depend on the
        // order the candidates arrived in; it also brings a place listed twice next to itself. By score
        // alone first (a comparison the sort inlines: hundreds of own sites can be within R), then the
        // rare runs of equal scores by id.
        Scored.sortByScore(&scored)
        Self.orderTies(&scored, of: all)
        Self.removeRepeats(&scored, of: all)

        let none = model.noneWeight(speed: fix.speed) / (.pi * radius * radius)
        var total = none
        for s in scored { total += s.score }
        for index in scored.indices { scored[index].likelihood = scored[index].score / total }
        return ScoredList(candidates: all, places: scored, none: none / total, radius: radius)
    }

    // The helpers below loop by hand, without closures capturing the candidates: a closure that
    // captured them kept the ranker from being specialized for a caller's candidate type (the generic
    // one reads every candidate through its metadata, several times slower).

    /// Runs of equal scores (rare: the same place listed twice, or two places alike) put in id order.
    private static func orderTies<Candidate: RankingCandidate>(_ scored: inout [Scored], of all: [Candidate]) {
        var index = 1
        while index < scored.count {
            // Insertion within the run of the entry's score: the runs are a few entries long.
            var at = index
            while at > 0, scored[at - 1].score == scored[at].score,
                all[scored[at].candidate].id < all[scored[at - 1].candidate].id
            {
                scored.swapAt(at - 1, at)
                at -= 1
            }
            index += 1
        }
    }

    /// A place listed twice scores the same twice and, its ties in id order, sits next to itself: the
    /// repeats are removed in place, from the first on (a spatial query lists each once: nothing moves).
    private static func removeRepeats<Candidate: RankingCandidate>(_ scored: inout [Scored], of all: [Candidate]) {
        var kept = min(1, scored.count)
        for index in kept..<scored.count {
            let previous = scored[kept - 1]
            if previous.score == scored[index].score, all[previous.candidate].id == all[scored[index].candidate].id {
                continue
            }
            scored.swapAt(kept, index)
            kept += 1
        }
        scored.removeSubrange(kept...)
    }

    /// Applies the picks near the fix to the spatial likelihoods; returns Σ n, the picks' total weight
    /// (0: nothing changed).
    private func learn<Candidate: RankingCandidate>(
        from picks: PickMemory, fix: Fix, now: Double, _ scored: inout ScoredList<Candidate>
    ) -> Double {
        guard !picks.isEmpty else { return 0 }
        let sigma = model.sigma(accuracy: fix.accuracy)
        let settings = picks.settings
        let nearby = picks.nearby(fix.coordinate, within: settings.neighbourhood(sigma: sigma), now: now)
        guard !nearby.isEmpty else { return 0 }

        // Which candidate each picked place is (-1: none), looked up once per place: a fix has a few near.
        var candidateOfPlace: [(place: Int32, candidate: Int)] = []
        func candidate(_ place: Int32) -> Int {
            if let known = candidateOfPlace.first(where: { $0.place == place }) { return known.candidate }
            let id = picks.placeID(place)
            let found = scored.places.firstIndex { scored.candidates[$0.candidate].hasID(id) } ?? -1
            candidateOfPlace.append((place, found))
            return found
        }
        var counts = [Double](repeating: 0, count: scored.places.count)
        var noneCount = 0.0
        let scale2 = settings.kernelScale * settings.kernelScale
        for pick in nearby {
            let index = candidate(pick.place)
            let extent = index >= 0 ? scored.places[index].extent : RankingModel.defaultPointExtent
            let pickSigma = model.sigma(accuracy: pick.sigma)
            let h2 = scale2 * (sigma * sigma + pickSigma * pickSigma + extent * extent / 2)
            let weight = pick.weight * exp(-pick.distance * pick.distance / (2 * h2))
            if index >= 0 { counts[index] += weight } else { noneCount += weight }
        }
        var evidence = noneCount
        for count in counts { evidence += count }
        guard evidence > 0 else { return 0 }
        // Each prior strength α_k weighed by how well its Dirichlet-multinomial explains the counts
        // (marginal likelihood, Γ(α)/Γ(α+N) · Π Γ(αp_i + n_i)/Γ(αp_i), fractional counts allowed); the
        // posterior is the average of (α_k p_i + n_i) / (α_k + N), which is a p_i + b n_i with a + b N = 1.
        let strengths = settings.strengths
        var a = 0.0, b = 0.0
        if strengths.count == 1 {
            a = strengths[0].strength / (strengths[0].strength + evidence)
            b = 1 / (strengths[0].strength + evidence)
        } else {
            var logEvidence = [Double](repeating: 0, count: strengths.count)
            for (k, s) in strengths.enumerated() {
                let alpha = s.strength
                var l = log(s.belief) + lgamma(alpha) - lgamma(alpha + evidence)
                func term(_ p: Double, _ n: Double) -> Double {
                    let prior = max(alpha * p, Double.leastNormalMagnitude)
                    return lgamma(prior + n) - lgamma(prior)
                }
                for index in counts.indices where counts[index] > 0 {
                    l += term(scored.places[index].likelihood, counts[index])
                }
                if noneCount > 0 { l += term(scored.none, noneCount) }
                logEvidence[k] = l
            }
            let top = logEvidence.max()!
            var total = 0.0
            for (k, s) in strengths.enumerated() {
                let w = exp(logEvidence[k] - top)
                total += w
                a += w * s.strength / (s.strength + evidence)
                b += w / (s.strength + evidence)
            }
            a /= total
            b /= total
        }
        for index in scored.places.indices {
            scored.places[index].likelihood = a * scored.places[index].likelihood + b * counts[index]
        }
        scored.none = a * scored.none + b * noneCount
        return evidence
    }

    /// Picks the first `limit` in ranking order and wraps up: only the places listed become `Place`s.
    private func finish<Candidate: RankingCandidate>(fix: Fix, _ scored: inout ScoredList<Candidate>, limit: Int)
        -> Ranking
    {
        let candidates = scored.candidates
        // One pass keeping the best few in order, not a sort of all: hundreds of places can be within R
        // (own sites in a dense centre) and at most 20 are listed.
        var listed: [Scored] = []
        listed.reserveCapacity(limit + 1)
        for entry in scored.places {
            var at = listed.count
            while at > 0, Self.ranks(entry, before: listed[at - 1], of: candidates) { at -= 1 }
            guard at < limit else { continue }
            listed.insert(entry, at: at)
            if listed.count > limit { listed.removeLast() }
        }
        var places: [RankedPlace] = []
        for entry in listed {
            places.append(
                RankedPlace(
                    place: candidates[entry.candidate].place, distance: entry.distance, likelihood: entry.likelihood))
        }
        return Ranking(
            fix: fix,
            places: places,
            noneLikelihood: scored.none,
            radius: scored.radius)
    }

    /// The ranking's order: likelihood, then distance, then id.
    private static func ranks<Candidate: RankingCandidate>(_ a: Scored, before b: Scored, of candidates: [Candidate])
        -> Bool
    {
        if a.likelihood != b.likelihood { return a.likelihood > b.likelihood }
        if a.distance != b.distance { return a.distance < b.distance }
        return candidates[a.candidate].id < candidates[b.candidate].id
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

    /// A candidate within R and its figures. It names its candidate by position in the list's
    /// `candidates`, so the sorts move a few words, not a candidate (a mapped one is about 150 bytes, and
    /// sorting them was most of a ranking with hundreds of own places near).
    struct Scored {
        var candidate: Int
        var distance: Double
        /// r_i, metres.
        var extent: Double
        /// w_i L_i, before normalising.
        var score: Double
        var likelihood = 0.0

        /// Highest score first. A function of its own, not a call to `sort` in the ranker's generic body:
        /// a sort of this type, specialized here, would keep that body from being serialized for other
        /// modules, and the ranker from being specialized for their candidates.
        @inline(never)
        static func sortByScore(_ scored: inout [Scored]) { scored.sort { $0.score > $1.score } }
    }

    struct ScoredList<Candidate: RankingCandidate> {
        let candidates: [Candidate]
        var places: [Scored]
        /// Likelihood of "none of these".
        var none: Double
        var radius: Double
    }
}

/// What the ranker reads of a candidate: a `Place`, or a view of one that builds its strings only when
/// asked (a mapped places file's candidates: of the hundreds within reach only the ranked few become
/// `Place`s, and an id is read only where two scores tie).
public protocol RankingCandidate {
    var kind: String { get }
    /// `model.prior(ofKind: kind)`, which a candidate may have looked up before (by its kind's number in
    /// a places file, not by hashing the string for every candidate of every ranking).
    func prior(in model: RankingModel) -> RankingModel.KindPrior
    /// Square metres; 0 for a point.
    var area: Double { get }
    /// Never more than `footprintDistance`; cheap.
    func lowerBoundDistance(from projection: LocalProjection) -> Double
    func footprintDistance(from projection: LocalProjection) -> Double
    var id: String { get }
    func hasID(_ id: String) -> Bool
    /// The whole place, for a ranking's list.
    var place: Place { get }
}

extension RankingCandidate {
    public func prior(in model: RankingModel) -> RankingModel.KindPrior { model.prior(ofKind: kind) }
}

extension Place: RankingCandidate {
    public var place: Place { self }
    public func hasID(_ other: String) -> Bool { id == other }
}
