import PlacedCore
import PlacedSystem

/// A configured position, for a kiosk without GPS: one report, on the loop iteration after the
/// start, through the same gate as gpsd's.
final class StaticSource: LocationSource {
    let name = "static"
    private let loop: EventLoop
    private let coordinate: Coordinate
    /// Metres: the 95 % radius, as `StaticPosition=` states it (and gpsd its eph).
    private let accuracy: Double
    private var delivery: EventSource?

    init(loop: EventLoop, coordinate: Coordinate, accuracy: Double) {
        self.loop = loop
        self.coordinate = coordinate
        self.accuracy = accuracy
    }

    func start(delivering sink: LocationSink) {
        sink.locationSource(self, changedTo: .static, reason: "a fixed position")
        // The accuracy is a 95 % radius, as gpsd's eph: the gate turns it into σ.
        let report = TPVReport(
            time: nil, mode: FixMode.twoD.rawValue, latitude: coordinate.latitude, longitude: coordinate.longitude,
            eph: accuracy)
        delivery = try? loop.onNextIteration { [unowned self, weak sink] in
            sink?.receive(report, at: loop.now)
            delivery = nil
        }
    }

    func stop() { delivery = nil }
}
