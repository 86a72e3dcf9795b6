// placed-fleet-probe: PlacedFleet in a process of its own, for the tests that must kill the publisher
// or run it in a network namespace (Tests/integration/test_fleet.py). Test-only: once the daemon is
// wired, those tests can run placed itself.
//
//   placed-fleet-probe --db FILE [--set Key=Value ...] [--markers N] [--visits N] [--moves N]
//                      [--interval SECONDS] [--exit-when-drained]
//
// --set takes [Fleet] keys (Broker=, DeviceId=, KeepAlive=, ...). Events are made every --interval
// seconds (0: all at once), markers first. Lines on stdout: "started", then "status ..." every second
// and at each change, "appended N" once every event is made, "drained" when the outbox is empty.
import PlacedCore
import PlacedJSON
import PlacedFleet
import PlacedStore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ message: String) -> Never {
    writeAll(2, "placed-fleet-probe: \(message)\n")
    exit(2)
}

/// Unbuffered: the tests read each line as it is written, and a kill -9 loses none.
func say(_ line: String) { writeAll(1, line + "\n") }

func runProbe() {
    var arguments = Array(CommandLine.arguments.dropFirst())
    var database: String?
    var settings = FleetSettings()
    var markers = 0
    var visits = 0
    var moves = 0
    var interval = 0.0
    var exitWhenDrained = false
    while !arguments.isEmpty {
        let flag = arguments.removeFirst()
        func value() -> String {
            guard !arguments.isEmpty else { fail("\(flag) needs a value") }
            return arguments.removeFirst()
        }
        switch flag {
        case "--db": database = value()
        case "--set":
            let pair = value()
            guard let equals = pair.firstIndex(of: "=") else { fail("--set \(pair): not Key=Value") }
            do {
                try settings.set(String(pair[..<equals]), to: String(pair[pair.index(after: equals)...]))
            } catch {
                fail("\(error)")
            }
        case "--markers": markers = Int(value()) ?? 0
        case "--visits": visits = Int(value()) ?? 0
        case "--moves": moves = Int(value()) ?? 0
        case "--interval": interval = Double(value()) ?? 0
        case "--exit-when-drained": exitWhenDrained = true
        default: fail("unknown option \(flag)")
        }
    }
    guard let database else { fail("--db FILE is required") }

    let loop: EventLoop
    let exporter: FleetExporter
    let selections: SelectionLog
    do {
        loop = try EventLoop()
        selections = try SelectionLog(path: database)
        exporter = try FleetExporter(loop: loop, settings: settings, selections: selections)
    } catch {
        fail("\(error)")
    }

    var lastLine = ""
    func report(force: Bool = false) {
        let status = exporter.status
        let line =
            "status \(status.state.rawValue) broker=\(status.broker ?? "-") backlog=\(status.backlog) "
            + "acknowledged=\(status.acknowledged) dropped=\(status.dropped) rejected=\(status.rejected)"
        if force || line != lastLine { say(line) }
        lastLine = line
    }
    exporter.onStatusChange = { _ in report() }

    /// Synthetic events around Helsinki's Senate Square: marker i at place osm:node/i.
    func makeMarker(_ index: Int) -> Marker {
        let place = Place(
            id: "osm:node/\(index)", name: "Place \(index)", kind: "amenity=cafe", address: nil,
            coordinate: Coordinate(latitude: 60.1695 + Double(index % 100) * 1e-5, longitude: 24.9525))
        let fix = Fix(
            time: 1_700_000_000 + Double(index), coordinate: Coordinate(latitude: 60.1695, longitude: 24.9525),
            mode: .threeD, accuracy: 4)
        return Marker(
            place: RankedPlace(place: place, distance: 5, likelihood: 0.5), location: fix, time: SystemClock.now(),
            generation: UInt64(index))
    }

    func markerRecord(_ marker: Marker) -> [String: JSON] {
        [
            "place": ["id": .string(marker.place.place.id), "name": .string(marker.place.place.name)],
            "location": [
                "latitude": .number(marker.location.coordinate.latitude),
                "longitude": .number(marker.location.coordinate.longitude),
            ],
            "time": .string(ISO8601.utc(marker.time, milliseconds: true)),
            "generation": .number(Double(marker.generation)), "selection": .number(Double(marker.selection)),
        ]
    }

    var made = 0
    let total = markers + visits + moves
    func makeEvent() {
        defer { made += 1 }
        if made < markers {
            do {
                _ = try exporter.append(makeMarker(made + 1), to: selections, record: markerRecord)
            } catch {
                fail("marker \(made + 1) not recorded: \(error)")
            }
        } else if made < markers + visits {
            let index = made - markers + 1
            let visit = FleetVisit(
                record: ["index": .number(Double(index))], placeName: "Place \(index)",
                coordinate: Coordinate(latitude: 60.1695, longitude: 24.9525), accuracy: 10, start: SystemClock.now(),
                gpsTime: nil)
            if index % 2 == 1 { exporter.visitStarted(visit) } else { exporter.visitEnded(visit) }
        } else {
            let index = made - markers - visits + 1
            let fix = Fix(
                coordinate: Coordinate(latitude: 60.1695 + Double(index) * 1e-4, longitude: 24.9525), mode: .threeD,
                accuracy: 5)
            exporter.moved(
                to: fix, location: ["latitude": .number(fix.coordinate.latitude)], top: ["id": "osm:node/1"])
        }
    }

    var sources: [EventSource] = []
    do {
        for signal in [SIGTERM, SIGINT] {
            sources.append(
                try loop.onSignal(signal) {
                    exporter.stop()
                    report(force: true)
                    loop.exit(0)
                })
        }
        var ticker: EventSource?
        ticker = try loop.after(1_000_000) {
            report(force: true)
            if exitWhenDrained, made >= total, exporter.status.backlog == 0, exporter.status.inFlight == 0 {
                say("drained")
                exporter.stop()
                loop.exit(0)
            }
            try? ticker?.schedule(after: exporter.status.backlog == 0 && made >= total ? 1_000_000 : 100_000)
        }
        var generator: EventSource?
        generator = try loop.after(1) {
            if interval == 0 {
                while made < total { makeEvent() }
            } else if made < total {
                makeEvent()
            }
            if made < total {
                try? generator?.schedule(after: UInt64(interval * 1e6))
            } else {
                say("appended \(made)")
            }
        }
        exporter.start()
        say("started device=\(exporter.device)")
        _ = try loop.run()
        _ = (ticker, generator)
    } catch {
        fail("\(error)")
    }
}

runProbe()
