import PlacedCore
import PlacedSystem

/// A configured position, for a kiosk without GPS: one report, on the loop iteration after the
/// start, through the same gate as gpsd's.
final class StaticSource: LocationSource {
    let name = "static"
    private let loop: EventLoop
    private let coordinate: Coordinate
    /// Metres, 1-sigma, as `StaticPosition=` states it.
    private let accuracy: Double
    private var delivery: EventSource?

    init(loop: EventLoop, coordinate: Coordinate, accuracy: Double) {
        self.loop = loop
        self.coordinate = coordinate
        self.accuracy = accuracy
    }

    func start(delivering sink: LocationSink) {
        sink.locationSource(self, changedTo: .static, reason: "a fixed position")
        // A report states its error as gpsd does, a 95 % radius: the gate turns it back into σ.
        let report = TPVReport(
            time: nil, mode: FixMode.twoD.rawValue, latitude: coordinate.latitude, longitude: coordinate.longitude,
            eph: Fix.radius95(fromSigma: accuracy))
        delivery = try? loop.onNextIteration { [unowned self, weak sink] in
            sink?.receive(report, at: loop.now)
            delivery = nil
        }
    }

    func stop() { delivery = nil }
}
