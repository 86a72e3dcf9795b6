import Foundation
import PlacedSystem
import PlacedTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct SystemErrorTests {
    @Test func aFailedCallThrowsItsNameAndErrno() {
        #expect(throws: SystemError("open", errno: ENOENT)) {
            try checkPOSIX(open("/nonexistent/placed", O_RDONLY), "open")
        }
        #expect(SystemError("open", errno: ENOENT).description == "open: No such file or directory")
    }

    @Test func aResultOtherThanMinusOneIsReturned() throws {
        #expect(try checkPOSIX(Int(7), "read") == 7)
        #expect(try checkPOSIX(Int32(0), "close") == 0)
    }

    @Test func aFailedMappingThrows() {
        #expect(throws: SystemError("mmap", errno: EBADF)) {
            try checkPOSIX(mmap(nil, 4096, PROT_READ, MAP_SHARED, -1, 0), "mmap")
        }
    }

    @Test func anInterruptedCallIsCalledAgain() throws {
        var calls = 0
        let result = try retryingOnInterrupt("read") { () -> Int in
            calls += 1
            guard calls == 3 else {
                errno = EINTR
                return -1
            }
            return 42
        }
        #expect(result == 42)
        #expect(calls == 3)
    }

    @Test func anyOtherFailureIsThrownAtOnce() {
        var calls = 0
        #expect(throws: SystemError("write", errno: EPIPE)) {
            try retryingOnInterrupt("write") { () -> Int in
                calls += 1
                errno = EPIPE
                return -1
            }
        }
        #expect(calls == 1)
    }

    @Test func aNamelessFileLeavesNothingInItsDirectory() throws {
        let directory = makeTemporaryDirectory("placed-nameless")
        defer { rmdir(directory) }
        let fd = try openNamelessFile(in: directory, fallbackPrefix: ".placed-test")
        defer { close(fd) }
        #expect(try checkPOSIX(write(fd, "abc", 3), "write") == 3)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
    }

    @Test func aNamelessFileInAMissingDirectoryFails() {
        #expect(throws: SystemError("open(O_TMPFILE)", errno: ENOENT)) {
            try openNamelessFile(in: "/nonexistent/placed", fallbackPrefix: ".placed-test")
        }
    }
}
