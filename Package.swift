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
        .executable(name: "placed-web", targets: ["placed-web"]),
        // For fuzz/Package.swift only, which depends on this package by path: its targets call these
        // modules as placed does. A package's dependents see only its products.
        .library(
            name: "PlacedFuzzable",
            targets: [
                "PlacedCore", "PlacedJSON", "PlacedOSM", "PlacedStore", "PlacedSystem", "PlacedVarlink", "PlacedDaemon",
                "PlacedWeb", "PlacedWire",
            ]),
    ],
    targets: [
        // C libraries from Debian: module map + shim.h, no logic.
        // Headers only: libgps is opened at run time (PlacedGPS/GPSLibrary.swift).
        .systemLibrary(name: "CGPS", providers: [.apt(["libgps-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(
            name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        // No pkgConfig: its Libs would link libmosquitto, which placed opens only when fleet export is on.
        .systemLibrary(name: "CMosquitto", providers: [.apt(["libmosquitto-dev"])]),

        // JSON values for the wire formats (varlink, fleet payloads). No C, no I/O.
        .target(name: "PlacedJSON", swiftSettings: lean),
        // Pure logic: geodesy, fixes, distance filter, places, index, ranking. No C, no I/O.
        // Its bodies serialized for clients (release): the ranker is generic over its candidates, and
        // PlacedStore's mapped ones must get a specialized ranker, not the runtime's generic one.
        .target(
            name: "PlacedCore",
            swiftSettings: lean + [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]),
        // Seeded randomness and fixtures shared by the tests and the benchmarks; never in a shipped binary.
        .target(name: "PlacedTestSupport", dependencies: ["PlacedSystem"]),

        // POSIX threads where they pay: the import's pipeline stages, the fleet export's host name lookup.
        .target(name: "PlacedThreads", swiftSettings: lean),
        // OpenStreetMap .osm.pbf decoding and place selection.
        .target(
            name: "PlacedOSM", dependencies: ["PlacedCore", "PlacedSystem", "PlacedThreads", "CZlib"],
            swiftSettings: lean),
        // SQLite: the places file (and the catalog ranked from it), selections, counts, last marker.
        .target(
            name: "PlacedStore", dependencies: ["PlacedCore", "PlacedSystem", "PlacedThreads", "CSQLite"],
            swiftSettings: lean),
        // Typed Swift wrappers over libsystemd and POSIX: event loop, notify, journal, sd-bus, sockets.
        .target(name: "PlacedSystem", dependencies: ["CSystemd"], swiftSettings: lean),
        // Wire forms the daemon writes and its clients read: GeoJSON map features and own places; the
        // fleet's commands (pure, fuzzed).
        .target(name: "PlacedWire", dependencies: ["PlacedCore", "PlacedJSON"], swiftSettings: lean),
        // The varlink protocol: server, connections, calls, and the framing its clients share.
        .target(name: "PlacedVarlink", dependencies: ["PlacedJSON", "PlacedSystem"], swiftSettings: lean),
        // gpsd client over libgps: a LocationSource.
        .target(name: "PlacedGPS", dependencies: ["PlacedCore", "PlacedSystem", "CGPS"], swiftSettings: lean),
        // Fleet export: the outbox to MQTT brokers over libmosquitto, on the daemon's event loop; the
        // fleet's commands in.
        .target(
            name: "PlacedFleet",
            dependencies: [
                "PlacedCore", "PlacedJSON", "PlacedWire", "PlacedSystem", "PlacedStore", "PlacedThreads", "CMosquitto",
                "CSystemd",
            ],
            swiftSettings: lean),
        // The daemon: its core, its settings, and one folder per adapter (D-Bus, varlink, journal, fleet).
        .target(
            name: "PlacedDaemon",
            dependencies: [
                "PlacedCore", "PlacedJSON", "PlacedWire", "PlacedSystem", "PlacedVarlink", "PlacedGPS", "PlacedStore",
                "PlacedFleet",
            ],
            swiftSettings: lean),

        .executableTarget(
            name: "placed", dependencies: ["PlacedDaemon"], swiftSettings: lean,
            // Only the parts of the standard library placed uses: idle RSS 10.9 MB instead of 12.2 MB. The
            // runtime's C++ from libstdc++.a too (link/libstdc++.so): a start without libstdc++.so's relocations.
            linkerSettings: [.unsafeFlags(["-static-stdlib", "-L\(Context.packageDirectory)/link"])]),
        // placectl's parser, clients (varlink socket, sd-bus) and output; main stays a thin shell.
        .target(
            name: "PlacectlKit",
            dependencies: ["PlacedCore", "PlacedJSON", "PlacedWire", "PlacedSystem", "PlacedVarlink", "CSystemd"]),
        .executableTarget(
            name: "placectl",
            dependencies: ["PlacectlKit", "PlacedCore", "PlacedJSON", "PlacedOSM", "PlacedStore", "PlacedSystem"],
            // Static standard library as for placed: the Debian package then depends on no Swift runtime.
            linkerSettings: [.unsafeFlags(["-static-stdlib"])]),
        // The kiosk gateway: the page, its events and its calls over libmicrohttpd, a varlink client of placed.
        .target(
            name: "PlacedWeb",
            dependencies: ["PlacedCore", "PlacedJSON", "PlacedSystem", "PlacedVarlink", "CMicroHTTPD", "CSystemd"],
            swiftSettings: lean),
        .executableTarget(
            name: "placed-web", dependencies: ["PlacedWeb", "PlacedSystem"], swiftSettings: lean,
            linkerSettings: [.unsafeFlags(["-static-stdlib"])]),
        // Benchmarks: `placed-bench NAME` (release build) prints figures.
        .executableTarget(
            name: "placed-bench",
            dependencies: [
                "PlacedCore", "PlacedJSON", "PlacedWire", "PlacedOSM", "PlacedStore", "PlacedTestSupport",
                "PlacectlKit", "PlacedFleet", "PlacedSystem", "CSQLite", "CZlib",
            ]),

        .testTarget(name: "PlacedJSONTests", dependencies: ["PlacedJSON", "PlacedTestSupport"]),
        .testTarget(name: "PlacedCoreTests", dependencies: ["PlacedCore", "PlacedTestSupport"]),
        .testTarget(name: "PlacedWireTests", dependencies: ["PlacedWire", "PlacedJSON"]),
        .testTarget(name: "PlacedThreadsTests", dependencies: ["PlacedThreads"]),
        .testTarget(name: "PlacedOSMTests", dependencies: ["PlacedOSM", "PlacedTestSupport"]),
        .testTarget(name: "PlacedStoreTests", dependencies: ["PlacedStore", "PlacedTestSupport"]),
        .testTarget(name: "PlacedSystemTests", dependencies: ["PlacedSystem", "PlacedThreads", "PlacedTestSupport"]),
        .testTarget(
            name: "PlacedVarlinkTests",
            dependencies: ["PlacedVarlink", "PlacedCore", "PlacedJSON", "PlacedSystem", "PlacedTestSupport"]),
        .testTarget(name: "PlacedGPSTests", dependencies: ["PlacedGPS"]),
        .testTarget(name: "PlacedWebTests", dependencies: ["PlacedWeb", "PlacedJSON"]),
        .testTarget(
            name: "PlacedDaemonTests",
            dependencies: [
                "PlacedDaemon", "PlacedFleet", "PlacedStore", "PlacedJSON", "PlacedVarlink", "PlacedWire",
                "PlacedTestSupport",
            ]),
        .testTarget(
            name: "PlacectlTests",
            dependencies: [
                "PlacectlKit", "PlacedCore", "PlacedJSON", "PlacedWire", "PlacedSystem", "PlacedVarlink", "PlacedOSM",
                "CSystemd",
            ]),
        .testTarget(
            name: "PlacedFleetTests",
            dependencies: [
                "PlacedFleet", "PlacedCore", "PlacedJSON", "PlacedWire", "PlacedStore", "PlacedSystem",
                "PlacedTestSupport", "CMosquitto",
            ]),
    ]
)
