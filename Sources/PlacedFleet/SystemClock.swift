import CMosquitto

#if canImport(Glibc)
    import Glibc
#endif

/// The wall clock and whether it can be trusted. A device without a real-time clock may boot with its
/// clock years behind and set it later (NTP, gpsd): each exported event says whether the clock was
/// synchronized when it was made, so consumers order a device's events by sequence number instead.
public enum SystemClock {
    /// CLOCK_REALTIME, seconds since the Unix epoch.
    public static func now() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// The kernel's view (adjtimex: not STA_UNSYNC, not TIME_ERROR) where placed may read it; under the
    /// unit's ProtectClock=yes adjtimex is refused, and systemd-timesyncd's flag file answers instead.
    public static func isSynchronized() -> Bool {
        var state = timex()
        state.modes = 0
        let result = adjtimex(&state)
        if result >= 0 { return result != TIME_ERROR && state.status & Int32(STA_UNSYNC) == 0 }
        return access(timesyncdFlag, F_OK) == 0
    }

    static let timesyncdFlag = "/run/systemd/timesync/synchronized"
}

func SystemErrorText(_ code: Int32) -> String { String(cString: strerror(code)) }
