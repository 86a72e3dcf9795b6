import Testing

@testable import PlacedGPS

#if canImport(Glibc)
    import Glibc
#endif

/// placed opens libgps at run time by soname: the library the headers belong to must be the one opened.
@Suite struct GPSLibraryTests {
    @Test func theSonameIsTheOneLibgpsDevLinksTo() throws {
        // libgps-dev's libgps.so names the library its headers describe (libgps.so.28 -> libgps.so.28.0.0).
        #if arch(x86_64)
            let directory = "/usr/lib/x86_64-linux-gnu"
        #else
            let directory = "/usr/lib/aarch64-linux-gnu"
        #endif
        var buffer = [CChar](repeating: 0, count: 256)
        let count = readlink(directory + "/libgps.so", &buffer, buffer.count - 1)
        try #require(count > 0, "libgps-dev is not installed (scripts/packages)")
        let target = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #expect(target.hasPrefix(GPSLibrary.soname + "."), "\(target) is not \(GPSLibrary.soname)")
    }

    @Test func theLibraryOpensWithEveryFunction() throws {
        let library = try GPSLibrary.shared()
        #expect(library.errorString(0) != nil)
    }
}
