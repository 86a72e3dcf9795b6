import PlacedCore
import PlacedSystem

/// The daemon's events in the journal (or on stderr outside systemd): each move and ranking at debug
/// priority, so a moving vehicle does not fill its journal (`LogLevel=debug` shows them), and each
/// selection as a structured entry with its own MESSAGE_ID. It subscribes first, so a selection is in
/// the journal before any client hears of it.
final class JournalAdapter: DaemonSubscriber {
    static let selectionMessageID = "5d1b7e4c2a9f4b8e8c3f6a0d9e2b7c41"
    static let visitStartedMessageID = "1df280d41ef540f39abe08ce69b2576a"
    static let visitEndedMessageID = "2750cf6609404de3895803abac304e54"
    static let enteredMessageID = "c5b78abef54147e38657f701bf308b8a"
    static let leftMessageID = "c9fa93b161804429a62144b0e14ef73f"

    func handle(_ event: DaemonEvent, from service: PlacesService) {
        switch event {
        case let .moved(fix, number, distance):
            guard Log.isEnabled(.debug) else { return }
            let accuracy = fix.radius95.map { " ±\($0.formatted(decimals: 1)) m" } ?? ""
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
                .notice,
                "selected \(place.name) (\(place.id)) at \(at), selection \(marker.selection)"
                    + (marker.automatic ? ", automatically" : ""),
                fields: [
                    ("MESSAGE_ID", Self.selectionMessageID), ("PLACE_ID", place.id), ("PLACE_NAME", place.name),
                    ("LATITUDE", at.latitude.formatted(decimals: 7)),
                    ("LONGITUDE", at.longitude.formatted(decimals: 7)),
                    ("SELECTION", String(marker.selection)), ("GENERATION", String(marker.generation)),
                    ("AUTOMATIC", marker.automatic ? "1" : "0"),
                ])
        case let .visitStarted(visit, ranking):
            let top = ranking.places.first.map { ", likely \($0.place.name) \($0.likelihood.formatted(decimals: 2))" }
            Log.log(
                .info, "visit \(visit.id) started at \(visit.centre) ±\(radius(visit)) m\(top ?? "")",
                fields: fields(of: visit, service, Self.visitStartedMessageID))
        case let .visitEnded(visit, place, _):
            let at = place.map { " at \($0.place.name)" } ?? ""
            var fields = fields(of: visit, service, Self.visitEndedMessageID)
            fields += [("DURATION", visit.duration.formatted(decimals: 0))]
            if let place { fields += [("PLACE_ID", place.place.id), ("PLACE_NAME", place.place.name)] }
            if let ended = visit.endedAt {
                fields += [("ENDED", ISO8601.utc(service.clock.wall(at: ended), milliseconds: true))]
            }
            Log.log(
                .info, "visit \(visit.id) ended\(at) after \(visit.duration.formatted(decimals: 0)) s", fields: fields)
        case let .boundaryCrossed(crossing):
            let place = crossing.place
            let at = crossing.fix.coordinate
            let entered = crossing.transition == .entered
            Log.log(
                .info, "\(entered ? "entered" : "left") \(place.name) (\(place.id)) at \(at)",
                fields: [
                    ("MESSAGE_ID", entered ? Self.enteredMessageID : Self.leftMessageID),
                    ("TRANSITION", crossing.transition.rawValue), ("PLACE_ID", place.id), ("PLACE_NAME", place.name),
                    ("LATITUDE", at.latitude.formatted(decimals: 7)),
                    ("LONGITUDE", at.longitude.formatted(decimals: 7)),
                    ("ACCURACY", crossing.fix.radius95.map { $0.formatted(decimals: 1) } ?? ""),
                ])
        case .located, .sourceChanged, .distanceFilterChanged:
            break
        }
    }

    private func radius(_ visit: Visit) -> String { Fix.radius95(fromSigma: visit.accuracy).formatted(decimals: 1) }

    private func fields(of visit: Visit, _ service: PlacesService, _ messageID: String) -> [(String, String)] {
        [
            ("MESSAGE_ID", messageID), ("VISIT_ID", String(visit.id)),
            ("LATITUDE", visit.centre.latitude.formatted(decimals: 7)),
            ("LONGITUDE", visit.centre.longitude.formatted(decimals: 7)), ("ACCURACY", radius(visit)),
            ("STARTED", ISO8601.utc(service.clock.wall(at: visit.startedAt), milliseconds: true)),
        ]
    }
}
