import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// One D-Bus object implementing one interface: methods with checked signatures, read-only
/// properties, signals, and the standard `Introspectable` and `Properties` interfaces
/// (`org.freedesktop.DBus.Peer` is sd-bus's own).
///
/// sd-bus vtables are C macro arrays Swift cannot build, so the object registers one message
/// callback for its path (`sd_bus_add_object`) and dispatches here. Loop thread only.
public final class BusObject {
    public let path: String
    public let interface: String
    /// Returned verbatim by `Introspect`; keep it equal to what is registered here.
    public let introspectionXML: String

    /// A method handler returns the reply's values; a thrown `BusError` becomes the error reply,
    /// any other error `org.freedesktop.DBus.Error.Failed`.
    public typealias MethodHandler = (BusMethodCall) throws -> [BusValue]

    private struct Method {
        let arguments: String
        let returns: String
        let handler: MethodHandler
    }
    private struct Property {
        let signature: String
        let get: () -> BusValue
    }

    private var methods: [String: Method] = [:]
    private var properties: [String: Property] = [:]
    private var propertyOrder: [String] = []
    private var signals: [String: String] = [:]
    private weak var bus: Bus?
    private var slot: OpaquePointer?

    public init(path: String, interface: String, introspectionXML: String) {
        self.path = path
        self.interface = interface
        self.introspectionXML = introspectionXML
    }

    deinit { detach() }

    // MARK: Declaring members

    /// `arguments` and `returns` are the D-Bus signatures (`"u"`, `"taa{sv}"`, `""`). A call with
    /// other argument types is answered `InvalidArgs` without reaching the handler.
    public func addMethod(
        _ name: String, arguments: String = "", returns: String = "", _ handler: @escaping MethodHandler
    ) {
        methods[name] = Method(arguments: arguments, returns: returns, handler: handler)
    }

    /// A read-only property; `get` is asked on every `Get`/`GetAll` and `emitPropertiesChanged`.
    public func addProperty(_ name: String, signature: String, get: @escaping () -> BusValue) {
        if properties[name] == nil { propertyOrder.append(name) }
        properties[name] = Property(signature: signature, get: get)
    }

    public func addSignal(_ name: String, signature: String) {
        signals[name] = signature
    }

    /// What is registered, as D-Bus signatures: for a test that the shipped introspection XML
    /// describes exactly the live object.
    public struct Members: Equatable, Sendable {
        public var methods: [String: (arguments: String, returns: String)]
        public var properties: [String: String]
        public var signals: [String: String]

        public init(
            methods: [String: (arguments: String, returns: String)], properties: [String: String],
            signals: [String: String]
        ) {
            self.methods = methods
            self.properties = properties
            self.signals = signals
        }

        public static func == (a: Members, b: Members) -> Bool {
            a.properties == b.properties && a.signals == b.signals && a.methods.count == b.methods.count
                && a.methods.allSatisfy { name, signature in
                    b.methods[name].map { $0 == signature } ?? false
                }
        }
    }

    public var members: Members {
        Members(
            methods: methods.mapValues { ($0.arguments, $0.returns) },
            properties: properties.mapValues(\.signature), signals: signals)
    }

    // MARK: Emitting

    /// Emits signal `name`, which must be declared with the arguments' signature.
    public func emitSignal(_ name: String, _ arguments: [BusValue]) throws(SystemError) {
        let signature = arguments.map(\.signature).joined()
        guard signals[name] == signature else {
            throw SystemError("signal \(interface).\(name)(\(signature)): not declared so", errno: EINVAL)
        }
        try send(signal: name, of: interface, arguments)
    }

