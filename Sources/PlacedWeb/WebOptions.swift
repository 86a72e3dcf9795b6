/// placed-web's command line: `placed-web [--socket PATH] [--listen ADDRESS:PORT] ...`.
public struct WebOptions: Equatable, Sendable {
    public var socketPath = "/run/placed/io.placed.Places"
    public var listen = ListenAddress(host: "127.0.0.1", port: 8080, family: .ipv4)
    /// The page: index.html, app.js, app.css, favicon.svg.
    public var webDirectory = "/usr/share/placed/web"
    /// Debian's libjs-leaflet.
    public var leafletDirectory = "/usr/share/javascript/leaflet"
    /// Open HTTP connections at once, event streams included.
    public var maximumConnections = 32
    /// Pages following the live events at once.
    public var maximumEventClients = 8
    public var help = false
    public var version = false

    public init() {}

    public struct UsageError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    public static let usage = """
        Usage: placed-web [OPTIONS]
        Serves the kiosk page (map, likely places, tap to select) over HTTP, as a varlink client of placed.

          --socket PATH           placed's varlink socket (default /run/placed/io.placed.Places)
          --listen ADDRESS:PORT   where to serve (default 127.0.0.1:8080; [::1]:8080 for IPv6);
                                  a socket passed by systemd (placed-web.socket) takes precedence
          --web-dir DIR           the page's files (default /usr/share/placed/web)
          --leaflet-dir DIR       Leaflet (default /usr/share/javascript/leaflet, Debian's libjs-leaflet)
          --max-connections N     open HTTP connections at once (default 32)
          --max-event-clients N   pages following live events at once (default 8)
          --help, --version

        """

    public init(arguments given: [String]) throws(UsageError) {
        // --flag=value is --flag value.
        let arguments = given.flatMap { argument -> [String] in
            guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return [argument] }
            return [String(argument[..<equals]), String(argument[argument.index(after: equals)...])]
        }
        var index = 0
        func value(_ flag: String) throws(UsageError) -> String {
            index += 1
            guard index < arguments.count else { throw UsageError(description: "\(flag) needs a value") }
            return arguments[index]
        }
        func count(_ flag: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int {
            let text = try value(flag)
            guard let number = Int(text), range.contains(number) else {
                throw UsageError(
                    description: "\(flag) \(text): expected a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        while index < arguments.count {
            let flag = arguments[index]
            switch flag {
            case "--socket":
                socketPath = try value(flag)
                guard !socketPath.isEmpty else { throw UsageError(description: "--socket needs a path") }
            case "--listen":
                let text = try value(flag)
                do {
                    listen = try ListenAddress(parsing: text)
                } catch {
                    throw UsageError(description: "--listen \(error.description)")
                }
            case "--web-dir": webDirectory = try value(flag)
            case "--leaflet-dir": leafletDirectory = try value(flag)
            case "--max-connections": maximumConnections = try count(flag, 2...1024)
            case "--max-event-clients": maximumEventClients = try count(flag, 1...256)
            case "--help", "-h": help = true
            case "--version": version = true
            default:
                throw UsageError(
                    description: flag.hasPrefix("-") ? "unknown option \(flag)" : "unexpected argument \(flag)")
            }
            index += 1
        }
        guard maximumEventClients < maximumConnections else {
            throw UsageError(
                description: "--max-event-clients must be below --max-connections (pages need to load too)")
        }
    }
}
