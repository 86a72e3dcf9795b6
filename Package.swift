// swift-tools-version:6.0
import PackageDescription

/// The daemon's modules use neither Swift concurrency nor regex: leaving their runtimes unlinked keeps
/// libswift_Concurrency, libdispatch and libswift_StringProcessing out of placed's memory.
let lean: [SwiftSetting] = [
    .unsafeFlags([
        "-Xfrontend", "-disable-implicit-concurrency-module-import",
        "-Xfrontend", "-disable-implicit-string-processing-module-import",
    ])
]

let package = Package(
    name: "placed",
    products: [
        .executable(name: "placed", targets: ["placed"]),
        .executable(name: "placectl", targets: ["placectl"]),
        .executable(name: "placed-bench", targets: ["placed-bench"]),
    ],
    targets: [
        // C libraries from Debian: module map + shim.h, no logic.
        .systemLibrary(name: "CGPS", pkgConfig: "libgps", providers: [.apt(["libgps-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),

        // Pure logic: geodesy, fixes, distance filter, places, index, ranking. No C, no I/O.
        .target(name: "PlacedCore", swiftSettings: lean),

        // OpenStreetMap .osm.pbf decoding and place selection.
        .target(name: "PlacedOSM", dependencies: ["PlacedCore", "CZlib"], swiftSettings: lean),
        // SQLite: places, selections, counts, last marker.
        .target(name: "PlacedStore", dependencies: ["PlacedCore", "CSQLite"], swiftSettings: lean),
        // Typed Swift wrappers over libsystemd: event loop, notify, journal, sd-bus; the varlink server.
        .target(name: "PlacedSystem", dependencies: ["PlacedCore", "CSystemd"], swiftSettings: lean),
        // gpsd client over libgps.
        .target(name: "PlacedGPS", dependencies: ["PlacedCore", "PlacedSystem", "CGPS"], swiftSettings: lean),
        // Fleet export: the outbox to MQTT brokers over libmosquitto, on the daemon's event loop.
        .target(
            name: "PlacedFleet", dependencies: ["PlacedCore", "PlacedSystem", "PlacedStore", "CMosquitto", "CSystemd"],
            swiftSettings: lean),
        // The daemon: one context wiring source, filter, ranker, store and the two interfaces.
        .target(
            name: "PlacedDaemon", dependencies: ["PlacedCore", "PlacedSystem", "PlacedGPS", "PlacedStore"],
            swiftSettings: lean),

        .executableTarget(
            name: "placed", dependencies: ["PlacedDaemon"], swiftSettings: lean,
            // Only the parts of the standard library placed uses: idle RSS 10.9 MB instead of 12.2 MB.
            linkerSettings: [.unsafeFlags(["-static-stdlib"])]),
        // placectl's parser, clients (varlink socket, sd-bus) and output; main stays a thin shell.
        .target(name: "PlacectlKit", dependencies: ["PlacedCore", "PlacedSystem", "CSystemd"]),
        .executableTarget(
            name: "placectl", dependencies: ["PlacectlKit", "PlacedCore", "PlacedOSM", "PlacedStore", "PlacedSystem"]),
        // Benchmarks: `placed-bench NAME` (release build) prints figures.
        .executableTarget(
            name: "placed-bench",
            dependencies: ["PlacedCore", "PlacedOSM", "PlacedStore", "PlacedFleet", "PlacedSystem", "CSQLite"]),
        // Test-only: drives PlacedFleet in its own process, for the tests that kill it or put it in a
        // network namespace (Tests/integration/test_fleet.py) until the daemon is wired.
        .executableTarget(
            name: "placed-fleet-probe", dependencies: ["PlacedFleet", "PlacedCore", "PlacedStore", "PlacedSystem"],
            swiftSettings: lean),

        .testTarget(name: "PlacedCoreTests", dependencies: ["PlacedCore"]),
        .testTarget(name: "PlacedOSMTests", dependencies: ["PlacedOSM"]),
        .testTarget(name: "PlacedStoreTests", dependencies: ["PlacedStore"]),
        .testTarget(name: "PlacedSystemTests", dependencies: ["PlacedSystem"]),
        .testTarget(name: "PlacedGPSTests", dependencies: ["PlacedGPS"]),
        .testTarget(name: "PlacedDaemonTests", dependencies: ["PlacedDaemon"]),
        .testTarget(
            name: "PlacedFleetTests",
            dependencies: ["PlacedFleet", "PlacedCore", "PlacedStore", "PlacedSystem", "CMosquitto"]),
        .testTarget(name: "PlacectlTests", dependencies: ["PlacectlKit", "PlacedCore", "PlacedSystem", "CSystemd"]),
    ]
)
