#if canImport(Glibc)
    import Glibc
#endif

/// Who is on the other end of a socket or sent a bus message: the kernel's view (SO_PEERCRED and
/// SO_PEERGROUPS on the varlink socket, the bus driver's on D-Bus), never what the client claims.
/// Both control interfaces authorize with it, so they apply one rule.
public struct Credentials: Sendable, Equatable, CustomStringConvertible {
    /// Effective user id.
    public var uid: uid_t
    /// Effective group id.
    public var gid: gid_t
    /// Supplementary groups.
    public var groups: [gid_t]
    /// Process id, when known (it may be reused once the process exits: log it, don't trust it).
    public var pid: pid_t?

    public init(uid: uid_t, gid: gid_t, groups: [gid_t] = [], pid: pid_t? = nil) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
        self.pid = pid
    }

    public var isRoot: Bool { uid == 0 }

    public func isMember(of group: gid_t) -> Bool { gid == group || groups.contains(group) }

    /// The rule for privileged operations (Select, Refresh): root, or a member of `group`.
    /// With no group (it does not exist on this system) only root qualifies.
    public func isRootOrMember(of group: gid_t?) -> Bool {
        if isRoot { return true }
        guard let group else { return false }
        return isMember(of: group)
    }

    public var description: String {
        "uid=\(uid) gid=\(gid) groups=\(groups.map(String.init).joined(separator: ","))"
            + (pid.map { " pid=\($0)" } ?? "")
    }

    /// The peer of a connected Unix socket, as the kernel recorded it at connect time.
    public init(peerOf socket: Int32) throws(SystemError) {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; } — Glibc hides the type without _GNU_SOURCE.
        var ucred: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: ucred))
        try checkPOSIX(
            getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &ucred, &length), "getsockopt(SO_PEERCRED)")
        self.init(uid: ucred.uid, gid: ucred.gid, pid: ucred.pid)
        groups =
            try Credentials.peerGroups(of: socket) ?? UserDatabase.groups(ofUser: uid, primaryGroup: gid)
            ?? []
    }

    /// SO_PEERGROUPS (Linux ≥ 4.13): the peer's supplementary groups at connect time. Nil when the
    /// kernel lacks it.
    private static func peerGroups(of socket: Int32) throws(SystemError) -> [gid_t]? {
        var groups = [gid_t](repeating: 0, count: 32)
        while true {
            var length = socklen_t(groups.count * MemoryLayout<gid_t>.size)
            do {
                try checkPOSIX(
                    getsockopt(socket, SOL_SOCKET, SO_PEERGROUPS, &groups, &length), "getsockopt(SO_PEERGROUPS)")
                return Array(groups.prefix(Int(length) / MemoryLayout<gid_t>.size))
            } catch {
                switch error.errno {
                case ERANGE where Int(length) > groups.count * MemoryLayout<gid_t>.size:
                    // The kernel reports the size it needs.
                    groups = [gid_t](repeating: 0, count: Int(length) / MemoryLayout<gid_t>.size)
                case ENOPROTOOPT:
                    return nil
                default:
                    throw error
                }
            }
        }
    }
}

/// Lookups in the user and group database (NSS: /etc/group, sssd, …). Blocking; call at startup or
/// rarely, never per message.
public enum UserDatabase {
    /// The id of group `name`, or nil when there is no such group.
    public static func groupID(named name: String) -> gid_t? {
        lookUp(group(), { getgrnam_r(name, $0, $1, $2, $3) }, read: \.gr_gid)
    }

    /// The name of group `gid`, or nil when the database has none.
    public static func groupName(of gid: gid_t) -> String? {
        lookUp(group(), { getgrgid_r(gid, $0, $1, $2, $3) }, read: { $0.gr_name.map { String(cString: $0) } })
    }

    /// The name of user `uid`, or nil when the database has none.
    public static func userName(of uid: uid_t) -> String? {
        lookUp(passwd(), { getpwuid_r(uid, $0, $1, $2, $3) }, read: { $0.pw_name.map { String(cString: $0) } })
    }

    /// Runs a reentrant lookup (`getgrnam_r`, `getpwuid_r`), growing its string buffer on ERANGE.
    /// The entry's strings live in that buffer, so `read` copies what is needed while it exists.
    private static func lookUp<Entry, Value>(
        _ entry: Entry,
        _ call: (
            UnsafeMutablePointer<Entry>, UnsafeMutablePointer<CChar>, Int,
            UnsafeMutablePointer<UnsafeMutablePointer<Entry>?>
        ) -> Int32,
        read: (Entry) -> Value?
    ) -> Value? {
        var entry = entry
        var result: UnsafeMutablePointer<Entry>?
        var buffer = [CChar](repeating: 0, count: 1024)
        while true {
            let status = call(&entry, &buffer, buffer.count, &result)
            if status == ERANGE, buffer.count < 1 << 20 {
                buffer = [CChar](repeating: 0, count: buffer.count * 4)
                continue
            }
            guard status == 0, result != nil else { return nil }
            return withExtendedLifetime(buffer) { read(entry) }
        }
    }

    /// The groups the database gives user `uid` (including `primaryGroup`), as a login would get them.
    /// Nil when the user is unknown. Prefer the kernel's view of a live peer where there is one.
    public static func groups(ofUser uid: uid_t, primaryGroup: gid_t) -> [gid_t]? {
        guard let name = userName(of: uid) else { return nil }
        var count: Int32 = 32
        var groups = [gid_t](repeating: 0, count: Int(count))
        while getgrouplist(name, primaryGroup, &groups, &count) == -1 {
            // `count` now holds the number needed.
            guard count > Int32(groups.count) else { return nil }
            groups = [gid_t](repeating: 0, count: Int(count))
        }
        return Array(groups.prefix(Int(count)))
    }
}
