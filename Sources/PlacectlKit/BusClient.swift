import CSystemd
import PlacedCore
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A client of placed's D-Bus object (`io.placed.Placed1` at `/io/placed/Placed1`) over sd-bus,
/// turning each reply into the JSON object the varlink method of the same meaning returns.
public final class BusClient: PlacesClient {
    public static let service = "io.placed.Placed1"
    public static let objectPath = "/io/placed/Placed1"
    public static let interface = "io.placed.Placed1"

    private let bus: OpaquePointer
    private let endpoint: String
    private let timeoutMicroseconds: UInt64
    private let timeout: Double

    public init(bus choice: Endpoint.Bus, timeout: Double = 15) throws(ClientError) {
        endpoint = Endpoint.bus(choice).description
        self.timeout = timeout
        timeoutMicroseconds = UInt64(timeout * 1e6)
        var opened: OpaquePointer?
        let result: Int32
        switch choice {
        case .system: result = sd_bus_open_system(&opened)
        case .user: result = sd_bus_open_user(&opened)
        case .address(let address): result = Self.open(address: address, &opened)
        }
        guard result >= 0, let opened else {
            throw .unreachable(
                endpoint: endpoint, reason: String(cString: strerror(-result)), hint: "is D-Bus running?")
        }
        bus = opened
    }

    deinit { sd_bus_flush_close_unref(bus) }

    private static func open(address: String, _ opened: inout OpaquePointer?) -> Int32 {
        var result = sd_bus_new(&opened)
        guard result >= 0, let bus = opened else { return result }
        result = sd_bus_set_address(bus, address)
        if result >= 0 { result = sd_bus_set_bus_client(bus, 1) }
        if result >= 0 { result = sd_bus_start(bus) }
        if result < 0 {
            sd_bus_flush_close_unref(bus)
            opened = nil
        }
        return result
    }

    // MARK: PlacesClient

    public func current(limit: Int?) throws(ClientError) -> [String: JSON] {
        let reply = try call("GetPlaces", .uint32(UInt32(limit ?? Ranker.defaultLimit)))
        let properties = try allProperties()
        var result: [String: JSON] = [
            "generation": try reply.read(), "places": try reply.read(),
            "stale": .bool(properties["SourceState"]?.string == "stale"),
        ]
        result["location"] = Self.nonEmpty(properties["Location"])
        return result
    }

    public func rank(latitude: Double, longitude: Double, accuracy: Double?, limit: Int?) throws(ClientError)
        -> [String: JSON]
    {
        // D-Bus has no optional arguments: an unknown accuracy is the one the model assumes for it.
        let reply = try call(
            "Rank", .double(latitude), .double(longitude), .double(accuracy ?? RankingModel().defaultAccuracy),
            .uint32(UInt32(limit ?? Ranker.defaultLimit)))
        return ["places": try reply.read()]
    }

    public func select(id: String) throws(ClientError) -> [String: JSON] {
        ["marker": try call("Select", .string(id)).read()]
    }

    public func history(limit: Int?, before: Int?) throws(ClientError) -> [String: JSON] {
        if before != nil { throw .unsupported("--before needs the varlink socket (GetHistory has no such argument)") }
        return ["markers": try call("GetHistory", .uint32(UInt32(limit ?? 20))).read()]
    }

    public func status() throws(ClientError) -> [String: JSON] {
        let properties = try allProperties()
        var result: [String: JSON] = [
            "source": properties["SourceState"] ?? .null, "generation": properties["Generation"] ?? .null,
            "stale": .bool(properties["SourceState"]?.string == "stale"),
            "distance_filter": properties["DistanceFilter"] ?? .null,
        ]
        result["location"] = Self.nonEmpty(properties["Location"])
        result["marker"] = Self.nonEmpty(properties["Marker"])
        return result
    }

