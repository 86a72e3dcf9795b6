import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// A D-Bus error reply: a name (`org.freedesktop.DBus.Error.InvalidArgs`) and a human message.
/// Method handlers throw it.
public struct BusError: Error, Equatable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(_ name: String, _ message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { "\(name): \(message)" }

    public static func invalidArgs(_ message: String) -> BusError {
        BusError("org.freedesktop.DBus.Error.InvalidArgs", message)
    }
    public static func unknownMethod(_ message: String) -> BusError {
        BusError("org.freedesktop.DBus.Error.UnknownMethod", message)
    }
    public static func unknownInterface(_ message: String) -> BusError {
        BusError("org.freedesktop.DBus.Error.UnknownInterface", message)
    }
    public static func unknownProperty(_ message: String) -> BusError {
        BusError("org.freedesktop.DBus.Error.UnknownProperty", message)
    }
    public static func propertyReadOnly(_ message: String) -> BusError {
        BusError("org.freedesktop.DBus.Error.PropertyReadOnly", message)
    }
    public static func accessDenied(_ message: String) -> BusError {
        BusError("org.freedesktop.DBus.Error.AccessDenied", message)
    }
    /// A local failure, named as sd-bus names an errno (`System.Error.ECONNRESET`,
    /// `org.freedesktop.DBus.Error.Timeout`).
    init(errno code: Int32, _ call: String) {
        var error = sd_bus_error()
        sd_bus_error_set_errno(&error, code)
        defer { sd_bus_error_free(&error) }
        self.init(
            error.name.map { String(cString: $0) } ?? "org.freedesktop.DBus.Error.Failed",
            SystemError(call, errno: code).description)
    }

    public static func failed(_ message: String) -> BusError { BusError("org.freedesktop.DBus.Error.Failed", message) }
}

/// A connection to a D-Bus bus through sd-bus, dispatched by the daemon's `EventLoop` once
/// attached. Loop thread only.
public final class Bus {
    public enum Address: Sendable, Equatable {
        case system
        /// The user's session bus (`$DBUS_SESSION_BUS_ADDRESS`).
        case session
        /// A bus at a D-Bus address, e.g. `unix:path=/run/test/bus` (a private dbus-daemon).
        case custom(String)
    }

    /// The `sd_bus *`.
    public let handle: OpaquePointer
    private var objects: [ObjectIdentifier: BusObject] = [:]

    /// Connects (and authenticates) to the bus; messages flow once `attach(to:)` is called.
    public init(_ address: Address) throws(SystemError) {
        var bus: OpaquePointer?
        switch address {
        case .system: try checkSD(sd_bus_open_system(&bus), "sd_bus_open_system")
        case .session: try checkSD(sd_bus_open_user(&bus), "sd_bus_open_user")
        case .custom(let address):
            try checkSD(sd_bus_new(&bus), "sd_bus_new")
            do throws(SystemError) {
                try checkSD(sd_bus_set_address(bus, address), "sd_bus_set_address(\(address))")
                // A message bus, not a peer-to-peer link: send Hello, get a unique name.
                try checkSD(sd_bus_set_bus_client(bus, 1), "sd_bus_set_bus_client")
                try checkSD(sd_bus_start(bus), "sd_bus_start(\(address))")
            } catch {
                sd_bus_unref(bus)
                throw error
            }
        }
        handle = bus!
    }

    deinit {
        for object in objects.values { object.detach() }
        sd_bus_detach_event(handle)
        sd_bus_flush_close_unref(handle)
    }

    /// Lets `loop` dispatch this connection's messages.
    public func attach(to loop: EventLoop) throws(SystemError) {
        try checkSD(sd_bus_attach_event(handle, loop.handle, 0), "sd_bus_attach_event")
    }

    /// Ends the attached loop (`EventLoop.run` returns) when the bus connection is lost, e.g. when
    /// dbus-daemon restarts: the service manager restarts the daemon, which is simpler and safer
    /// than re-registering everything on a new connection.
    public func exitLoopOnDisconnect(_ on: Bool = true) throws(SystemError) {
        try checkSD(sd_bus_set_exit_on_disconnect(handle, on ? 1 : 0), "sd_bus_set_exit_on_disconnect")
    }

    /// Whether the connection is still up (false once the bus daemon has gone away).
    public var isOpen: Bool { sd_bus_is_open(handle) > 0 }

