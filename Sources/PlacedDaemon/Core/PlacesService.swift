import PlacedCore
import PlacedStore
import PlacedSystem

/// The one seam between the daemon's core and its adapters (D-Bus, varlink, journal, and whatever
/// comes next): what an adapter may read and the operations it may call. Adapters hold this, never
/// the `Daemon`; the daemon hands each subscribed adapter its events.
public protocol PlacesService: AnyObject {
    /// The latest usable fix, moves and suppressed fixes alike: what clients see as the location.
    var location: Fix? { get }
    var sourceState: SourceState { get }
    /// The latest ranking, at full length (`current(limit:)` cuts it).
    var latestRanking: Ranking? { get }
    var generation: UInt64 { get }
    var marker: Marker? { get }
    var distanceFilter: Double { get }
    var placeCount: Int { get }
    /// The open visit and the place it is at so far (selected during it, else the top of its
    /// ranking), if the device is staying somewhere.
    var openVisit: (visit: Visit, place: RankedPlace?)? { get }
    /// CLOCK_MONOTONIC now, microseconds: for the age of a fix.
    var now: UInt64 { get }
    /// `Language=`: the language of the names in replies to calls that ask for none, and in every
    /// broadcast but a Watch that asked for its own; nil: each place's `name` tag.
    var language: String? { get }
    /// Now, on both clocks: monotonic microseconds (a fix's or a visit's times) and wall-clock
    /// seconds (what records state).
    var clock: ServiceClock { get }

    /// Refuses `caller` unless it may `access` (`operation` names what was asked, for the error). A
    /// device's whereabouts are personal data: reading needs root, the writer group or the reader
    /// group; writing needs root or the writer group. The operations below check it themselves;
    /// an adapter calls it before it shows any of the state above.
    func authorize(_ caller: Credentials, to access: Access, _ operation: String) throws(ServiceError)

    /// The latest ranking cut to `limit` places (nil: the default, 5).
    func current(limit: Int?, by caller: Credentials) throws(ServiceError) -> Ranking?
    /// A what-if ranking's places at any position: changes nothing.
    func rank(latitude: Double, longitude: Double, accuracy: Double?, limit: Int?, by caller: Credentials)
        throws(ServiceError) -> [RankedPlace]
    /// Records the caller's selection durably, logs it, and announces the marker.
    func select(id: String, by caller: Credentials) throws(ServiceError) -> Marker
    /// Reloads the places if their file changed, and ranks again at the current location.
    func refresh(by caller: Credentials) throws(ServiceError)
    /// Past selections, newest first.
    func history(limit: Int?, before: Int64?, by caller: Credentials) throws(ServiceError) -> [Marker]
    /// The map layer within `radius` metres of a position, nearest first: what a map of that circle
    /// draws, bounded so that one reply stays a few hundred kilobytes.
    func map(latitude: Double, longitude: Double, radius: Double, by caller: Credentials) throws(ServiceError)
        -> [MapFeature]

    // Details (issue 34).

    /// The place with this id, whether or not any ranking lists it.
    func place(id: String, by caller: Credentials) throws(ServiceError) -> Place
    /// The place's opening hours at an instant, in `timeZone`; nil when it has none or they do not parse.
    func hours(of place: Place, at unixSeconds: Int) -> PlaceHours?
    /// The zone opening hours are evaluated in: `TimeZone=`, else `TZ`, else /etc/localtime.
    var timeZone: TimeZoneRules { get }
}

extension PlacesService {
    /// The language to name places and features in for a call that asked for `asked`: its own, else
    /// `Language=`. Absent and empty ask for nothing; "C" (no language) asks for the name tags.
    public func language(asked: String?) -> String? {
        guard let asked, !asked.isEmpty else { return language }
        return asked
    }
}

/// What a caller wants to do, for `PlacesService.authorize`.
public enum Access: Sendable {
    /// The location, the rankings, the history, the markers.
    case read
    /// Select and Refresh.
    case write
}

/// What happened in the daemon, in the order it happened. Each event goes to every subscriber in
/// the order they subscribed.
public enum DaemonEvent {
    /// A fix passed the gate but not the distance filter: the location changed, the ranking did not.
    case located(Fix)
    /// A fix passed the distance filter: move `number`, `distance` metres from the last one (nil for
    /// the first). Its ranking follows as `ranked`, then `located`.
    case moved(Fix, number: UInt64, distance: Double?)
    /// A new ranking, cut to the default list length.
    case ranked(Ranking)
    /// A selection (by a client, or automatic), recorded durably before this is sent.
    case markerPlaced(Marker)
    /// The device has stayed somewhere: the visit, and the ranking at its averaged position (published
    /// as a generation just before).
    case visitStarted(Visit, ranking: Ranking)
    /// The device left: the visit, its place (the one selected during it, else the top of its
    /// ranking), and the selection made during it, if any.
    case visitEnded(Visit, place: RankedPlace?, selection: Marker?)
    /// The location source's state changed; without fixes the last ranking turns stale.
    case sourceChanged(SourceState)
    case distanceFilterChanged(Double)
}

/// One instant on both clocks, to turn monotonic times into wall-clock ones.
public struct ServiceClock: Sendable {
    /// CLOCK_MONOTONIC, microseconds.
    public var monotonic: UInt64
    /// CLOCK_REALTIME, seconds since the epoch.
    public var wall: Double

    /// The wall-clock time of monotonic instant `time`.
    public func wall(at time: UInt64) -> Double {
        time <= monotonic ? wall - Double(monotonic - time) / 1e6 : wall + Double(time - monotonic) / 1e6
    }
}

/// An adapter: it hears every event of the daemon it subscribed to.
public protocol DaemonSubscriber: AnyObject {
    func handle(_ event: DaemonEvent, from service: PlacesService)
}
