// swift-tools-version:6.0
import PackageDescription

/// libFuzzer targets for placed's input parsers (docs/FUZZING.md). A package of their own: each is an
/// executable whose `main` is libFuzzer's, so it links only with `-sanitize=fuzzer` and must stay out
/// of the main package's `swift build`. Built by scripts/fuzz:
/// `swift build --package-path fuzz -Xswiftc -sanitize=fuzzer,address --product fuzz-NAME`.
/// The targets use `@testable import` (a debug build compiles every module with `-enable-testing`)
/// to call the code input reaches, as placed calls it, without a second entry point in the product.
let package = Package(
    name: "placed-fuzz",
    dependencies: [.package(name: "placed", path: "..")],
    targets: [
        .target(name: "FuzzSupport", dependencies: [.product(name: "PlacedFuzzable", package: "placed")]),
        .executableTarget(
            name: "fuzz-varlink",
            dependencies: ["FuzzSupport", .product(name: "PlacedFuzzable", package: "placed")]),
        .executableTarget(
            name: "fuzz-pbf", dependencies: ["FuzzSupport", .product(name: "PlacedFuzzable", package: "placed")]),
        .executableTarget(
            name: "fuzz-osm-block",
            dependencies: ["FuzzSupport", .product(name: "PlacedFuzzable", package: "placed")]),
        .executableTarget(
            name: "fuzz-settings",
            dependencies: ["FuzzSupport", .product(name: "PlacedFuzzable", package: "placed")]),
        .executableTarget(
            name: "fuzz-opening-hours",
            dependencies: ["FuzzSupport", .product(name: "PlacedFuzzable", package: "placed")]),
        .executableTarget(
            name: "fuzz-web", dependencies: ["FuzzSupport", .product(name: "PlacedFuzzable", package: "placed")]),
        .executableTarget(
            name: "fuzz-geojson",
            dependencies: ["FuzzSupport", .product(name: "PlacedFuzzable", package: "placed")]),
        .executableTarget(
            name: "fuzz-fleet-command",
            dependencies: ["FuzzSupport", .product(name: "PlacedFuzzable", package: "placed")]),
    ]
)
