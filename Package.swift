// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "placed",
    products: [
        .executable(name: "placed", targets: ["placed"]),
        .executable(name: "placectl", targets: ["placectl"]),
    ],
    targets: [
        // C libraries from Debian: module map + shim.h, no logic.
        .systemLibrary(name: "CGPS", pkgConfig: "libgps", providers: [.apt(["libgps-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),

        // Pure logic: geodesy, fixes, distance filter, places, index, ranking. No C, no I/O.
        .target(name: "PlacedCore"),

        // Typed Swift wrappers over libsystemd: event loop, notify, journal.
        .target(name: "PlacedSystem", dependencies: ["CSystemd"]),

        .executableTarget(name: "placed", dependencies: ["PlacedCore", "PlacedSystem"]),
        .executableTarget(name: "placectl", dependencies: ["PlacedCore"]),

        .testTarget(name: "PlacedCoreTests", dependencies: ["PlacedCore"]),
        .testTarget(name: "PlacedSystemTests", dependencies: ["PlacedSystem"]),
    ]
)
