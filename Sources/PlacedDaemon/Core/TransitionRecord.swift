import PlacedCore
import PlacedSystem

extension Record {
    /// An own place entered or left (varlink `Transition`, D-Bus `Entered`/`Left`): `event` (enter or
    /// leave), the place's `id`, `name` (for `language`) and `kind`, the fix that confirmed it as
    /// `location`, and its wall-clock `time`.
    static func transition(_ crossing: BoundaryEvent, clock: ServiceClock, language: String?) -> Record {
        var record = Record()
        record.set("event", .string(crossing.transition.rawValue))
        record.set("id", .string(crossing.place.id))
        record.set("name", .string(crossing.place.name(forLanguage: language)))
        record.set("kind", .string(crossing.place.kind))
        record.set("location", .record(.location(crossing.fix, now: nil)))
        record.set("time", .string(ISO8601.utc(clock.wall(at: crossing.fix.receivedAt), milliseconds: true)))
        return record
    }
}
