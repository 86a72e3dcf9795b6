/// A selection: the user's word that the device is at a place. Recorded durably, then announced.
public struct Marker: Sendable, Equatable {
    /// The selection's id in the log (increasing); 0 before it is recorded.
    public var selection: Int64
    /// The place as it stood in the ranking it was picked from.
    public var place: RankedPlace
    /// Where the device was when the place was picked.
    public var location: Fix
    /// Wall-clock time of the selection, seconds since the Unix epoch.
    public var time: Double
    /// The ranking generation the place was picked from.
    public var generation: UInt64
    /// Made by `AutoSelect=` at a visit, not by a person or a client.
    public var automatic: Bool

    public init(
        selection: Int64 = 0, place: RankedPlace, location: Fix, time: Double, generation: UInt64,
        automatic: Bool = false
    ) {
        self.selection = selection
        self.place = place
        self.location = location
        self.time = time
        self.generation = generation
        self.automatic = automatic
    }
}

/// Why a selection is refused before anything is recorded.
public enum SelectionError: Error, Equatable, CustomStringConvertible {
    /// No place with this id exists in the places database.
    case unknownPlace(String)
    /// The place exists, but not in the current ranking nor the last few.
    case notInRanking(String)

    public var description: String {
        switch self {
        case let .unknownPlace(id): "unknown place '\(id)'"
        case let .notInRanking(id): "place '\(id)' is not in the current ranking or the last few"
        }
    }
}

extension RankingHistory {
    /// Resolves a selection request against the recent rankings: the newest ranking that holds
    /// the place wins, so its likelihood and generation are the ones the user saw last.
    /// `exists` tells an unknown id from one that is merely not ranked now.
    public func resolveSelection(of id: String, exists: (String) -> Bool) throws(SelectionError)
        -> (place: RankedPlace, generation: UInt64)
    {
        if let found = find(placeID: id) { return found }
        throw exists(id) ? .notInRanking(id) : .unknownPlace(id)
    }
}
