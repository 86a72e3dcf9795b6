#if canImport(Glibc)
    import Glibc
#endif

/// The bytes libFuzzer hands a target, split where the target's format needs parts.
public struct FuzzInput {
    /// libFuzzer's buffer, exactly the input's size (AddressSanitizer catches a read past its end);
    /// valid during the call only.
    public let raw: UnsafeRawBufferPointer
    public var bytes: [UInt8] { Array(raw) }

    public init(_ start: UnsafeRawPointer, _ count: Int) {
        raw = UnsafeRawBufferPointer(start: start, count: count)
    }

    /// The bytes as text: invalid UTF-8 is repaired, as `String(decoding:)` does for every reader here.
    public var text: String { String(decoding: raw, as: UTF8.self) }

    /// The parts between NUL bytes (a seed file writes its parts joined by NULs).
    public var parts: [ArraySlice<UInt8>] { bytes.split(separator: 0, omittingEmptySubsequences: false) }
}

/// A directory of this process's own under /dev/shm (memory: a target that writes files does not wear
/// the disk or wait for it), removed with its files at exit.
public func makeScratchDirectory(_ prefix: String) -> String {
    var template = Array("/dev/shm/\(prefix)-XXXXXX".utf8CString)
    guard mkdtemp(&template) != nil else { fatalError("mkdtemp: \(String(cString: strerror(errno)))") }
    let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    scratchDirectories.append(path)
    if scratchDirectories.count == 1 { atexit { removeScratchDirectories() } }
    return path
}

nonisolated(unsafe) private var scratchDirectories: [String] = []

private func removeScratchDirectories() {
    for directory in scratchDirectories {
        guard let dir = opendir(directory) else { continue }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { unlink(directory + "/" + name) }
        }
        closedir(dir)
        rmdir(directory)
    }
}

/// Replaces `path`'s contents with `bytes`.
public func writeFile(_ path: String, _ bytes: some Collection<UInt8>) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fatalError("open \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let all = Array(bytes)
    var done = 0
    while done < all.count {
        let n = all[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { fatalError("write \(path): \(String(cString: strerror(errno)))") }
        done += n
    }
}

/// libFuzzer's entry for a program with a main of its own: SwiftPM links an executable's `main` to its
/// module's top-level code (which sets the target up and calls `runFuzzer`), so libFuzzer's `main`,
/// linked all the same, is never used.
@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafeRawPointer?, Int) -> CInt
) -> CInt

nonisolated(unsafe) private var fuzzTarget: ((FuzzInput) -> Void)?

/// What libFuzzer's own `main` (unused) refers to; also the callback `runFuzzer` gives the driver.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafeRawPointer?, _ count: Int) -> CInt {
    // An empty input may come with no buffer at all.
    let empty: UInt8 = 0
    withUnsafePointer(to: empty) { fallback in
        fuzzTarget!(FuzzInput(data ?? UnsafeRawPointer(fallback), count))
    }
    return 0
}

/// Runs libFuzzer with this process's arguments, `target` called with each input; never returns.
public func runFuzzer(_ target: @escaping (FuzzInput) -> Void) -> Never {
    fuzzTarget = target
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv) { fuzzOneInput($0, $1) })
}
