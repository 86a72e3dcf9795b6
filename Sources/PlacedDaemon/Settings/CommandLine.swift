/// placed's flags: one per setting that has one (`Settings.all`), plus the flags that are not
/// settings (`--config`, `--check-config`, `--help`, `--version`).
extension Configuration {
    /// The usage text, from the settings table.
    public static var usage: String {
        func line(_ flag: String, _ help: String) -> String {
            let padded = flag.count < 26 ? flag + String(repeating: " ", count: 26 - flag.count) : flag + " "
            return "  \(padded)\(help)"
        }
        let defaults = Configuration()
        var lines = [
            "usage: placed [OPTIONS]", "",
            "Ranks the places this device is most likely at, from gpsd fixes and OpenStreetMap data,",
            "and serves them over D-Bus and varlink. Flags override /etc/placed/placed.conf.", "", "options:",
        ]
        for setting in Settings.all {
            guard let flag = setting.flag else { continue }
            let value = setting.usageShowsDefault ? setting.value(in: defaults) : nil
            let help = setting.help + (value.map { " (default \($0))" } ?? "")
            lines.append(line("\(flag) \(setting.placeholder)", help))
        }
        lines += [
            line("--config FILE", "configuration file (default \(defaults.configFile))"),
            line("--check-config", "check the files and flags, print the result, exit (0 good, 1 bad)"),
            line("-h, --help", "show this help"),
            line("--version", "show the version"),
        ]
        return lines.joined(separator: "\n")
    }

    /// Parses placed's flags over `base` (the configuration so far).
    public static func parse(_ arguments: [String], over base: Configuration = Configuration())
        throws(UsageError) -> PlacedCommand
    {
        var configuration = base
        var checkOnly = false
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            // Accept both "--flag value" and "--flag=value".
            var flag = argument
            if argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") {
                flag = String(argument[..<eq])
                rest.insert(String(argument[argument.index(after: eq)...]), at: rest.startIndex)
            }
            // Every flag is a key of the file too, and `--check-config` prints the value on a line of
            // the file: a value no line can hold as it stands would print a different configuration.
            func value() throws(UsageError) -> String {
                guard let value = rest.popFirst() else { throw UsageError("\(flag) needs a value") }
                guard !value.unicodeScalars.contains(where: { $0 == "\n" || $0 == "\r" }),
                    value.trimmingWhitespace() == value
                else {
                    throw UsageError("\(flag) expects one line without surrounding blanks, not '\(value)'")
                }
                return value
            }
            switch flag {
            case "-h", "--help": return .help
            case "--version": return .version
            case "--check-config": checkOnly = true
            case "--config":
                let text = try value()
                do {
                    configuration.configFile = try Settings.path(text, .flag)
                } catch {
                    throw UsageError(error.message(flag: flag, value: text))
                }
            default:
                guard let setting = Settings.all.first(where: { $0.flag == flag }) else {
                    throw UsageError("unknown option '\(argument)'")
                }
                let text = try value()
                do {
                    try setting.apply(text, .flag, &configuration)
                } catch {
                    throw UsageError(error.message(flag: flag, value: text))
                }
                setting.flagAlsoSets?(&configuration)
            }
        }
        return checkOnly ? .check(configuration) : .run(configuration)
    }
}
