/// What the location source is doing, as clients see it (`SourceState` on D-Bus, `Status` on varlink).
public enum SourceState: String, Sendable, Equatable {
    /// Connecting, or waiting to reconnect, to gpsd.
    case connecting
    /// Connected, but gpsd reports no usable fix.
    case noFix = "no-fix"
    /// Fixes are arriving.
    case fix
    /// gpsd went away or silent; the last location and ranking are kept but old.
    case stale
    /// A configured position (kiosks without GPS).
    case `static`
}
