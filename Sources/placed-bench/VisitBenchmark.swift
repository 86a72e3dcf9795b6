// placed-bench visits: does VisitDetector find the stops of a drive, and only those?
//
// Drives are generated at 1 Hz: legs at 8-14 m/s, traffic stops of 5-59 s, stop-and-go jams of 1-3
// minutes (standing 5-20 s, creeping 3-8 s at about 1 m/s), and visit stops of 2-20 minutes, each
// approached slowly (parking) and spent wandering up to 20 m. The fixes carry GPS noise correlated over
// about 20 s (AR(1), sigma 2-6 m per drive, 8-12 m for a third of them, stated with a 20 % error), stray
// multipath jumps of 30-80 m (2 % of fixes, 1-3 s each), speed noise, and one silence of 5-25 s per
// drive (shorter than the gpsd timeout), half of them inside a visit. The detector is fed every fix, as
// the daemon feeds it.
#if canImport(Glibc)
    import Glibc
#endif
import PlacedCore
import PlacedTestSupport

func visitBenchmark(_ arguments: [String]) throws {
    var seed: UInt64 = 2
    var drives = 300
    var settings = VisitSettings.standard
    var rest = arguments[...]
    while let flag = rest.popFirst() {
        guard let value = rest.popFirst() else { throw BenchmarkUsage(VisitBenchmarkUsage.text) }
        switch flag {
        case "--seed":
            guard let n = UInt64(value) else { throw BenchmarkUsage(VisitBenchmarkUsage.text) }
            seed = n
        case "--drives":
            guard let n = Int(value), n > 0 else { throw BenchmarkUsage(VisitBenchmarkUsage.text) }
            drives = n
        case "--speed":
            guard let v = Double(value) else { throw BenchmarkUsage(VisitBenchmarkUsage.text) }
            settings.maximumSpeed = v
        default: throw BenchmarkUsage(VisitBenchmarkUsage.text)
        }
    }
    print(
        "visits: \(drives) generated drives, seed \(seed)"
            + (seed == SnapOptions.tuningSeed
                ? " (the tuning seed)" : " (held out: tuned on seed \(SnapOptions.tuningSeed))")
            + "; dwell \(Int(settings.radius)) m for \(Int(settings.dwellTime)) s at <= "
            + "\(settings.maximumSpeed.formatted(decimals: 1)) m/s, departure after \(Int(settings.departureTime)) s outside, "
            + "gaps up to \(Int(settings.gapLimit)) s")

    try detectVisits(seed: seed, drives: drives, settings: settings, jams: false)
    print("\nthe same with stop-and-go jams (1-3 min, about 0.35 m/s on average) as a sixth of the stops:")
    try detectVisits(seed: seed &+ 1_000, drives: drives, settings: settings, jams: true)
}

