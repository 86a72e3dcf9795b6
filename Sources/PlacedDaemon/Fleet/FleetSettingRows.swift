import PlacedFleet

/// The `[Fleet]` rows of the one settings table (`Settings.all`): each key is parsed by
/// `FleetSettings.set(_:to:)`, and the keys are checked together once the files and flags are read
/// (`Configuration.validateFleet`). No `Broker=`: fleet export is off.
extension Settings {
    static let fleet: [Setting] = [
        row("Broker", "mqtt:// or mqtts:// URLs, tried in turn; appends, an empty value clears; none: export off"),
        row("DeviceId", "the device's name in topics and message ids (default: derived from the machine id)"),
        row("CAFile", "PEM file of the CAs that may sign an mqtts:// broker's certificate (default: the system's)"),
        row("CertFile", "client certificate (PEM), with KeyFile"),
        row("KeyFile", "client certificate's key (PEM), with CertFile"),
        row("Username", "MQTT user name"),
        row("PasswordCredential", "name of the systemd credential holding the password (LoadCredential=)"),
        row("KeepAlive", "seconds between pings on an idle connection (5-65535)"),
        row("Protocol", "MQTT 3.1.1 or 5"),
        row("OwnTracks", "also publish OwnTracks location and transition messages"),
        row("OwnTracksUser", "the user part of owntracks/USER/DEVICE"),
        row("Backlog", "most events kept while no broker is reachable; past it the oldest location updates go"),
        row("AcceptCommands", "apply own places the fleet sends on placed/DEVICE/cmd (and OwnTracks setWaypoints)"),
    ]

    private static func row(_ key: String, _ help: String) -> Setting {
        Setting(
            section: "Fleet", key: key, flag: nil, placeholder: "", help: help, reload: .applied,
            value: { $0.fleet.text(of: key) }
        ) { text, _, c throws(SettingError) in
            do throws(FleetSettingsError) {
                try c.fleet.set(key, to: text)
            } catch {
                switch error {
                case let .invalid(_, reason): throw .plain(reason)
                default: throw .plain(error.description)
                }
            }
        }
    }
}

extension Configuration {
    /// The `[Fleet]` keys checked together (a certificate without its key, a password over plain MQTT to
    /// a remote broker, ...), once every file and flag is read.
    public func validateFleet() throws(ConfigError) {
        do {
            try fleet.validate()
        } catch {
            throw ConfigError(file: configFile, line: 0, message: error.description)
        }
    }
}
