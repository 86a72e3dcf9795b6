/// The daemon's latest rankings: numbers each new one, keeps the newest with its fix, and remembers a
/// few before it so a selection that raced a refresh still finds its place.
public struct RankingHistory: Sendable {
    /// How many of the newest rankings `find` searches.
    public let depth: Int
    /// Newest last; at most `depth`.
    public private(set) var recent: [Ranking] = []
    /// The generation of the newest ranking; 0 before the first.
    public private(set) var generation: UInt64 = 0

    public init(depth: Int = 3) {
        self.depth = max(1, depth)
    }

    /// The newest ranking, served to clients.
    public var latest: Ranking? { recent.last }

    /// Stamps `ranking` with the next generation, makes it the latest, and returns it. `stale`: ranked
    /// at the last fix while the location source has none (a refresh, a reload), so still old news.
    @discardableResult
    public mutating func publish(_ ranking: Ranking, stale: Bool = false) -> Ranking {
        generation += 1
        var published = ranking
        published.generation = generation
        published.isStale = stale
        recent.append(published)
        if recent.count > depth { recent.removeFirst(recent.count - depth) }
        return published
    }

    /// Marks the latest ranking stale (the location source is lost) or fresh again. Keeps its generation:
    /// the places did not change.
    public mutating func setStale(_ stale: Bool) {
        guard !recent.isEmpty else { return }
        recent[recent.count - 1].isStale = stale
    }

    /// The place with `id` in the newest ranking that lists it, among the last `depth`, with that
    /// ranking's generation.
    public func find(placeID id: String) -> (place: RankedPlace, generation: UInt64)? {
        for ranking in recent.reversed() {
            if let ranked = ranking.places.first(where: { $0.place.id == id }) {
                return (ranked, ranking.generation)
            }
        }
        return nil
    }

    /// Forgets every ranking (after the place data is replaced: old ids may no longer exist). The
    /// generation keeps counting, so a client never sees a number twice.
    public mutating func clear() { recent.removeAll() }
}
