import PlacedCore
import CZlib

/// Namespace for .osm.pbf reading (see PBFReader).
public enum OSM {}
