import FuzzSupport
import PlacedCore
import PlacedJSON
import PlacedWire

/// An MQTT message on a command topic, as the fleet export hands it over: the first byte picks the
/// topic (even: `placed/<device>/cmd`, odd: OwnTracks' `/cmd`), the rest is the payload. A command is
/// read whole or refused with a named error; what is read must be a batch PutPlaces would take, and
/// its result must be JSON.
runFuzzer { input in
    guard let first = input.raw.first else { return }
    let origin: FleetCommand.Origin = first & 1 == 0 ? .placed : .ownTracks
    let payload = Array(input.raw.dropFirst())
    let outcome: FleetCommandResult.Outcome
    let request: String?
    do throws(FleetCommandError) {
        let command = try FleetCommand.parse(payload, origin: origin)
        guard !command.request.isEmpty, command.request.utf8.count <= FleetCommand.maximumRequestLength else {
            fatalError("request id \(command.request.debugDescription) out of bounds")
        }
        guard !command.put.isEmpty || !command.delete.isEmpty else { fatalError("a command that does nothing") }
        do {
            try OwnPlace.validate(command.put)
        } catch {
            fatalError("a command's places fail PutPlaces' checks: \(error)")
        }
        if let bad = command.delete.first(where: { OwnPlace.key(ofID: $0) == nil }) {
            fatalError("a command deletes \(bad.debugDescription)")
        }
        if !Set(command.put.map(\.id)).isDisjoint(with: command.delete) { fatalError("put and deleted at once") }
        if !Set(command.waypointTimes.keys).isSubset(of: command.put.map(\.id)) {
            fatalError("a waypoint time of no place put")
        }
        request = command.request
        outcome = .applied(put: command.put.count, deleted: command.delete.count)
    } catch {
        if error.reason.isEmpty { fatalError("a refusal without a reason") }
        request = error.request
        outcome = .refused(error)
    }
    let record = FleetCommandResult(request: request, origin: origin, outcome: outcome).record
    guard let bytes = try? JSON.object(record).encoded(), (try? JSON(parsing: bytes)) != nil else {
        fatalError("the result is not JSON")
    }
}