    /// Takes a well-known name (synchronously: call at startup). Fails with `EEXIST` when another
    /// connection owns it, or with `EACCES` when the bus policy forbids it.
    public func requestName(_ name: String) throws(SystemError) {
        try checkSD(sd_bus_request_name(handle, name, 0), "sd_bus_request_name(\(name))")
    }

    /// This connection's unique name (`:1.42`).
    public var uniqueName: String? {
        var name: UnsafePointer<CChar>?
        guard sd_bus_get_unique_name(handle, &name) >= 0, let name else { return nil }
        return String(cString: name)
    }

    /// Serves `object` at its path until `unregister(_:)` or the end of this connection.
    public func register(_ object: BusObject) throws(SystemError) {
        try object.attach(to: self)
        objects[ObjectIdentifier(object)] = object
    }

    public func unregister(_ object: BusObject) {
        object.detach()
        objects[ObjectIdentifier(object)] = nil
    }

    /// Calls a method and waits for the reply, at most `timeout` microseconds (0: sd-bus's default
    /// of 25 s). A client's side: it blocks, so never on the daemon's loop. A D-Bus error reply, and
    /// a local failure (no owner of `destination`, timeout, lost connection), throw its `BusError`.
    public func call(
        destination: String, path: String, interface: String, member: String, _ arguments: [BusValue] = [],
        timeout: UInt64 = 0
    ) throws(BusError) -> [BusValue] {
        var message: OpaquePointer?
        let created = sd_bus_message_new_method_call(handle, &message, destination, path, interface, member)
        guard created >= 0, let message else { throw BusError(errno: -created, "sd_bus_message_new_method_call") }
        defer { sd_bus_message_unref(message) }
        do {
            try BusMessageBody(message: message).append(arguments)
        } catch {
            throw BusError(errno: error.errno, error.call)
        }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_call(handle, message, timeout, &error, &reply)
        guard result >= 0, let reply else {
            guard let name = error.name else { throw BusError(errno: -result, "sd_bus_call(\(member))") }
            throw BusError(String(cString: name), error.message.map { String(cString: $0) } ?? "")
        }
        defer { sd_bus_message_unref(reply) }
        do {
            return try BusMessageBody(message: reply).readAll()
        } catch {
            throw BusError(errno: error.errno, "reply to \(member): \(error.call)")
        }
    }

    /// Calls `handler` for every matching signal while the returned subscription lives (a client's
    /// side; the daemon itself only emits). Nil arguments match anything.
    public func subscribe(
        sender: String? = nil, path: String? = nil, interface: String? = nil, member: String? = nil,
        _ handler: @escaping (BusSignal) -> Void
    ) throws(SystemError) -> BusSubscription {
        let subscription = BusSubscription(handler)
        var slot: OpaquePointer?
        try checkSD(
            sd_bus_match_signal(
                handle, &slot, sender, path, interface, member,
                { message, userdata, _ in
                    guard let message else { return 0 }
                    Unmanaged<BusSubscription>.fromOpaque(userdata!).takeUnretainedValue().deliver(message)
                    return 0
                }, Unmanaged.passUnretained(subscription).toOpaque()), "sd_bus_match_signal")
        subscription.slot = slot
        return subscription
    }
}

/// A signal as received.
public struct BusSignal: Sendable {
    public var sender: String?
    public var path: String
    public var interface: String
    public var member: String
    public var arguments: [BusValue]
}

/// A live signal match; release it to unsubscribe.
public final class BusSubscription {
    fileprivate var slot: OpaquePointer?
    private let handler: (BusSignal) -> Void

    fileprivate init(_ handler: @escaping (BusSignal) -> Void) { self.handler = handler }

    deinit { sd_bus_slot_unref(slot) }

    fileprivate func deliver(_ message: OpaquePointer) {
        // Signals with types BusValue does not cover are skipped rather than half-read.
        guard let arguments = try? BusMessageBody(message: message).readAll() else { return }
        handler(
            BusSignal(
                sender: sd_bus_message_get_sender(message).map { String(cString: $0) },
                path: sd_bus_message_get_path(message).map { String(cString: $0) } ?? "",
                interface: sd_bus_message_get_interface(message).map { String(cString: $0) } ?? "",
                member: sd_bus_message_get_member(message).map { String(cString: $0) } ?? "",
                arguments: arguments))
    }
}
