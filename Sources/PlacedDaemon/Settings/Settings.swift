import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// One thing placed can be told, described once: its key in the configuration file, its flag, its
/// help line, how a value is checked and applied, and whether SIGHUP applies a change. The flag
/// parser, the file parser, `--check-config`, the usage text and reload all read `Settings.all`.
public struct Setting: Sendable {
    public let section: String
    public let key: String
    /// The command-line flag (`--distance-filter`), if the setting has one.
    public let flag: String?
    /// What the flag's value looks like in the usage text: `M`, `HOST:PORT`.
    let placeholder: String
    /// One line for the usage text.
    let help: String
    public let reload: Reload
    /// The value in a configuration, as the file takes it; nil when unset.
    let value: @Sendable (Configuration) -> String?
    /// Checks `text` and sets it in the configuration, or says why not.
    let apply: @Sendable (_ text: String, _ origin: SettingOrigin, inout Configuration) throws(SettingError) -> Void
    /// What giving the flag sets besides the value (`--static` also selects the static source).
    var flagAlsoSets: (@Sendable (inout Configuration) -> Void)? = nil
    /// Whether the usage text shows the default value after the help line (not when the help says it).
    var usageShowsDefault = true

    /// Whether SIGHUP (`systemctl reload placed`) applies a changed value, or only a restart does.
    public enum Reload: Sendable {
        case applied
        case restart
    }

    /// The value in `configuration`, as `--check-config` prints it.
    public func value(in configuration: Configuration) -> String? { value(configuration) }
}

/// Where a value came from: a path from a flag is made absolute against the working directory, one
/// in a file must already be absolute (a file has no working directory).
public enum SettingOrigin: Sendable {
    case flag, file
}

/// Why a value was refused, phrased for a flag (`--bus must be system, session or none, not 'x'`) and
/// for a file key (`Bus=x: must be system, session or none`) from one description.
public struct SettingError: Error, Equatable, Sendable {
    enum Phrase: Sendable { case expects, mustBe, detail, plain }
    let phrase: Phrase
    let text: String

    /// `--distance-filter expects a number >= 0, not '-1'` / `must be a number >= 0`.
    static func expects(_ text: String) -> SettingError { SettingError(phrase: .expects, text: text) }
    /// `--bus must be system, session or none, not 'x'` / `must be system, session or none`.
    static func mustBe(_ text: String) -> SettingError { SettingError(phrase: .mustBe, text: text) }
    /// `--static: latitude must be within ±90 ..., not '91,0'` / `latitude must be within ±90 ...`.
    static func detail(_ text: String) -> SettingError { SettingError(phrase: .detail, text: text) }
    /// `--db needs a path` / `needs a path`.
    static func plain(_ text: String) -> SettingError { SettingError(phrase: .plain, text: text) }

    func message(flag: String, value: String) -> String {
        switch phrase {
        case .expects: "\(flag) expects \(text), not '\(value)'"
        case .mustBe: "\(flag) must be \(text), not '\(value)'"
        case .detail: "\(flag): \(text), not '\(value)'"
        case .plain: "\(flag) \(text)"
        }
    }

    var fileMessage: String {
        switch phrase {
        case .expects, .mustBe: "must be \(text)"
        case .detail, .plain: text
        }
    }
}

public enum Settings {
    /// Every setting, in the order of the configuration file and of `--check-config`.
    public static let all: [Setting] = daemon + fleet

