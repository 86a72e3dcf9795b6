#if canImport(Glibc)
    import Glibc
#endif

/// Reads placed's configuration as it runs with it: the file, its drop-ins, then the flags, which
/// win. The same loader reads it again on SIGHUP, with the same flags.
public struct ConfigurationLoader: Sendable {
    public let arguments: [String]

    public init(arguments: [String]) { self.arguments = arguments }

    /// Flags are read twice: first to find `--config`, then over the loaded file, so flags win. A
    /// mistake in the flags is a `UsageError`, one in the files a `ConfigError`.
    public func command() throws -> PlacedCommand {
        let flagsOnly: Configuration
        switch try Configuration.parse(arguments) {
        case .run(let c), .check(let c): flagsOnly = c
        case let other: return other
        }
        var base = Configuration()
        let explicit = arguments.contains { $0 == "--config" || $0.hasPrefix("--config=") }
        if explicit, access(flagsOnly.configFile, F_OK) != 0 {
            throw UsageError("--config: \(flagsOnly.configFile): no such file")
        }
        try ConfigFile.load(flagsOnly.configFile, into: &base)
        base.configFile = flagsOnly.configFile
        let command = try Configuration.parse(arguments, over: base)
        switch command {
        case .run(let c), .check(let c): try c.validateFleet()
        case .help, .version: break
        }
        return command
    }

    /// The configuration to run with, read again (SIGHUP).
    public func reload() throws -> Configuration {
        switch try command() {
        case .run(let configuration), .check(let configuration): return configuration
        case .help, .version: throw UsageError("the flags no longer name a configuration")
        }
    }
}
