import FuzzSupport
import PlacedCore
import PlacedOSM

/// A whole .osm.pbf file as `placectl import` reads it: blob framing, headers, zlib, the blocks and
/// the places and map layer collected from them, read in one pass (the two-pass import's disk-backed
/// structures are for files of hundreds of MB).
private let directory = makeScratchDirectory("placed-fuzz-pbf")
private let path = directory + "/input.osm.pbf"

runFuzzer { input in
    writeFile(path, input.raw)
    do {
        let extract = try OSM.extractPlaces(path: path, mapLayer: true, passes: .one)
        _ = extract.places.count + (extract.features?.count ?? 0)
    } catch {
        _ = "\(error)"
    }
}
