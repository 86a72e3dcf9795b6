import PlacedStore

/// `placed-bench upgrade-places OLD NEW`: a places file of the schema before this one rewritten in this
/// schema (`PlaceFileUpgrade`), so the benchmarks' big files need no new import of many minutes; OLD stays
/// as it was.
func runUpgradePlaces(_ arguments: [String]) throws {
    guard arguments.count == 2 else { throw BenchmarkUsage("upgrade-places OLD NEW") }
    let start = BenchClock.now()
    try PlaceFileUpgrade.rewrite(arguments[0], to: arguments[1])
    let seconds = BenchClock.seconds(since: start)
    let catalog = try PlaceCatalog(path: arguments[1])
    print(
        "upgrade-places: \(arguments[0]) -> \(arguments[1]) (schema \(PlaceDatabase.schemaVersion),"
            + " \(catalog.count) places) in \(seconds.formatted(decimals: 1)) s")
}

/// `placed-bench downgrade-places NEW OLD`: a places file of this schema written in the schema before it,
/// as an older placed left it: what the tests of `placectl upgrade` and the package's postinst start from.
func runDowngradePlaces(_ arguments: [String]) throws {
    guard arguments.count == 2 else { throw BenchmarkUsage("downgrade-places NEW OLD") }
    try PlaceFileUpgrade.rewriteInPreviousSchema(arguments[0], to: arguments[1])
    print("downgrade-places: \(arguments[0]) -> \(arguments[1]) (schema 4)")
}
