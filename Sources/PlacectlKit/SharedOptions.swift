import PlacedCore

/// Options several placectl commands take, declared once.
extension Option {
    public static let json = Option.flag(
        "json", help: "print the daemon's reply as one JSON document (watch: one object per line)")

    public static let limit = Option.value("limit", "N", short: "n", help: "how many places (default 5, at most 20)")

    public static let language = Option.value(
        "language", "LANG", help: "language of the names, e.g. sv or fi_FI.UTF-8 (default: the locale, LANG)")

    public static let fields = Option.value(
        "fields", "LIST",
        help:
            "the place keys to show, comma-separated (e.g. id,name,open_now,phone; * for all; default: the standard keys)"
    )

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

/// The reader's language: what placectl asks placed to name places and streets in.
public enum ReaderLanguage {
    /// `--language` as given (even "C", which asks for the name tags), else the messages locale as
    /// POSIX ranks the variables (`LC_ALL`, `LC_MESSAGES`, `LANG`) when it names a language; nil
    /// ("C", "POSIX", "C.UTF-8" or unset): placed's own `Language=`.
    public static func chosen(option: String?, environment: [String: String]) -> String? {
        if let option { return option }
        guard
            let locale = ["LC_ALL", "LC_MESSAGES", "LANG"].lazy.compactMap({ environment[$0] }).first(where: {
                !$0.isEmpty
            })
        else { return nil }
        return LocalizedName.candidates(locale).isEmpty ? nil : locale
    }
}

/// `--fields a,b` → ["a", "b"] (spaces around the names dropped); nil when not given. An empty list goes
/// to placed as given, which names it (`InvalidField`).
public func fieldList(_ option: String?) -> [String]? {
    option.map { text in
        text.split(separator: ",", omittingEmptySubsequences: true).map {
            String($0.drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
        }
    }
}

/// placectl's version, for `--version`.
public let placectlVersion = "0.1.0"
