import PlacedCore
import PlacedSystem

/// The daemon's events in the journal (or on stderr outside systemd): each move and ranking at debug
/// priority, so a moving vehicle does not fill its journal (`LogLevel=debug` shows them), and each
/// selection as a structured entry with its own MESSAGE_ID. It subscribes first, so a selection is in
/// the journal before any client hears of it.
final class JournalAdapter: DaemonSubscriber {
    static let selectionMessageID = "5d1b7e4c2a9f4b8e8c3f6a0d9e2b7c41"

    func handle(_ event: DaemonEvent, from service: PlacesService) {
        switch event {
        case let .moved(fix, number, distance):
            guard Log.isEnabled(.debug) else { return }
            let accuracy = fix.accuracy.map { " ±\($0.formatted(decimals: 1)) m" } ?? ""
            let after = distance.map { " after \($0.formatted(decimals: 1)) m" } ?? " (first fix)"
            Log.debug(
                "move \(number) at \(fix.coordinate.latitude.formatted(decimals: 7)),"
                    + "\(fix.coordinate.longitude.formatted(decimals: 7))\(accuracy)\(after)")
        case let .ranked(ranking):
            guard Log.isEnabled(.debug) else { return }
            let top = ranking.places.prefix(3).map { "\($0.place.name) \($0.likelihood.formatted(decimals: 2))" }
            Log.debug("ranking \(ranking.generation): \(top.isEmpty ? "no places near" : top.joined(separator: ", "))")
        case let .markerPlaced(marker):
            let place = marker.place.place
            let at = marker.location.coordinate
            Log.log(
                .notice, "selected \(place.name) (\(place.id)) at \(at), selection \(marker.selection)",
                fields: [
                    ("MESSAGE_ID", Self.selectionMessageID), ("PLACE_ID", place.id), ("PLACE_NAME", place.name),
                    ("LATITUDE", at.latitude.formatted(decimals: 7)),
                    ("LONGITUDE", at.longitude.formatted(decimals: 7)),
                    ("SELECTION", String(marker.selection)), ("GENERATION", String(marker.generation)),
                ])
        case .located, .sourceChanged, .distanceFilterChanged:
            break
        }
    }
}