    /// The daemon's own settings; the fleet export's `[Fleet]` rows are in Fleet/FleetSettingRows.swift.
    static let daemon: [Setting] = [
        Setting(
            section: "Location", key: "Source", flag: nil, placeholder: "",
            help: "gpsd, or static (then StaticPosition)",
            reload: .applied, value: { $0.sourceKind.rawValue }
        ) { text, _, c throws(SettingError) in
            guard let kind = Configuration.SourceKind(rawValue: text) else { throw .mustBe("gpsd or static") }
            c.sourceKind = kind
        },
        Setting(
            section: "Location", key: "GPSD", flag: "--gpsd", placeholder: "HOST:PORT", help: "read fixes from gpsd",
            reload: .applied, value: { $0.gpsdEndpoint },
            apply: { text, _, c throws(SettingError) in (c.gpsdHost, c.gpsdPort) = try parseEndpoint(text) },
            flagAlsoSets: { $0.sourceKind = .gpsd }),
        Setting(
            section: "Location", key: "GPSDTimeoutSec", flag: "--gpsd-timeout", placeholder: "S",
            help: "seconds of silence before gpsd counts as gone", reload: .applied,
            value: { Configuration.text(of: $0.gpsdTimeout) }
        ) { text, _, c throws(SettingError) in
            // At most a day: its microseconds must fit the loop's timers (1e14 s trapped at start).
            c.gpsdTimeout = try number(text, in: 0.1...86_400)
        },
        Setting(
            section: "Location", key: "StaticPosition", flag: "--static", placeholder: "LAT,LON[,ACC]",
            help: "a fixed position instead of gpsd (kiosks); ACC: 95 % radius, metres, default 10", reload: .applied,
            value: { $0.staticPosition?.text },
            apply: { text, _, c throws(SettingError) in c.staticPosition = try parseStatic(text) },
            flagAlsoSets: { $0.sourceKind = .static }, usageShowsDefault: false),
        Setting(
            section: "Location", key: "DistanceFilter", flag: "--distance-filter", placeholder: "M",
            help: "metres between moves; 0 = every fix", reload: .applied,
            value: { Configuration.text(of: $0.distanceFilter) }
        ) { text, _, c throws(SettingError) in
            c.distanceFilter = try number(text, minimum: 0)
        },
        Setting(
            section: "Places", key: "Database", flag: "--db", placeholder: "PATH", help: "places database",
            reload: .applied, value: { $0.databasePath }
        ) { text, origin, c throws(SettingError) in
            c.databasePath = try path(text, origin)
        },
        Setting(
            section: "Places", key: "Selections", flag: "--selections", placeholder: "PATH",
            help: "selection log (default: selections.db beside the places database)", reload: .restart,
            value: { $0.resolvedSelectionsPath },
            apply: { text, origin, c throws(SettingError) in c.selectionsPath = try path(text, origin) },
            usageShowsDefault: false),
        Setting(
            section: "Places", key: "SelectionGenerations", flag: nil, placeholder: "",
            help: "how many of the newest rankings a selection may come from", reload: .restart,
            value: { String($0.selectionGenerations) }
        ) { text, _, c throws(SettingError) in
            guard let n = Int(text), (1...100).contains(n) else { throw .mustBe("a whole number from 1 to 100") }
            c.selectionGenerations = n
        },
        Setting(
            section: "Places", key: "Language", flag: "--language", placeholder: "LANG",
            help: "language of the names when a client asks for none, e.g. sv or fi_FI.UTF-8 (default: name tags)",
            reload: .applied, value: { $0.language },
            apply: { text, _, c throws(SettingError) in
                // A language code or a POSIX locale, as clients send them; a typo is worth an error
                // here, where an operator chose it, while a client's language is only a preference.
                guard text.isEmpty || !LocalizedName.candidates(text).isEmpty else {
                    throw .mustBe("a language code such as sv or sv-FI, a locale such as sv_FI.UTF-8, or empty")
                }
                c.language = text
            }, usageShowsDefault: false),
        Setting(
            section: "Places", key: "TimeZone", flag: "--time-zone", placeholder: "ZONE",
            help: "zone opening hours are evaluated in, e.g. Europe/Helsinki (default: TZ, else /etc/localtime)",
            reload: .applied, value: { $0.timeZone },
            apply: { text, _, c throws(SettingError) in
                if !text.isEmpty {
                    do {
                        _ = try HoursSettings.zone(named: text)
                    } catch {
                        throw .detail("\(error): a zone such as Europe/Helsinki (in /usr/share/zoneinfo), or empty")
                    }
                }
                c.timeZone = text
            }, usageShowsDefault: false),
        Setting(
            section: "Places", key: "PublicHolidays", flag: nil, placeholder: "",
            help: "public holidays (PH in opening hours): YYYY-MM-DD dates and YYYY-MM-DD..YYYY-MM-DD ranges",
            reload: .applied, value: { $0.publicHolidays }, apply: holidays(\.publicHolidays),
            usageShowsDefault: false),
        Setting(
            section: "Places", key: "SchoolHolidays", flag: nil, placeholder: "",
            help: "school holidays (SH in opening hours), as PublicHolidays", reload: .applied,
            value: { $0.schoolHolidays }, apply: holidays(\.schoolHolidays), usageShowsDefault: false),
        Setting(
            section: "Places", key: "ClosedWeight", flag: nil, placeholder: "",
            help: "factor on a place closed at the fix's time by its opening hours, above 0 and at most 1 (1: hours "
                + "do not count)", reload: .applied, value: { Configuration.text(of: $0.closedWeight) }
        ) { text, _, c throws(SettingError) in
            let weight = try number(text, in: 0...1)
            guard weight > 0 else { throw .expects("a number above 0 and at most 1") }
            c.closedWeight = weight
        },
        Setting(
            section: "Learning", key: "LearningHalfLife", flag: nil, placeholder: "",
            help: "days after which a pick counts half", reload: .applied,
            value: { Configuration.text(of: $0.learningHalfLife) }
        ) { text, _, c throws(SettingError) in
            c.learningHalfLife = try number(text, in: LearningSettings.halfLifeRange.scaled(by: 1 / 86_400))
        },
        Setting(
            section: "Learning", key: "LearningStrength", flag: nil, placeholder: "",
            help: "pseudo-count of the spatial model against the picks made near a fix", reload: .applied,
            value: { Configuration.text(of: $0.learningStrength) }
        ) { text, _, c throws(SettingError) in
            c.learningStrength = try number(text, in: LearningSettings.strengthRange)
        },
        Setting(
            section: "Learning", key: "LearningTimeFloor", flag: nil, placeholder: "",
            help: "how much a pick made at another time of week still counts (1: time of week does not count)",
            reload: .applied, value: { Configuration.text(of: $0.learningTimeFloor) }
        ) { text, _, c throws(SettingError) in
            c.learningTimeFloor = try number(text, in: 0...1)
        },
        Setting(
            section: "Visits", key: "DwellRadius", flag: nil, placeholder: "",
            help: "metres the device stays within for a visit", reload: .applied,
            value: { Configuration.text(of: $0.dwellRadius) }
        ) { text, _, c throws(SettingError) in
            c.dwellRadius = try number(text, in: VisitSettings.radiusRange)
        },
        Setting(
            section: "Visits", key: "DwellTime", flag: nil, placeholder: "",
            help: "seconds the device stays before a visit starts", reload: .applied,
            value: { Configuration.text(of: $0.dwellTime) }
        ) { text, _, c throws(SettingError) in
            c.dwellTime = try number(text, in: VisitSettings.dwellTimeRange)
        },
        Setting(
            section: "Visits", key: "AutoSelect", flag: nil, placeholder: "",
            help: "no, or the likelihood at which a visit's top place is selected", reload: .applied,
            value: { $0.autoSelect.map(Configuration.text(of:)) ?? "no" }
        ) { text, _, c throws(SettingError) in
            if ["no", "off", "false"].contains(text) {
                c.autoSelect = nil
                return
            }
            let range = VisitPlaceTracker.thresholdRange
            guard let threshold = Double(text), range.contains(threshold) else {
                throw .mustBe(
                    "no, or a likelihood from \(Configuration.text(of: range.lowerBound)) to "
                        + "\(Configuration.text(of: range.upperBound))")
            }
            c.autoSelect = threshold
        },
        Setting(
            section: "OwnPlaces", key: "BoundaryMargin", flag: nil, placeholder: "",
            help: "metres beyond an own place's boundary, besides a fix's 95 % radius, to enter or leave it",
            reload: .applied, value: { Configuration.text(of: $0.boundaryMargin) }
        ) { text, _, c throws(SettingError) in
            c.boundaryMargin = try number(text, in: 0...1000)
        },
        Setting(
            section: "OwnPlaces", key: "BoundaryDwell", flag: nil, placeholder: "",
            help: "seconds fixes must stay beyond the boundary before the device enters or leaves",
            reload: .applied, value: { Configuration.text(of: $0.boundaryDwell) }
        ) { text, _, c throws(SettingError) in
            c.boundaryDwell = try number(text, in: 0...3600)
        },
        Setting(
            section: "Interfaces", key: "WriterGroup", flag: nil, placeholder: "",
            help: "members of this group (and root) may Select and Refresh", reload: .applied,
            value: { $0.writerGroup }
        ) { text, _, c throws(SettingError) in
            guard !text.isEmpty else { throw .plain("must name a group") }
            c.writerGroup = text
        },
        Setting(
            section: "Interfaces", key: "ReaderGroup", flag: nil, placeholder: "",
            help: "members of this group may read the location, rankings, history and markers", reload: .applied,
            value: { $0.readerGroup }
        ) { text, _, c throws(SettingError) in
            guard !text.isEmpty else { throw .plain("must name a group") }
            c.readerGroup = text
        },
        Setting(
            section: "Interfaces", key: "Bus", flag: "--bus", placeholder: "system|session|none",
            help: "D-Bus to serve on", reload: .restart, value: { $0.bus.rawValue }
        ) { text, _, c throws(SettingError) in
            guard let bus = Configuration.Bus(rawValue: text) else { throw .mustBe("system, session or none") }
            c.bus = bus
        },
        Setting(
            section: "Interfaces", key: "Socket", flag: "--socket", placeholder: "PATH", help: "varlink socket",
            reload: .restart, value: { $0.socketPath }
        ) { text, origin, c throws(SettingError) in
            c.socketPath = try path(text, origin)
        },
        Setting(
            section: "Logging", key: "LogLevel", flag: "--log-level", placeholder: "LEVEL",
            help: "err, warning, notice, info or debug (each move and ranking)", reload: .applied,
            value: { $0.logLevel.name }
        ) { text, _, c throws(SettingError) in
            guard let level = LogPriority(name: text) else { throw .mustBe("err, warning, notice, info or debug") }
            c.logLevel = level
        },
    ]

