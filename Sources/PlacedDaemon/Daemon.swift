import PlacedCore
import PlacedSystem
import PlacedGPS
import PlacedStore

/// Namespace for the daemon.
public enum Daemon {}
