/// Which place the open visit is at, and when `AutoSelect=` selects it (docs/DESIGN.md, "Visits").
///
/// The daemon tells it of the visit's start with the ranking made at the visit's averaged position,
/// of any later ranking of that position, of every selection recorded while the visit is open, and of
/// the end. It decides, purely:
/// - auto-selection: the top place of the visit's ranking once its likelihood reaches the threshold,
///   at most once per visit, and never after a selection during the visit (the person's word wins);
/// - the ended visit's place: the one selected during the visit, else the top of its ranking.
public struct VisitPlaceTracker: Sendable {
    /// Likelihood at which the top place is selected without asking; nil: never (`AutoSelect=no`).
    public let autoSelectThreshold: Double?
    public private(set) var visit: Visit?
    /// The ranking at the visit's position (the latest one, when ranked again).
    public private(set) var ranking: Ranking?
    /// The place selected while the visit is open, and whether `AutoSelect=` made the selection.
    public private(set) var selection: (place: RankedPlace, automatic: Bool)?
    /// Set once auto-selection has been proposed for this visit, whether or not it was recorded.
    private var autoSelectionProposed = false

    /// What `AutoSelect=` accepts besides off: above 0.5, at most one place can reach the threshold.
    public static let thresholdRange = 0.5...1.0

    public init(autoSelectThreshold: Double? = nil) throws(VisitError) {
        if let threshold = autoSelectThreshold, !Self.thresholdRange.contains(threshold) {
            throw .invalidSettings("auto-select threshold must be 0.5 to 1 (or off)")
        }
        self.autoSelectThreshold = autoSelectThreshold
    }

    /// A visit started and its position was ranked. Returns the place to select automatically, if any:
    /// select it through the durable path, then call `recordSelection(_:automatic: true)`.
    public mutating func started(_ visit: Visit, ranking: Ranking) -> RankedPlace? {
        self.visit = visit
        self.ranking = ranking
        selection = nil
        autoSelectionProposed = false
        return autoSelection()
    }

    /// The open visit's position was ranked again (its centre improved, the places were reloaded, a pick
    /// changed what is learned). Returns a place to select automatically, as `started` does.
    public mutating func ranked(_ ranking: Ranking) -> RankedPlace? {
        guard visit != nil else { return nil }
        self.ranking = ranking
        return autoSelection()
    }

    /// A selection was recorded (by a client, or automatically); it is the visit's place if one is open.
    public mutating func recordSelection(_ place: RankedPlace, automatic: Bool) {
        guard visit != nil else { return }
        selection = (place, automatic)
    }

    /// The open visit ended: returns its place (selected during it, else the top of its ranking; nil
    /// when nothing was ranked near) and forgets the visit.
    public mutating func ended(_ visit: Visit) -> RankedPlace? {
        defer {
            self.visit = nil
            ranking = nil
            selection = nil
            autoSelectionProposed = false
        }
        return selection?.place ?? ranking?.places.first
    }

    /// The place the open visit is at so far, by the same rule as `ended`.
    public var place: RankedPlace? { selection?.place ?? ranking?.places.first }

    private mutating func autoSelection() -> RankedPlace? {
        guard let threshold = autoSelectThreshold, !autoSelectionProposed, selection == nil,
            let top = ranking?.places.first, top.likelihood >= threshold
        else { return nil }
        autoSelectionProposed = true
        return top
    }
}