    /// The settings whose values differ between two configurations.
    public static func changed(from old: Configuration, to new: Configuration) -> [Setting] {
        all.filter { $0.value(old) != $0.value(new) }
    }

    // MARK: Values

    /// A finite number of at least `minimum`: the one number check behind flags and keys.
    static func number(_ text: String, minimum: Double) throws(SettingError) -> Double {
        guard let number = Double(text), number.isFinite, number >= minimum else {
            throw .expects("a number >= \(Configuration.text(of: minimum))")
        }
        return number
    }

    /// A finite number within `range`.
    static func number(_ text: String, in range: ClosedRange<Double>) throws(SettingError) -> Double {
        guard let number = Double(text), number.isFinite, range.contains(number) else {
            throw .expects(
                "a number from \(Configuration.text(of: range.lowerBound)) to \(Configuration.text(of: range.upperBound))"
            )
        }
        return number
    }

    /// A path from a flag, made absolute against the working directory now, as the files require
    /// their paths to be: what placed logs and `--check-config` prints then names one file.
    /// A holiday list's setter: its days checked now, the text kept.
    static func holidays(_ field: WritableKeyPath<Configuration, String> & Sendable)
        -> @Sendable (String, SettingOrigin, inout Configuration) throws(SettingError) -> Void
    {
        { text, _, c throws(SettingError) in
            do throws(HoursSettingError) {
                _ = try HoursSettings.parseDays(text)
            } catch {
                throw .detail(error.description)
            }
            c[keyPath: field] = text
        }
    }

