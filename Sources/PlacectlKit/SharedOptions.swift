/// Options several placectl commands take, declared once.
extension Option {
    public static let json = Option.flag(
        "json", help: "print the daemon's reply as one JSON document (watch: one object per line)")

    public static let limit = Option.value("limit", "N", short: "n", help: "how many places (default 5, at most 20)")

    public static let table = Option.flag("table", help: "watch: each ranking's places as a table under its line")
    public static let version = Option.flag("version", help: "show placectl's version")

    /// How to reach placed: its varlink socket (the default) or D-Bus.
    public static let connection: [Option] = [
        .value("socket", "PATH", help: "placed's varlink socket (default \(Endpoint.defaultSocketPath))"),
        .flag("bus", help: "use D-Bus instead of the socket (the system bus unless told otherwise)"),
        .flag("system", help: "D-Bus: the system bus ($DBUS_SYSTEM_BUS_ADDRESS if set)"),
        .flag("user", help: "D-Bus: the user's session bus"),
        .value("address", "ADDR", help: "D-Bus: the bus at ADDR, e.g. unix:path=/run/dbus/system_bus_socket"),
    ]

    /// The group title `--help` shows the connection options under.
    public static let connectionGroup = (title: "connection", options: connection)
}

/// placectl's version, for `--version`.
public let placectlVersion = "0.1.0"
