import PlacedCore
import CSQLite

/// Namespace for the SQLite store.
public enum Store {}