    static func path(_ text: String, _ origin: SettingOrigin) throws(SettingError) -> String {
        guard !text.isEmpty else { throw .plain("needs a path") }
        if text.hasPrefix("/") { return text }
        guard origin == .flag else { throw .plain("must be an absolute path") }
        guard let directory = getcwd(nil, 0) else { throw .plain("\(text): no working directory") }
        defer { free(directory) }
        var base = String(cString: directory)
        if !base.hasSuffix("/") { base += "/" }
        return base + (text.hasPrefix("./") ? String(text.dropFirst(2)) : text)
    }

    /// HOST, HOST:PORT, [IPv6] or [IPv6]:PORT; nothing else, so that `gpsdEndpoint` prints it back.
    static func parseEndpoint(_ text: String) throws(SettingError) -> (host: String, port: String) {
        var host = text
        var port = "2947"
        var bracketed = false
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = String(text[text.index(after: text.startIndex)..<close])
            bracketed = true
            let after = text[text.index(after: close)...]
            if after.hasPrefix(":") {
                port = String(after.dropFirst())
            } else if !after.isEmpty {
                throw .expects("HOST:PORT or [IPv6]:PORT")
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = String(text[..<colon])
            port = String(text[text.index(after: colon)...])
        }
        guard !host.isEmpty, !host.contains(where: \.isWhitespace), bracketed || !host.contains(":") else {
            throw .expects("HOST:PORT or [IPv6]:PORT")
        }
        guard let number = Int(port), (1...65535).contains(number) else {
            throw .expects("HOST:PORT with a port from 1 to 65535")
        }
        return (host, port)
    }

    /// LAT,LON[,ACC]: degrees and metres.
    static func parseStatic(_ text: String) throws(SettingError) -> Configuration.StaticPosition {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { Double($0) }
        guard parts.count == 2 || parts.count == 3, let lat = parts[0], let lon = parts[1] else {
            throw .expects("LAT,LON[,ACC] in degrees and metres")
        }
        let coordinate = Coordinate(latitude: lat, longitude: lon)
        guard coordinate.isValid else {
            throw .detail("latitude must be within ±90 and longitude within ±180")
        }
        let accuracy = parts.count == 3 ? parts[2] : 10
        guard let accuracy, accuracy.isFinite, accuracy >= 0 else {
            throw .detail("accuracy must be a number of metres >= 0")
        }
        return Configuration.StaticPosition(coordinate: coordinate, accuracy: accuracy)
    }
}

extension ClosedRange<Double> {
    /// The range in other units: seconds as days.
    fileprivate func scaled(by factor: Double) -> ClosedRange<Double> { (lowerBound * factor)...(upperBound * factor) }
}
