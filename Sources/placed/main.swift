import PlacedDaemon

if CommandLine.arguments.dropFirst().contains(where: { $0 == "--help" || $0 == "-h" }) {
    print("usage: placed [--help]\n\nplaced: which place is this device at? (daemon; see placed(8))")
} else {
    print("placed: not yet wired")
}