private func detectVisits(seed: UInt64, drives: Int, settings: VisitSettings, jams: Bool) throws {
    var rng = SplitMix64(seed: seed &* 0xD1B5_4A32_D192_ED03 &+ 0x715)
    var truths = 0, trafficStops = 0, jamCount = 0, detected = 0, matched = 0, traffic = 0, atJams = 0
    var startDelays: [Double] = [], arrivalErrors: [Double] = [], endDelays: [Double] = [],
        durationErrors: [Double] = []
    var centreErrors: [Double] = []
    var fixes = 0
    var detectorSeconds = 0.0
    for _ in 0..<drives {
        let drive = Drive(&rng, jams: jams)
        truths += drive.stops.count
        trafficStops += drive.trafficStops.count
        jamCount += drive.jams.count
        fixes += drive.fixes.count
        var detector = try VisitDetector(settings: settings)
        var claimed = Set<Int>()
        var open: (visit: PlacedCore.Visit, stop: Int?)?
        let start = BenchClock.now()
        var events: [(event: VisitEvent, at: UInt64)] = []
        for fix in drive.fixes {
            for event in detector.consider(fix) { events.append((event, fix.receivedAt)) }
        }
        detectorSeconds += BenchClock.seconds(since: start)
        for (event, at) in events {
            switch event {
            case .started(let visit):
                detected += 1
                let stop = drive.stops.indices.first { i in
                    let s = drive.stops[i]
                    return !claimed.contains(i) && visit.startedAt + 30_000_000 >= s.arrive
                        && visit.startedAt <= s.depart
                        && Geodesy.distance(visit.centre, s.position) <= 50
                }
                if let stop {
                    claimed.insert(stop)
                    matched += 1
                    let s = drive.stops[stop]
                    startDelays.append(Double(at - s.arrive) / 1e6)
                    arrivalErrors.append((Double(visit.startedAt) - Double(s.arrive)) / 1e6)
                    centreErrors.append(Geodesy.distance(visit.centre, s.position))
                } else if drive.trafficStops.contains(where: {
                    visit.startedAt + 60_000_000 >= $0.arrive && visit.startedAt <= $0.depart
                }) {
                    traffic += 1
                } else if drive.jams.contains(where: {
                    visit.startedAt + 60_000_000 >= $0.arrive && visit.startedAt <= $0.depart
                }) {
                    atJams += 1
                }
                open = (visit, stop)
            case .ended(let visit):
                if let o = open, o.visit.id == visit.id, let stop = o.stop {
                    let s = drive.stops[stop]
                    endDelays.append((Double(at) - Double(s.depart)) / 1e6)
                    durationErrors.append(visit.duration - Double(s.depart - s.arrive) / 1e6)
                }
                open = nil
            }
        }
    }
    let recall = Double(matched) / Double(truths), precision = detected > 0 ? Double(matched) / Double(detected) : 0
    print(
        "\(truths) visit stops (2-20 min), \(trafficStops) traffic stops (< 60 s), \(jamCount) jams, \(fixes.grouped) fixes; "
            + "\(detected) visits detected, \(matched) matching a stop, \(traffic) at a traffic stop, \(atJams) at a jam"
    )
    let goal = jams ? "" : " (goal >= 0.95)"
    print("recall \(recall.formatted(decimals: 3))\(goal), precision \(precision.formatted(decimals: 3))\(goal)")
    func summary(_ values: [Double]) -> String {
        guard !values.isEmpty else { return "-" }
        let sorted = values.sorted()
        func at(_ q: Double) -> Double { sorted[min(sorted.count - 1, Int(q * Double(sorted.count)))] }
        return
            "p50 \(at(0.5).formatted(decimals: 1)) p95 \(at(0.95).formatted(decimals: 1)) max \(sorted.last!.formatted(decimals: 1))"
    }
    print(
        "delay from true arrival to VisitStarted, s: \(summary(startDelays)) (dwell time \(Int(settings.dwellTime)) s)")
    print("visit start time minus true arrival, s: \(summary(arrivalErrors))")
    print(
        "delay from true departure to VisitEnded, s: \(summary(endDelays)) (departure time \(Int(settings.departureTime)) s)"
    )
    print("visit duration minus true stay, s: \(summary(durationErrors))")
    print("visit centre to stop, m: \(summary(centreErrors))")
    print("detector time per fix: \((detectorSeconds / Double(fixes) * 1e6).formatted(decimals: 2)) us")
}

private enum VisitBenchmarkUsage {
    static let text = """
        usage: placed-bench visits [--seed N] [--drives N] [--speed M/S]
          --seed    random seed (default 2, held out; the detector was tuned on 1)
          --drives  drives generated (default 300)
          --speed   the dwell speed limit to try (default VisitSettings.standard's)
        """
}

/// One generated drive: its fixes and what really happened.
private struct Drive {
    struct Stop {
        var position: Coordinate
        /// Monotonic microseconds.
        var arrive: UInt64
        var depart: UInt64
    }
    var fixes: [Fix] = []
    var stops: [Stop] = []
    var trafficStops: [Stop] = []
    var jams: [Stop] = []

