import FuzzSupport
import PlacedCore

@testable import PlacedOSM

/// One OSMData block as the import decodes it after inflating its blob: a PrimitiveBlock's bytes,
/// decoded into the collector that makes places and map features, then the collection finished
/// (ways resolved, multipolygons assembled, addresses matched). The blob and file framing around it
/// is fuzz-pbf's.
runFuzzer { input in
    let places = PlaceList()
    let features = MapFeatureList()
    var decoder = PrimitiveBlockDecoder()
    var collector = ExtractCollector(mapLayer: features, sink: places)
    do {
        try decoder.decode(input.raw, into: &collector)
        try collector.checkNodes()
        _ = try collector.finish()
    } catch {
        _ = "\(error)"
    }
}
