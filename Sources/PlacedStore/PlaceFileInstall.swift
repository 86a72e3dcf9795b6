import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Putting a finished places file in place, for the import and the upgrade alike.
extension PlaceDatabase {
    /// Opens `path`, a file this process created and SQLite wrote by name, for its last writes: not
    /// through a symbolic link, and only while it is still this user's file with one name. The directory
    /// may belong to placed, so another process could have swapped something in under the name; the
    /// mode and owner given next would then have gone to that (a root-owned file handed to placed).
    static func reopenOwnFile(_ path: String) throws(PlaceDatabaseError) -> Int32 {
        let descriptor: Int32
        do {
            descriptor = try checkPOSIX(Glibc.open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC), "open")
        } catch {
            throw .cannotWrite(path: path, error)
        }
        var status = stat()
        do {
            try checkPOSIX(fstat(descriptor, &status), "fstat")
        } catch {
            Glibc.close(descriptor)
            throw .cannotWrite(path: path, error)
        }
        guard status.st_mode & S_IFMT == S_IFREG, status.st_nlink == 1, status.st_uid == geteuid() else {
            Glibc.close(descriptor)
            throw .cannotWrite(path: path, operation: "open (replaced under its name)", errno: EPERM)
        }
        return descriptor
    }

    /// Makes `temporary`, written and open as `descriptor`, the file at `target`: given the mode and
    /// owner of the file it replaces (placed reads it as its own user or group; the owner only when
    /// running as root), synced, dropped from
    /// the page cache (the daemon's mapping then reads it back in small pages, each counted once in its
    /// RSS, not in the large folios the writes left), renamed over it, and the rename made durable.
    /// Throws `.replacedWithoutSync` when only that last step failed: the new file is in place then.
    static func install(_ temporary: String, descriptor: Int32, over target: String) throws(PlaceDatabaseError) {
        do {
            var original = stat()
            if stat(target, &original) == 0 {
                try checkPOSIX(fchmod(descriptor, original.st_mode & 0o7777), "chmod")
                var status = stat()
                try checkPOSIX(fstat(descriptor, &status), "fstat")
                // Only root may give a file away; anyone else's import makes it theirs, as before.
                if geteuid() == 0, original.st_uid != status.st_uid || original.st_gid != status.st_gid {
                    try checkPOSIX(fchown(descriptor, original.st_uid, original.st_gid), "chown")
                }
            }
            try checkPOSIX(fsync(descriptor), "fsync")
        } catch {
            throw .cannotWrite(path: temporary, error)
        }
        _ = posix_fadvise(descriptor, 0, 0, Int32(POSIX_FADV_DONTNEED))
        do {
            try checkPOSIX(rename(temporary, target), "rename")
        } catch {
            throw .cannotWrite(path: target, error)
        }
        do {
            let directory = try checkPOSIX(
                Glibc.open(directoryName(of: target), O_RDONLY | O_DIRECTORY | O_CLOEXEC), "open")
            defer { Glibc.close(directory) }
            try checkPOSIX(fsync(directory), "fsync")
        } catch {
            throw .replacedWithoutSync(path: target, errno: error.errno)
        }
    }
}

extension PlaceDatabase {
    /// Removes the files an import or upgrade of `target` killed before it finished left beside it
    /// (`<target><marker><pid>`, `marker` ".new-" or ".upgrading-", of a process that no longer
    /// exists): a SIGKILL or a power cut gives a writer no chance to remove its own, and each is as
    /// large as the places file. A file of a live process is that process's work in progress.
    static func removeAbandonedTemporaries(of target: String, marker: String) {
        let directoryPath = directoryName(of: target)
        let prefix = String(target.split(separator: "/", omittingEmptySubsequences: false).last ?? "") + marker
        guard let directory = opendir(directoryPath) else { return }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix(prefix), let pid = pid_t(name.dropFirst(prefix.count)), pid > 0, pid != getpid()
            else { continue }
            do {
                try checkPOSIX(kill(pid, 0), "kill")
            } catch  where error.errno == ESRCH {
                unlinkat(dirfd(directory), name, 0)
            } catch {}  // EPERM: alive, another user's
        }
    }
}
