import PlacedCore
import PlacedFleet
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Everything placed can be told, with its defaults: the values the settings table
/// (`Settings.all`) reads and writes. Filled from the config file, then overridden by flags.
public struct Configuration: Sendable, Equatable {
    public enum Source: Sendable, Equatable {
        case gpsd(host: String, port: String)
        case fixed(Coordinate, accuracy: Double)
    }

    public enum SourceKind: String, Sendable, Equatable, CaseIterable {
        case gpsd, `static`
    }

    public struct StaticPosition: Sendable, Equatable {
        public var coordinate: Coordinate
        /// Metres.
        public var accuracy: Double

        /// `LAT,LON,ACC`, as `--static` and `StaticPosition=` take it.
        public var text: String {
            "\(String(coordinate.latitude)),\(String(coordinate.longitude)),\(Configuration.text(of: accuracy))"
        }
    }

    public enum Bus: String, Sendable, Equatable, CaseIterable {
        case system, session, none
    }

    public var sourceKind: SourceKind = .gpsd
    public var gpsdHost = "localhost"
    public var gpsdPort = "2947"
    /// Required when `sourceKind` is `.static`.
    public var staticPosition: StaticPosition?
    /// Metres; 0 means every fix is a move.
    public var distanceFilter: Double = 50
    /// Seconds without any data from gpsd before it is considered gone.
    public var gpsdTimeout: Double = 30
    public var databasePath = "/var/lib/placed/places.db"
    /// The durable selection log; by default `selections.db` beside the places database.
    public var selectionsPath: String?
    /// How many of the newest rankings a selection may come from.
    public var selectionGenerations = 3
    /// The language names are given in when a client asks for none ("sv", "sv-FI", "sv_FI.UTF-8"):
    /// a place's or street's `name:<language>` tag, else its `name` tag. Empty: the `name` tags.
    public var language = ""
    /// The zone opening hours are evaluated in (`Europe/Helsinki`, a file in /usr/share/zoneinfo, or a
    /// path); empty: `TZ`, else /etc/localtime (`HoursSettings`).
    public var timeZone = ""
    /// `PublicHolidays=`, `SchoolHolidays=`: dates and date ranges (`HoursSettings.parseDays`); empty:
    /// not known, so `PH`/`SH` rules leave the answer unknown where they would change it.
    public var publicHolidays = ""
    public var schoolHolidays = ""
    /// The ranker's factor on a place closed at the fix's time (`RankingModel.closedWeight`).
    public var closedWeight = RankingModel.defaultClosedWeight
    /// Members of this group (and root) may Select and Refresh, and read.
    public var writerGroup = "placed"
    /// Members of this group may read: the location, the rankings, the history, the markers.
    public var readerGroup = "placed-read"
    public var socketPath = "/run/placed/io.placed.Places"
    public var bus: Bus = .system
    /// Days after which a pick counts half.
    public var learningHalfLife: Double = LearningSettings.defaultHalfLife / 86_400
    /// α: the pseudo-count of the spatial model against the picks made near a fix.
    public var learningStrength: Double = LearningSettings.defaultStrength
    /// How much a pick made at the least similar time of week counts against one made at this time of
    /// week; 1: learning by place only.
    public var learningTimeFloor: Double = LearningSettings.defaultTimeFloor
    /// Metres and seconds a device stays for a visit.
    public var dwellRadius: Double = VisitSettings.standard.radius
    public var dwellTime: Double = VisitSettings.standard.dwellTime
    /// Select a visit's top place once its likelihood reaches this; nil: never.
    public var autoSelect: Double?
    /// `[OwnPlaces]`: metres a fix must be beyond an own place's boundary, besides its 95 % radius,
    /// and seconds it must stay so, before the device enters or leaves the place.
    public var boundaryMargin: Double = BoundarySettings().margin
    public var boundaryDwell: Double = BoundarySettings().dwell
    /// The least important messages logged: moves and rankings are `debug`.
    public var logLevel: LogPriority = .info
    /// `[Fleet]`: the MQTT fleet export; off without a broker.
    public var fleet = FleetSettings()
    public var configFile = "/etc/placed/placed.conf"

    public init() {}

    public var learningSettings: LearningSettings {
        LearningSettings(halfLife: learningHalfLife * 86_400, strength: learningStrength, timeFloor: learningTimeFloor)
    }

    public var boundarySettings: BoundarySettings {
        BoundarySettings(margin: boundaryMargin, dwell: boundaryDwell)
    }

    /// Visits end a forming stay after a silence as long as the one that makes gpsd count as gone.
    public var visitSettings: VisitSettings {
        VisitSettings(radius: dwellRadius, dwellTime: dwellTime, gapLimit: gpsdTimeout)
    }

    /// `HOST:PORT`, an IPv6 host in brackets, as `--gpsd` and `GPSD=` take it.
    public var gpsdEndpoint: String {
        gpsdHost.contains(":") ? "[\(gpsdHost)]:\(gpsdPort)" : "\(gpsdHost):\(gpsdPort)"
    }

    /// A number as a flag or key takes it: whole numbers without a fraction.
    static func text(of number: Double) -> String {
        number == number.rounded() && abs(number) < 1e15 ? String(Int(number)) : String(number)
    }

    public var resolvedSelectionsPath: String {
        if let selectionsPath { return selectionsPath }
        guard let slash = databasePath.lastIndex(of: "/") else { return "selections.db" }
        return String(databasePath[...slash]) + "selections.db"
    }

    /// The D-Bus to serve on, or nil for none.
    public var busAddress: PlacedSystem.Bus.Address? {
        switch bus {
        case .system: .system
        case .session: .session
        case .none: nil
        }
    }

    /// The source to start, or why the configuration names none.
    public func resolvedSource() throws(UsageError) -> Source {
        switch sourceKind {
        case .gpsd:
            return .gpsd(host: gpsdHost, port: gpsdPort)
        case .static:
            guard let staticPosition else {
                throw UsageError("a static source needs a position (StaticPosition= or --static LAT,LON[,ACC])")
            }
            return .fixed(staticPosition.coordinate, accuracy: staticPosition.accuracy)
        }
    }
}

/// A command line that cannot be understood: exit status 2.
public struct UsageError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// What the command line asks placed to do.
public enum PlacedCommand: Equatable {
    case run(Configuration)
    /// `--check-config`: print the configuration placed would run with, and exit.
    case check(Configuration)
    case help
    case version
}