    public func watch(_ onUpdate: @escaping ([String: JSON]) -> Void) throws(ClientError) {
        let loop = try WatchLoop()
        var failure: ClientError?
        let signals = SignalHandler { message in
            do throws(ClientError) {
                switch String(cString: sd_bus_message_get_member(message.pointer)) {
                case "PlacesChanged": onUpdate(["generation": try message.read(), "places": try message.read()])
                case "MarkerPlaced":
                    let marker = try message.read()
                    onUpdate(["generation": marker["generation"] ?? .null, "marker": marker])
                case "NameOwnerChanged":
                    // (name, old owner, new owner): placed left the bus.
                    let (name, _, owner) = (try message.read(), try message.read(), try message.read())
                    guard name.string == Self.service, owner.string == "" else { return }
                    failure = .disconnected(endpoint: "\(Self.service) on \(self.endpoint)")
                    loop.exit(1)
                default: break
                }
            } catch {
                failure = error
                loop.exit(1)
            }
        }
        // Subscribe before reading the state, so nothing that happens in between is missed.
        var slots: [OpaquePointer?] = []
        defer { slots.forEach { sd_bus_slot_unref($0) } }
        let rules = [
            "type='signal',sender='\(Self.service)',path='\(Self.objectPath)',interface='\(Self.interface)',member='PlacesChanged'",
            "type='signal',sender='\(Self.service)',path='\(Self.objectPath)',interface='\(Self.interface)',member='MarkerPlaced'",
            "type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.service)'",
        ]
        for rule in rules {
            var slot: OpaquePointer?
            try check(
                sd_bus_add_match(
                    bus, &slot, rule,
                    { message, userdata, _ in
                        Unmanaged<SignalHandler>.fromOpaque(userdata!).takeUnretainedValue().handle(message)
                        return 0
                    }, Unmanaged.passUnretained(signals).toOpaque()), "sd_bus_add_match(\(rule))")
            slots.append(slot)
        }
        var first = try current(limit: nil)
        first["marker"] = try Self.nonEmpty(allProperties()["Marker"])
        onUpdate(first)

        try check(sd_bus_attach_event(bus, loop.loop.handle, 0), "sd_bus_attach_event")
        defer { sd_bus_detach_event(bus) }
        try check(sd_bus_set_exit_on_disconnect(bus, 1), "sd_bus_set_exit_on_disconnect")
        try loop.run()
        withExtendedLifetime(signals) {}
        if let failure { throw failure }
        if sd_bus_is_open(bus) <= 0 { throw .disconnected(endpoint: endpoint) }
    }

    // MARK: Calls

    private func call(_ member: String, _ arguments: BusArgument...) throws(ClientError) -> BusMessage {
        try call(interface: Self.interface, member, arguments)
    }

    private func call(interface: String, _ member: String, _ arguments: [BusArgument]) throws(ClientError)
        -> BusMessage
    {
        var pointer: OpaquePointer?
        try check(
            sd_bus_message_new_method_call(bus, &pointer, Self.service, Self.objectPath, interface, member),
            "sd_bus_message_new_method_call(\(member))")
        let message = BusMessage(pointer!)
        for argument in arguments { try message.append(argument) }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_call(bus, message.pointer, timeoutMicroseconds, &error, &reply)
        guard result >= 0, let reply else {
            throw failure(of: member, result, error)
        }
        return BusMessage(reply)
    }

    private func failure(of member: String, _ result: Int32, _ error: sd_bus_error) -> ClientError {
        let name = error.name.map { String(cString: $0) }
        let message = error.message.map { String(cString: $0) }
        switch name {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            return .unreachable(
                endpoint: "\(Self.service) on \(endpoint)", reason: message ?? "not on the bus",
                hint: "is placed running?")
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout":
            return .timedOut(endpoint: endpoint, seconds: timeout)
        case let name?:
            return .daemon(name: name, parameters: [:], message: message)
        case nil:
            if -result == ETIMEDOUT { return .timedOut(endpoint: endpoint, seconds: timeout) }
            if -result == ECONNRESET || -result == ENOTCONN { return .disconnected(endpoint: endpoint) }
            return .system(SystemError("sd_bus_call(\(member))", errno: -result))
        }
    }

    /// `org.freedesktop.DBus.Properties.GetAll` of placed's interface, as a JSON object.
    private func allProperties() throws(ClientError) -> [String: JSON] {
        let reply = try call(interface: "org.freedesktop.DBus.Properties", "GetAll", [.string(Self.interface)])
        guard let properties = try reply.read().object else {
            throw .protocolViolation("GetAll did not return a dictionary")
        }
        return properties
    }

    /// An empty a{sv} stands for "none yet" on D-Bus, which has no null.
    private static func nonEmpty(_ value: JSON?) -> JSON? {
        guard let value, value != .null, value != .object([:]) else { return nil }
        return value
    }

    /// Receives the signals the watch subscribed to; the C callback reaches it through userdata.
    private final class SignalHandler {
        let onSignal: (BusMessage) -> Void
        init(_ onSignal: @escaping (BusMessage) -> Void) { self.onSignal = onSignal }
        func handle(_ pointer: OpaquePointer?) {
            guard let pointer else { return }
            onSignal(BusMessage(borrowing: pointer))
        }
    }
}

/// A value to append to a method call: the few basic types placed's methods take.
enum BusArgument {
    case string(String)
    case uint32(UInt32)
    case double(Double)
}

/// An sd-bus message: appends arguments, reads any D-Bus value back as JSON (integers and doubles
/// as numbers, `a{sv}` and other dictionaries as objects, arrays and structs as arrays).
final class BusMessage {
    let pointer: OpaquePointer
    private let owned: Bool

    init(_ pointer: OpaquePointer) {
        self.pointer = pointer
        owned = true
    }

    /// A message sd-bus lends to a callback; not unreferenced here.
    init(borrowing pointer: OpaquePointer) {
        self.pointer = pointer
        owned = false
    }

