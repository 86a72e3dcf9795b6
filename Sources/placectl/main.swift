#if canImport(Glibc)
    import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "import" {
    exit(runImport(arguments: Array(arguments.dropFirst())))
}
if arguments.contains(where: { $0 == "--help" || $0 == "-h" }) {
    print(
        "usage: placectl [--help] | import FILE.osm.pbf [--db PATH]\n\nplacectl: read and select the places placed ranks"
    )
} else {
    print("placectl: not yet wired")
}
