#if canImport(Glibc)
    import Glibc
#endif

/// O_TMPFILE, which Swift does not import (`__O_TMPFILE | O_DIRECTORY`).
private let temporaryFileFlag: Int32 = 0o20_000_000 | O_DIRECTORY

/// A new read-write file in `directory` with no name (O_TMPFILE), or where the file system does not
/// support that, one named `fallbackPrefix`-pid-random and unlinked at once: nothing is left behind
/// whatever happens to the process.
public func openNamelessFile(in directory: String, fallbackPrefix: String) throws(SystemError) -> Int32 {
    do {
        return try checkPOSIX(open(directory, temporaryFileFlag | O_RDWR | O_CLOEXEC, 0o600), "open(O_TMPFILE)")
    } catch {
        guard [EOPNOTSUPP, EISDIR, EINVAL].contains(error.errno) else { throw error }
    }
    let path = "\(directory)/\(fallbackPrefix)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let fd = try checkPOSIX(open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600), "open")
    unlink(path)
    return fd
}
