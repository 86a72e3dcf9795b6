import PlacedCore

if CommandLine.arguments.dropFirst().contains(where: { $0 == "--help" || $0 == "-h" }) {
    print("usage: placectl [--help]\n\nplacectl: read and select the places placed ranks")
} else {
    print("placectl: not yet wired")
}