    /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` with the current values of `names`.
    public func emitPropertiesChanged(_ names: [String]) throws(SystemError) {
        var changed: [String: BusValue] = [:]
        for name in names {
            guard let property = properties[name] else {
                throw SystemError("property \(interface).\(name): not declared", errno: EINVAL)
            }
            changed[name] = property.get()
        }
        try send(
            signal: "PropertiesChanged", of: "org.freedesktop.DBus.Properties",
            [.string(interface), .dictionary(changed), .strings([])])
    }

    private func send(signal member: String, of interface: String, _ arguments: [BusValue]) throws(SystemError) {
        guard let bus else { throw SystemError("\(path): not registered on a bus", errno: ENOTCONN) }
        var message: OpaquePointer?
        try checkSD(
            sd_bus_message_new_signal(bus.handle, &message, path, interface, member), "sd_bus_message_new_signal")
        defer { sd_bus_message_unref(message) }
        try BusMessageBody(message: message!).append(arguments)
        try checkSD(sd_bus_send(bus.handle, message, nil), "sd_bus_send(\(member))")
    }

    // MARK: Registration, for Bus

    func attach(to bus: Bus) throws(SystemError) {
        guard self.bus == nil else { throw SystemError("\(path): already registered", errno: EALREADY) }
        var slot: OpaquePointer?
        try checkSD(
            sd_bus_add_object(
                bus.handle, &slot, path,
                { message, userdata, _ in
                    guard let message, let userdata else { return 0 }
                    return Unmanaged<BusObject>.fromOpaque(userdata).takeUnretainedValue().handle(message)
                }, Unmanaged.passUnretained(self).toOpaque()), "sd_bus_add_object(\(path))")
        self.slot = slot
        self.bus = bus
    }

    func detach() {
        sd_bus_slot_unref(slot)
        slot = nil
        bus = nil
    }

    // MARK: Dispatch

    private static let introspectable = "org.freedesktop.DBus.Introspectable"
    private static let propertiesInterface = "org.freedesktop.DBus.Properties"

    /// Returns 1 when it answered the call, 0 to let sd-bus answer (it replies UnknownObject and the
    /// like).
    private func handle(_ message: OpaquePointer) -> Int32 {
        let called = sd_bus_message_get_interface(message).map { String(cString: $0) }
        guard let memberPointer = sd_bus_message_get_member(message) else { return 0 }
        let member = String(cString: memberPointer)
        let signature = sd_bus_message_get_signature(message, 1).map { String(cString: $0) } ?? ""
        let call = BusMethodCall(message: message, member: member)
        do {
            switch called {
            case BusObject.introspectable?:
                guard member == "Introspect" else { throw BusError.unknownMethod("No method \(member) in \(called!)") }
                try expect(signature, "")
                try reply(message, [.string(introspectionXML)])
            case BusObject.propertiesInterface?:
                try reply(message, try handleProperties(member, signature, call))
            case interface?, nil:
                guard let method = methods[member] else {
                    throw BusError.unknownMethod("No method \(member) in \(interface)")
                }
                try expect(signature, method.arguments)
                let values = try method.handler(call)
                let replySignature = values.map(\.signature).joined()
                guard replySignature == method.returns else {
                    throw BusError.failed("\(member) replied (\(replySignature)), declared (\(method.returns))")
                }
                try reply(message, values)
            case let other?:
                throw BusError.unknownInterface("No interface \(other) at \(path)")
            }
        } catch let error as BusError {
            replyError(message, error)
        } catch {
            replyError(message, .failed(String(describing: error)))
        }
        return 1
    }

    private func expect(_ signature: String, _ declared: String) throws(BusError) {
        guard signature == declared else {
            throw BusError.invalidArgs("Expected arguments of type (\(declared)), got (\(signature))")
        }
    }

    private func handleProperties(_ member: String, _ signature: String, _ call: BusMethodCall) throws -> [ReplyValue] {
        switch member {
        case "Get":
            try expect(signature, "ss")
            let arguments = try call.arguments()
            let (name, property) = try lookUp(interface: arguments[0].string!, property: arguments[1].string!)
            let value = property.get()
            guard value.signature == property.signature else {
                throw BusError.failed("property \(name) has type \(value.signature), declared \(property.signature)")
            }
            return [.variant(value)]
        case "GetAll":
            try expect(signature, "s")
            let requested = try call.arguments()[0].string!
            // An empty interface name asks for all interfaces (D-Bus specification).
            guard requested.isEmpty || requested == interface else {
                throw BusError.unknownInterface("No interface \(requested) at \(path)")
            }
            var all: [String: BusValue] = [:]
            for name in propertyOrder { all[name] = properties[name]!.get() }
            return [.value(.dictionary(all))]
        case "Set":
            try expect(signature, "ssv")
            let arguments = try call.arguments()
            let (name, _) = try lookUp(interface: arguments[0].string!, property: arguments[1].string!)
            throw BusError.propertyReadOnly("Property \(name) is read-only")
        default:
            throw BusError.unknownMethod("No method \(member) in \(BusObject.propertiesInterface)")
        }
    }

    private func lookUp(interface requested: String, property name: String) throws(BusError) -> (String, Property) {
        guard requested == interface else { throw BusError.unknownInterface("No interface \(requested) at \(path)") }
        guard let property = properties[name] else {
            throw BusError.unknownProperty("No property \(name) in \(interface)")
        }
        return (name, property)
    }

    private func reply(_ call: OpaquePointer, _ values: [ReplyValue]) throws(SystemError) {
        var reply: OpaquePointer?
        try checkSD(sd_bus_message_new_method_return(call, &reply), "sd_bus_message_new_method_return")
        defer { sd_bus_message_unref(reply) }
        let body = BusMessageBody(message: reply!)
        for value in values { try value.append(to: body) }
        try checkSD(sd_bus_send(nil, reply, nil), "sd_bus_send")
    }

    private func reply(_ call: OpaquePointer, _ values: [BusValue]) throws(SystemError) {
        try reply(call, values.map(ReplyValue.value))
    }

    private func replyError(_ call: OpaquePointer, _ error: BusError) {
        var busError = sd_bus_error()
        sd_bus_error_set(&busError, error.name, error.message)
        sd_bus_reply_method_error(call, &busError)
        sd_bus_error_free(&busError)
    }
}

/// A reply element: a value, or a value wrapped in a variant (Properties.Get).
private enum ReplyValue {
    case value(BusValue)
    case variant(BusValue)

    func append(to body: BusMessageBody) throws(SystemError) {
        switch self {
        case .value(let value): try body.append(value)
        case .variant(let value): try body.appendVariant(value)
        }
    }
}

/// The method call being handled. Valid only during the handler: the message belongs to sd-bus.
public struct BusMethodCall {
    let message: OpaquePointer
    /// The method name.
    public let member: String

    /// The arguments, already checked against the declared signature.
    public func arguments() throws(BusError) -> [BusValue] {
        sd_bus_message_rewind(message, 1)
        do {
            return try BusMessageBody(message: message).readAll()
        } catch {
            throw BusError.invalidArgs("Cannot read arguments: \(error)")
        }
    }

    /// The sender's credentials, as the bus driver reports them (euid, egid, supplementary groups,
    /// pid). Costs a round trip to the bus daemon: ask only for privileged calls.
    public func credentials() throws(BusError) -> Credentials {
        let wanted: [UInt] = [
            SD_BUS_CREDS_PID, SD_BUS_CREDS_UID, SD_BUS_CREDS_EUID, SD_BUS_CREDS_GID, SD_BUS_CREDS_EGID,
            SD_BUS_CREDS_SUPPLEMENTARY_GIDS, SD_BUS_CREDS_AUGMENT,
        ]
        let mask = wanted.reduce(UInt64(0)) { $0 | UInt64($1) }
        var creds: OpaquePointer?
        let status = sd_bus_query_sender_creds(message, mask, &creds)
        guard status >= 0, let creds else {
            throw BusError.accessDenied("Cannot determine the caller's credentials: \(SystemError("", errno: -status))")
        }
        defer { sd_bus_creds_unref(creds) }
        var uid: uid_t = 0
        var gid: gid_t = 0
        // The effective ids decide; the bus driver may only know the real ones (then they are equal
        // for every process that does not change ids after connecting).
        guard sd_bus_creds_get_euid(creds, &uid) >= 0 || sd_bus_creds_get_uid(creds, &uid) >= 0 else {
            throw BusError.accessDenied("Cannot determine the caller's user")
        }
        if sd_bus_creds_get_egid(creds, &gid) < 0 && sd_bus_creds_get_gid(creds, &gid) < 0 {
            gid = gid_t.max
        }
        var groups: UnsafePointer<gid_t>?
        let count = sd_bus_creds_get_supplementary_gids(creds, &groups)
        var pid: pid_t = 0
        return Credentials(
            uid: uid, gid: gid,
            groups: count > 0 && groups != nil ? Array(UnsafeBufferPointer(start: groups, count: Int(count))) : [],
            pid: sd_bus_creds_get_pid(creds, &pid) >= 0 ? pid : nil)
    }
}
