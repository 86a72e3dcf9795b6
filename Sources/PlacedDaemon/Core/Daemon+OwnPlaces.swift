import PlacedCore
import PlacedStore
import PlacedSystem
import PlacedWire

/// Own places (docs/DESIGN.md, "Own places"): put and deleted in atomic batches, durable before the
/// reply, and in effect at once: the current location is ranked again and the ranking published.
extension Daemon {
    public func putPlaces(_ places: [OwnPlace], by caller: Credentials) throws(ServiceError) -> Int {
        try authorize(caller, to: .write, "PutPlaces")
        do {
            try OwnPlace.validate(places)
        } catch {
            throw .invalidOwnPlace(error)
        }
        guard !places.isEmpty else { return 0 }
        do {
            try ownPlaceStore.put(places)
        } catch {
            Log.error("own places not stored: \(error)")
            throw .storeFailed(reason: "the own places were not stored: \(error)")
        }
        ownPlaces = ownPlaces.putting(places)
        Log.info("own places: \(places.count) put, \(ownPlaces.count) in all")
        ownPlacesChanged()
        return places.count
    }

    public func deletePlaces(_ ids: [String], by caller: Credentials) throws(ServiceError) -> Int {
        try authorize(caller, to: .write, "DeletePlaces")
        for (number, id) in ids.enumerated() where OwnPlace.key(ofID: id) == nil {
            throw .invalidOwnPlace(OwnPlaceError(feature: number, id: id, .badID(id)))
        }
        guard !ids.isEmpty else { return 0 }
        let deleted: Int
        do {
            deleted = try ownPlaceStore.delete(ids)
        } catch {
            Log.error("own places not deleted: \(error)")
            throw .storeFailed(reason: "the own places were not deleted: \(error)")
        }
        ownPlaces = ownPlaces.deleting(ids)
        // A deleted place is not left: it no longer exists (no Left event).
        for id in ids { boundaries.forget(id) }
        Log.info("own places: \(deleted) deleted, \(ownPlaces.count) left")
        ownPlacesChanged()
        return deleted
    }

    public func ownPlaces(by caller: Credentials) throws(ServiceError) -> [OwnPlace] {
        try authorize(caller, to: .read, "OwnPlaces")
        return ownPlaces.places
    }

    public var ownPlaceCount: Int { ownPlaces.count }

    /// A command from the fleet (`[Fleet] AcceptCommands=yes`), trusted as the configured broker
    /// connection is (TLS, the broker's ACL): applied as PutPlaces and DeletePlaces are, in one
    /// transaction with its request id, so a command delivered again is applied once. `alongside` runs
    /// inside that transaction (the result's outbox row). The command was checked whole when it was
    /// read (`FleetCommand.parse`).
    public func applyFleetCommand(
        _ command: FleetCommand, alongside: (FleetCommandResult) throws -> Void
    ) -> FleetCommandResult {
        func result(_ outcome: FleetCommandResult.Outcome) -> FleetCommandResult {
            FleetCommandResult(request: command.request, origin: command.origin, outcome: outcome)
        }
        // Remembered by origin and id: an OwnTracks `_id` equal to one of placed's ids is another request.
        let remembered = "\(command.origin.rawValue) \(command.request)"
        do {
            if let earlier = try ownPlaceStore.command(remembered) {
                Log.info("fleet command \(command.request): applied before, not again")
                return result(.duplicate(put: earlier.put, deleted: earlier.deleted))
            }
            let done = try ownPlaceStore.apply(
                request: remembered, put: command.put, delete: command.delete,
                waypointTimes: command.waypointTimes, at: clock.wall
            ) { record in
                try alongside(result(.applied(put: record.put, deleted: record.deleted)))
            }
            ownPlaces = ownPlaces.deleting(command.delete).putting(command.put)
            // A deleted place is not left: it no longer exists (no Left event).
            for id in command.delete { boundaries.forget(id) }
            Log.info(
                "fleet command \(command.request): \(done.put) own place(s) put, \(done.deleted) deleted, "
                    + "\(ownPlaces.count) in all")
            ownPlacesChanged()
            return result(.applied(put: done.put, deleted: done.deleted))
        } catch {
            Log.error("fleet command \(command.request) not applied: \(error)")
            return result(
                .refused(FleetCommandError(.storeFailed, "not stored: \(error)", request: command.request)))
        }
    }

    /// The own places the device was inside when placed stopped, of those that still exist: none if
    /// the log cannot say (each is then entered again after the dwell, as on a first start).
    static func lastPresence(in store: OwnPlaceStore, of places: OwnPlaceIndex) -> Set<String> {
        do {
            return try store.presence().filter(places.contains(id:))
        } catch {
            Log.error("cannot read which own places the device was inside: \(error); starting outside all")
            return []
        }
    }

    /// A crossing is kept on disk before it is told (the fleet's durable row is written after this
    /// loop turn): after a restart the device is inside what it was inside.
    func keepPresence(_ crossing: BoundaryEvent) {
        do {
            try ownPlaceStore.recordPresence(crossing.place.id, inside: crossing.transition == .entered)
        } catch {
            Log.error("cannot keep the crossing of \(crossing.place.id): \(error)")
        }
    }

    /// A change is seen at once: the last location ranked again, as a new generation.
    private func ownPlacesChanged() {
        if let fix = location { rerank(at: fix) }
    }
}
