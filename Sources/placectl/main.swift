#if canImport(Glibc)
    import Glibc
#endif

exit(Placectl.main(Array(CommandLine.arguments.dropFirst())))
