import FuzzSupport
import PlacedCore
import PlacedJSON
import PlacedWire

/// A GeoJSON document as `placectl own import` and PutPlaces read it: all of it checked, or a named
/// error. What reads is written back (`own export`) and must read back as the same places.
runFuzzer { input in
    guard let places = try? OwnPlace.readCollection(input.bytes) else { return }
    guard let written = try? OwnPlace.collection(places).encoded() else {
        fatalError("own export cannot write what own import read (a number that is not finite)")
    }
    guard let again = try? OwnPlace.readCollection(written) else {
        fatalError("own export wrote what own import refuses: \(String(decoding: written, as: UTF8.self))")
    }
    if again.sorted(by: { $0.id < $1.id }) != places.sorted(by: { $0.id < $1.id }) {
        fatalError("own export and import changed the places")
    }
}
