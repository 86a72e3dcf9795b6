import PlacedCore
import PlacedSystem
import CGPS

/// Namespace for the gpsd source.
public enum GPS {}
