import CSystemd

/// The service manager's notification socket (sd_notify). Every call is a no-op without
/// $NOTIFY_SOCKET, so placed runs the same in a terminal.
public enum ServiceNotifier {
    /// Sends a preformatted state string: sd_notifyf is variadic, so formatting happens in Swift.
    @discardableResult
    public static func notify(_ state: String) -> Bool {
        sd_notify(0, state) > 0
    }

    public static func ready(status: String) { notify("READY=1\nSTATUS=\(status)") }
    public static func status(_ text: String) { notify("STATUS=\(text)") }
    public static func reloading() { notify("RELOADING=1\nSTATUS=Reloading") }
    public static func stopping() { notify("STOPPING=1\nSTATUS=Shutting down") }
}