    init(_ rng: inout SplitMix64, jams withJams: Bool) {
        let origin = Coordinate(latitude: 60.17, longitude: 24.94)
        let plane = LocalProjection(origin: origin)
        var east = rng.uniform(in: -2000...2000), north = rng.uniform(in: -2000...2000)
        var heading = rng.uniform(in: 0...(2 * .pi))
        // A third of the drives in a street canyon: 8-12 m.
        let noise = rng.next() % 3 == 0 ? rng.uniform(in: 8...12) : rng.uniform(in: 2...6)
        let stated = noise * rng.uniform(in: 0.8...1.2)
        var errorEast = noise * rng.gaussian(), errorNorth = noise * rng.gaussian()
        var second: UInt64 = 1_000
        // Fixes are 1 s apart; one silence a drive.
        var truth: [(east: Double, north: Double, speed: Double)] = []

        func drive(_ seconds: Int, speed: ClosedRange<Double>, _ rng: inout SplitMix64) {
            var v = rng.uniform(in: speed)
            for _ in 0..<seconds {
                heading += rng.gaussian() * 0.05
                v = min(speed.upperBound, max(speed.lowerBound, v + rng.gaussian() * 0.3))
                east += v * sin(heading)
                north += v * cos(heading)
                truth.append((east, north, v))
            }
        }
        func stay(_ seconds: Int, wander: Double, _ rng: inout SplitMix64) {
            let centre = (east, north)
            for _ in 0..<seconds {
                if wander > 0 {
                    east += rng.gaussian() * 0.3
                    north += rng.gaussian() * 0.3
                    let dx = east - centre.0, dy = north - centre.1, r = (dx * dx + dy * dy).squareRoot()
                    if r > wander {
                        east = centre.0 + dx * wander / r
                        north = centre.1 + dy * wander / r
                    }
                }
                truth.append((east, north, 0))
            }
        }

        func jam(_ seconds: Int, _ rng: inout SplitMix64) {
            // Stop and go: standing 5-20 s, then creeping 3-10 m.
            var left = seconds
            while left > 0 {
                let standing = min(left, Int(rng.uniform(in: 5...20)))
                stay(standing, wander: 0, &rng)
                left -= standing
                let creeping = min(left, Int(rng.uniform(in: 3...8)))
                if creeping > 0 { drive(creeping, speed: 0.8...1.5, &rng) }
                left -= creeping
            }
        }

        let legs = 6 + Int(rng.next() % 5)
        var stopTimes: [(start: Int, end: Int, visit: Bool, jam: Bool)] = []
        drive(Int(rng.uniform(in: 30...240)), speed: 8...14, &rng)
        for _ in 0..<legs {
            if withJams && rng.next() % 6 == 0 {
                let start = truth.count
                jam(Int(rng.uniform(in: 60...180)), &rng)
                stopTimes.append((start, truth.count - 1, false, true))
            } else if rng.next() % 2 == 0 {
                drive(Int(rng.uniform(in: 8...20)), speed: 1...3, &rng)  // parking
                let start = truth.count
                stay(Int(rng.uniform(in: 120...1_200)), wander: rng.uniform(in: 0...20), &rng)
                stopTimes.append((start, truth.count - 1, true, false))
                drive(Int(rng.uniform(in: 8...20)), speed: 1...3, &rng)
            } else {
                let start = truth.count
                stay(Int(rng.uniform(in: 5...59)), wander: 0, &rng)
                stopTimes.append((start, truth.count - 1, false, false))
            }
            drive(Int(rng.uniform(in: 30...240)), speed: 8...14, &rng)
        }

        // The silence: inside a visit stop half the time.
        let visits = stopTimes.filter(\.visit)
        let gapLength = Int(rng.uniform(in: 5...25))
        let gapStart: Int
        if !visits.isEmpty && rng.next() % 2 == 0 {
            let v = visits[Int(rng.next() % UInt64(visits.count))]
            gapStart = Int(rng.uniform(in: Double(v.start)...Double(max(v.start, v.end - gapLength))))
        } else {
            gapStart = Int(rng.next() % UInt64(truth.count))
        }

        let rho = 0.95, innovation = (1 - rho * rho).squareRoot()
        var strayLeft = 0
        var strayEast = 0.0, strayNorth = 0.0
        for (i, t) in truth.enumerated() {
            second += 1
            errorEast = rho * errorEast + innovation * noise * rng.gaussian()
            errorNorth = rho * errorNorth + innovation * noise * rng.gaussian()
            if strayLeft == 0 && rng.next() % 50 == 0 {
                strayLeft = 1 + Int(rng.next() % 3)
                let r = rng.uniform(in: 30...80), a = rng.uniform(in: 0...(2 * .pi))
                strayEast = r * sin(a)
                strayNorth = r * cos(a)
            }
            var e = t.east + errorEast, n = t.north + errorNorth
            if strayLeft > 0 {
                strayLeft -= 1
                e += strayEast
                n += strayNorth
            }
            guard i < gapStart || i >= gapStart + gapLength else { continue }
            let reported = t.speed > 0 ? max(0, t.speed + rng.gaussian() * 0.3) : abs(rng.gaussian() * 0.2)
            fixes.append(
                Fix(
                    receivedAt: second * 1_000_000, coordinate: plane.coordinate(east: e, north: n), mode: .threeD,
                    accuracy: stated, speed: reported))
        }
        for s in stopTimes {
            let stop = Stop(
                position: plane.coordinate(east: truth[s.start].east, north: truth[s.start].north),
                arrive: (1_000 + UInt64(s.start) + 1) * 1_000_000, depart: (1_000 + UInt64(s.end) + 1) * 1_000_000)
            if s.visit {
                stops.append(stop)
            } else if s.jam {
                jams.append(stop)
            } else {
                trafficStops.append(stop)
            }
        }
    }
}
