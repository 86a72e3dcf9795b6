// placed-bench json: encode and parse the largest message the daemon sends often — a varlink Watch
// reply with 20 places — with PlacedCore's JSON, beside Foundation's JSONSerialization on the same
// message (the daemon cannot link Foundation, so this is the reference for "fast enough").
#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import PlacedCore
import PlacedJSON
import PlacedTestSupport

func jsonBenchmark(_ arguments: [String]) throws {
    let iterations = arguments.first.flatMap(Int.init) ?? 2_000
    let message = watchMessage(places: 20)
    let bytes = try message.encoded()
    print("json: Watch reply with 20 places, \(bytes.count) bytes; \(iterations) iterations each")

    let encode = measure(iterations) { _ = try? message.encoded() }
    let parse = measure(iterations) { _ = try? JSON(parsing: bytes) }

    let object = try JSONSerialization.jsonObject(with: Data(bytes))
    let foundationEncode = measure(iterations) {
        _ = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }
    let data = Data(bytes)
    let foundationParse = measure(iterations) { _ = try? JSONSerialization.jsonObject(with: data) }

    print("              encode us   parse us   encode MB/s   parse MB/s")
    for (name, e, p) in [
        ("PlacedCore", encode, parse), ("Foundation", foundationEncode, foundationParse),
    ] {
        print(
            "\(name.padding(14))\(format(e * 1e6).padding(12))\(format(p * 1e6).padding(11))"
                + "\(format(Double(bytes.count) / e / 1e6).padding(14))\(format(Double(bytes.count) / p / 1e6))")
    }
    print(
        "ratio Foundation/PlacedCore time: encode \(format(foundationEncode / encode))x, "
            + "parse \(format(foundationParse / parse))x")
}

/// Seconds per run of `body`: the best of five rounds of `iterations` runs.
private func measure(_ iterations: Int, _ body: () -> Void) -> Double {
    var best = Double.infinity
    for _ in 0..<5 {
        let seconds = BenchClock.seconds { for _ in 0..<iterations { body() } }
        best = min(best, seconds / Double(iterations))
    }
    return best
}

private func format(_ value: Double) -> String {
    let rounded = (value * 100).rounded() / 100
    return String(rounded)
}

private func watchMessage(places count: Int) -> JSON {
    var rng = SplitMix64(seed: 6)
    let places: [JSON] = (0..<count).map { index in
        [
            "id": .string("osm:node/\(1_000_000 + index * 7919)"), "name": .string("Café Ekberg \(index)"),
            "kind": "amenity=cafe", "address": .string("Bulevardi \(index + 1), 00120 Helsinki"),
            "latitude": .number(60.16 + rng.uniform(in: 0...0.01)),
            "longitude": .number(24.93 + rng.uniform(in: 0...0.01)), "distance": .number(rng.uniform(in: 0...250)),
            "likelihood": .number(rng.uniform(in: 0...1)), "attribution": .string(Place.attribution),
        ]
    }
    let location: JSON = [
        "latitude": 60.1652, "longitude": 24.9398, "accuracy": 6.5, "speed": 0.4, "heading": .null,
        "altitude": 14.2, "mode": "3d", "age": 0.8,
    ]
    return [
        "continues": true,
        "parameters": [
            "generation": 1234, "stale": false, "location": location, "places": .array(places), "marker": .null,
        ],
    ]
}
