import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Everything placed can be told, with its defaults. Filled from the config file, then overridden
/// by command-line flags.
public struct Configuration: Sendable, Equatable {
    public enum Source: Sendable, Equatable {
        case gpsd(host: String, port: String)
        case fixed(Coordinate, accuracy: Double)
    }

    public enum SourceKind: String, Sendable, Equatable {
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

    public enum Bus: String, Sendable, Equatable {
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
    /// Members of this group (and root) may Select and Refresh.
    public var writerGroup = "placed"
    public var socketPath = "/run/placed/io.placed.Places"
    public var bus: Bus = .system
    public var configFile = "/etc/placed/placed.conf"

    public init() {}

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

public enum PlacedCommand: Equatable {
    case run(Configuration)
    /// `--check-config`: print the configuration placed would run with, and exit.
    case check(Configuration)
    case help
    case version
}

extension Configuration {
    public static let usage = """
        usage: placed [OPTIONS]

        Ranks the places this device is most likely at, from gpsd fixes and OpenStreetMap data,
        and serves them over D-Bus and varlink. Flags override /etc/placed/placed.conf.

        options:
          --gpsd HOST:PORT          read fixes from gpsd (default localhost:2947)
          --static LAT,LON[,ACC]    a fixed position instead of gpsd (kiosks); ACC: 1-sigma metres (default 10)
          --distance-filter M       metres between moves (default 50; 0 = every fix)
          --gpsd-timeout S          seconds of silence before gpsd counts as gone (default 30)
          --db PATH                 places database (default /var/lib/placed/places.db)
          --selections PATH         selection log (default: selections.db beside the places database)
          --socket PATH             varlink socket (default /run/placed/io.placed.Places)
          --bus system|session|none D-Bus to serve on (default system)
          --config FILE             configuration file (default /etc/placed/placed.conf)
          --check-config            check the files and flags, print the result, exit (0 good, 1 bad)
          -h, --help                show this help
          --version                 show the version
        """

    /// Parses placed's flags over `base` (the configuration so far).
    public static func parse(_ arguments: [String], over base: Configuration = Configuration())
        throws(UsageError)
        -> PlacedCommand
    {
        var configuration = base
        var checkOnly = false
        var rest = arguments[...]
        func value(for flag: String) throws(UsageError) -> String {
            guard let v = rest.popFirst() else { throw UsageError("\(flag) needs a value") }
            return v
        }
        while let argument = rest.popFirst() {
            // Accept both "--flag value" and "--flag=value".
            var flag = argument
            if argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") {
                flag = String(argument[..<eq])
                rest.insert(String(argument[argument.index(after: eq)...]), at: rest.startIndex)
            }
            switch flag {
            case "-h", "--help":
                return .help
            case "--version":
                return .version
            case "--check-config":
                checkOnly = true
            case "--gpsd":
                (configuration.gpsdHost, configuration.gpsdPort) = try parseEndpoint(try value(for: flag))
                configuration.sourceKind = .gpsd
            case "--static":
                configuration.staticPosition = try parseStatic(try value(for: flag))
                configuration.sourceKind = .static
            case "--distance-filter":
                configuration.distanceFilter = try parseNumber(try value(for: flag), flag, minimum: 0)
            case "--gpsd-timeout":
                configuration.gpsdTimeout = try parseNumber(try value(for: flag), flag, minimum: 0.1)
            case "--db":
                configuration.databasePath = try absolutePath(try value(for: flag), flag)
            case "--selections":
                configuration.selectionsPath = try absolutePath(try value(for: flag), flag)
            case "--socket":
                configuration.socketPath = try absolutePath(try value(for: flag), flag)
            case "--bus":
                let name = try value(for: flag)
                guard let bus = Bus(rawValue: name) else {
                    throw UsageError("--bus must be system, session or none, not '\(name)'")
                }
                configuration.bus = bus
            case "--config":
                configuration.configFile = try absolutePath(try value(for: flag), flag)
            default:
                throw UsageError("unknown option '\(argument)'")
            }
        }
        return checkOnly ? .check(configuration) : .run(configuration)
    }

    /// A path from a flag, made absolute against the working directory now, as the files require
    /// their paths to be: what placed logs and `--check-config` prints then names one file.
    static func absolutePath(_ path: String, _ flag: String) throws(UsageError) -> String {
        guard !path.isEmpty else { throw UsageError("\(flag) needs a path") }
        if path.hasPrefix("/") { return path }
        guard let directory = getcwd(nil, 0) else { throw UsageError("\(flag) \(path): no working directory") }
        defer { free(directory) }
        var base = String(cString: directory)
        if !base.hasSuffix("/") { base += "/" }
        return base + (path.hasPrefix("./") ? String(path.dropFirst(2)) : path)
    }

    static func parseEndpoint(_ text: String) throws(UsageError) -> (host: String, port: String) {
        // HOST, HOST:PORT, or [IPv6]:PORT
        var host = text
        var port = "2947"
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = String(text[text.index(after: text.startIndex)..<close])
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":") { port = String(after.dropFirst()) }
        } else if let colon = text.lastIndex(of: ":") {
            host = String(text[..<colon])
            port = String(text[text.index(after: colon)...])
        }
        guard !host.isEmpty, let number = Int(port), (1...65535).contains(number) else {
            throw UsageError("--gpsd expects HOST:PORT with a port from 1 to 65535, not '\(text)'")
        }
        return (host, port)
    }

    static func parseStatic(_ text: String) throws(UsageError) -> StaticPosition {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { Double($0) }
        guard parts.count == 2 || parts.count == 3, let lat = parts[0], let lon = parts[1] else {
            throw UsageError("--static expects LAT,LON[,ACC] in degrees and metres, not '\(text)'")
        }
        let coordinate = Coordinate(latitude: lat, longitude: lon)
        guard coordinate.isValid else {
            throw UsageError(
                "--static: latitude must be within ±90 and longitude within ±180, not '\(text)'")
        }
        let accuracy = parts.count == 3 ? parts[2] : 10
        guard let accuracy, accuracy.isFinite, accuracy >= 0 else {
            throw UsageError("--static: accuracy must be a number of metres >= 0, not '\(text)'")
        }
        return StaticPosition(coordinate: coordinate, accuracy: accuracy)
    }

    /// A finite number of at least `minimum`, or nil: the one check behind flags and config keys.
    static func number(_ text: String, minimum: Double) -> Double? {
        guard let number = Double(text), number.isFinite, number >= minimum else { return nil }
        return number
    }

    static func parseNumber(_ text: String, _ flag: String, minimum: Double) throws(UsageError)
        -> Double
    {
        guard let number = number(text, minimum: minimum) else {
            throw UsageError(
                "\(flag) expects a number >= \(Configuration.text(of: minimum)), not '\(text)'"
            )
        }
        return number
    }
}