    deinit { if owned { sd_bus_message_unref(pointer) } }

    func append(_ argument: BusArgument) throws(ClientError) {
        let result: Int32
        switch argument {
        case .string(let value): result = value.withCString { sd_bus_message_append_basic(pointer, Self.code("s"), $0) }
        case .uint32(var value): result = sd_bus_message_append_basic(pointer, Self.code("u"), &value)
        case .double(var value): result = sd_bus_message_append_basic(pointer, Self.code("d"), &value)
        }
        try check(result, "sd_bus_message_append_basic")
    }

    /// The next complete value of the message.
    func read() throws(ClientError) -> JSON {
        guard let value = try readValue() else {
            throw .protocolViolation("a D-Bus reply with fewer values than promised")
        }
        return value
    }

    /// The next value, or nil at the end of the message or of the container being read.
    private func readValue() throws(ClientError) -> JSON? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        guard try check(sd_bus_message_peek_type(pointer, &type, &contents), "sd_bus_message_peek_type") > 0 else {
            return nil
        }
        switch UInt8(bitPattern: type) {
        case UInt8(ascii: "a"):
            let signature = String(cString: contents!)
            return try inside(type, contents) { () throws(ClientError) -> JSON in
                if signature.hasPrefix("{") { return .object(try readDictionary()) }
                var elements: [JSON] = []
                while let element = try readValue() { elements.append(element) }
                return .array(elements)
            }
        case UInt8(ascii: "v"):
            return try inside(type, contents) { () throws(ClientError) -> JSON in try read() }
        case UInt8(ascii: "r"):
            return try inside(type, contents) { () throws(ClientError) -> JSON in
                var fields: [JSON] = []
                while let field = try readValue() { fields.append(field) }
                return .array(fields)
            }
        default:
            return try readBasic(type)
        }
    }

    /// The entries of a dictionary whose array container is entered.
    private func readDictionary() throws(ClientError) -> [String: JSON] {
        var members: [String: JSON] = [:]
        while true {
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            guard try check(sd_bus_message_peek_type(pointer, &type, &contents), "sd_bus_message_peek_type") > 0 else {
                return members
            }
            try inside(type, contents) { () throws(ClientError) in
                let key = try read()
                members[key.string ?? key.description] = try read()
            }
        }
    }

    private func inside<T>(_ type: CChar, _ contents: UnsafePointer<CChar>?, _ body: () throws(ClientError) -> T)
        throws(ClientError) -> T
    {
        try check(sd_bus_message_enter_container(pointer, type, contents), "sd_bus_message_enter_container")
        let value = try body()
        try check(sd_bus_message_exit_container(pointer), "sd_bus_message_exit_container")
        return value
    }

    private func readBasic(_ type: CChar) throws(ClientError) -> JSON {
        func basic<T: BitwiseCopyable>(_ initial: T) throws(ClientError) -> T {
            var value = initial
            let result = withUnsafeMutableBytes(of: &value) { sd_bus_message_read_basic(pointer, type, $0.baseAddress) }
            try check(result, "sd_bus_message_read_basic")
            return value
        }
        switch UInt8(bitPattern: type) {
        case UInt8(ascii: "s"), UInt8(ascii: "o"), UInt8(ascii: "g"):
            let text: UnsafePointer<CChar>? = try basic(nil)
            return .string(text.map { String(cString: $0) } ?? "")
        case UInt8(ascii: "b"): return .bool(try basic(Int32(0)) != 0)
        case UInt8(ascii: "y"): return .number(Double(try basic(UInt8(0))))
        case UInt8(ascii: "n"): return .number(Double(try basic(Int16(0))))
        case UInt8(ascii: "q"): return .number(Double(try basic(UInt16(0))))
        case UInt8(ascii: "i"): return .number(Double(try basic(Int32(0))))
        case UInt8(ascii: "u"): return .number(Double(try basic(UInt32(0))))
        case UInt8(ascii: "x"): return .number(Double(try basic(Int64(0))))
        case UInt8(ascii: "t"): return .number(Double(try basic(UInt64(0))))
        case UInt8(ascii: "d"): return .number(try basic(0.0))
        case UInt8(ascii: "h"): return .number(Double(try basic(Int32(-1))))
        default:
            throw .protocolViolation("the D-Bus type '\(Character(Unicode.Scalar(UInt8(bitPattern: type))))'")
        }
    }

    static func code(_ letter: Unicode.Scalar) -> CChar { CChar(bitPattern: UInt8(letter.value)) }
}

/// The one error funnel for sd-bus calls: a negative result is `-errno`.
@discardableResult
private func check(_ result: Int32, _ call: @autoclosure () -> String) throws(ClientError) -> Int32 {
    if result < 0 { throw .system(SystemError(call(), errno: -result)) }
    return result
}
