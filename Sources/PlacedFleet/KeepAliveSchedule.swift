/// When an MQTT client's keepalive check must next run. libmosquitto sends PINGREQ (or gives up on a
/// broker whose PINGRESP has not come) only when `mosquitto_loop_misc` is called once a keepalive has
/// passed since it last wrote, or last read, a packet; the broker drops a client it has heard nothing
/// from for 1.5 keepalives and publishes its will. Run at a fixed period, the check comes up to a period
/// late: a message sent just after one check moves libmosquitto's ping past the next one, and the broker
/// drops the idle client before the one after. So the check is due one keepalive after the older of the
/// last write and the last read, as libmosquitto judges it; an idle connection is checked once a
/// keepalive.
///
/// Times are microseconds of the monotonic clock, read after the library call that may have written or
/// read returned: never earlier than libmosquitto's own record, so the check is never early for it.
struct KeepAliveSchedule: Sendable, Equatable {
    let interval: UInt64
    private var lastWrite: UInt64
    private var lastRead: UInt64

    /// `time`: when the broker accepted the connection.
    init(interval: UInt64, start time: UInt64) {
        self.interval = interval
        lastWrite = time
        lastRead = time
    }

    /// A call that may have written a packet returned at `time`.
    mutating func wrote(at time: UInt64) { lastWrite = max(lastWrite, time) }

    /// A call that may have read a packet returned at `time`.
    mutating func read(at time: UInt64) { lastRead = max(lastRead, time) }

    /// When the check is due.
    var due: UInt64 { min(lastWrite, lastRead) &+ interval }

    /// The check ran at `time`, due: libmosquitto pinged (and counts both from now) or gave up.
    mutating func checked(at time: UInt64) {
        lastWrite = max(lastWrite, time)
        lastRead = max(lastRead, time)
    }
}
