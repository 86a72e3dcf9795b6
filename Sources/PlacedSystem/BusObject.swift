import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// One D-Bus object implementing one interface through an sd-bus vtable: sd-bus checks each call's
/// argument types, dispatches it to the method's handler, answers `Introspect` from the vtable, and
/// `Get`/`GetAll`/`Set` of the read-only properties from their getters (`org.freedesktop.DBus.Peer`
/// is sd-bus's own). Declare every member, then register the object on a `Bus`. Loop thread only.
public final class BusObject {
    public let path: String
    public let interface: String

    /// A method handler returns the reply's values; a thrown `BusError` becomes the error reply,
    /// any other error `org.freedesktop.DBus.Error.Failed`.
    public typealias MethodHandler = (BusMethodCall) throws -> [BusValue]
    /// A property getter, given the `Get` or `GetAll` call it answers (nil while announcing a change,
    /// which reaches whom the bus policy lets receive it); a thrown `BusError` becomes that call's
    /// error reply.
    public typealias PropertyGetter = (BusMethodCall?) throws(BusError) -> BusValue

    private struct Method {
        let arguments: [BusArgument]
        let returns: [BusArgument]
        let handler: MethodHandler
    }
    private struct Property {
        let signature: String
        let get: PropertyGetter
    }

    private var methods: [(name: String, method: Method)] = []
    private var properties: [(name: String, property: Property)] = []
    private var signals: [(name: String, arguments: [BusArgument])] = []
    private weak var bus: Bus?
    private var slot: OpaquePointer?
    /// The vtable sd-bus reads for as long as the object is registered, and the C strings it points to.
    private var vtable: UnsafeMutablePointer<sd_bus_vtable>?
    private var strings: [UnsafeMutablePointer<CChar>] = []

    public init(path: String, interface: String) {
        self.path = path
        self.interface = interface
    }

    deinit {
        detach()
        releaseVTable()
    }

    // MARK: Declaring members (before registering)

    /// A method with named arguments, as introspection shows them. A call with other argument types
    /// is answered `InvalidArgs` by sd-bus without reaching the handler.
    public func addMethod(
        _ name: String, arguments: [BusArgument], returns: [BusArgument], _ handler: @escaping MethodHandler
    ) {
        precondition(bus == nil, "declare members before registering the object")
        methods.append((name, Method(arguments: arguments, returns: returns, handler: handler)))
    }

    /// A method with unnamed arguments, given as D-Bus signatures (`"u"`, `"taa{sv}"`, `""`).
    public func addMethod(
        _ name: String, arguments: String = "", returns: String = "", _ handler: @escaping MethodHandler
    ) {
        addMethod(name, arguments: BusArgument.unnamed(arguments), returns: BusArgument.unnamed(returns), handler)
    }

    /// A read-only property that announces its changes (`emitPropertiesChanged`); `get` is asked on
    /// every `Get`, `GetAll` and announcement.
    public func addProperty(_ name: String, signature: String, get: @escaping PropertyGetter) {
        precondition(bus == nil, "declare members before registering the object")
        properties.append((name, Property(signature: signature, get: get)))
    }

    public func addSignal(_ name: String, arguments: [BusArgument]) {
        precondition(bus == nil, "declare members before registering the object")
        signals.append((name, arguments))
    }

    public func addSignal(_ name: String, signature: String) {
        addSignal(name, arguments: BusArgument.unnamed(signature))
    }

    /// What is declared, as D-Bus signatures.
    public struct Members: Equatable, Sendable {
        public var methods: [String: (arguments: String, returns: String)]
        public var properties: [String: String]
        public var signals: [String: String]

        public static func == (a: Members, b: Members) -> Bool {
            a.properties == b.properties && a.signals == b.signals && a.methods.count == b.methods.count
                && a.methods.allSatisfy { name, signature in
                    b.methods[name].map { $0 == signature } ?? false
                }
        }
    }

    public var members: Members {
        Members(
            methods: Dictionary(
                uniqueKeysWithValues: methods.map {
                    (
                        $0.name,
                        (BusArgument.signature(of: $0.method.arguments), BusArgument.signature(of: $0.method.returns))
                    )
                }),
            properties: Dictionary(uniqueKeysWithValues: properties.map { ($0.name, $0.property.signature) }),
            signals: Dictionary(
                uniqueKeysWithValues: signals.map { ($0.name, BusArgument.signature(of: $0.arguments)) }))
    }

    // MARK: Emitting

    /// Emits signal `name`, which must be declared with the arguments' signature.
    public func emitSignal(_ name: String, _ arguments: [BusValue]) throws(SystemError) {
        let signature = arguments.map(\.signature).joined()
        guard signals.contains(where: { $0.name == name && BusArgument.signature(of: $0.arguments) == signature })
        else {
            throw SystemError("signal \(interface).\(name)(\(signature)): not declared so", errno: EINVAL)
        }
        let bus = try registeredBus()
        var message: OpaquePointer?
        try checkSD(
            sd_bus_message_new_signal(bus.handle, &message, path, interface, name), "sd_bus_message_new_signal")
        defer { sd_bus_message_unref(message) }
        try BusMessageBody(message: message!).append(arguments)
        try checkSD(sd_bus_send(bus.handle, message, nil), "sd_bus_send(\(name))")
    }

    /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` with the current values of `names`:
    /// sd-bus asks their getters.
    public func emitPropertiesChanged(_ names: [String]) throws(SystemError) {
        for name in names where !properties.contains(where: { $0.name == name }) {
            throw SystemError("property \(interface).\(name): not declared", errno: EINVAL)
        }
        let bus = try registeredBus()
        var pointers: [UnsafeMutablePointer<CChar>?] = names.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        try checkSD(
            sd_bus_emit_properties_changed_strv(bus.handle, path, interface, &pointers),
            "sd_bus_emit_properties_changed(\(names.joined(separator: ", ")))")
    }

    private func registeredBus() throws(SystemError) -> Bus {
        guard let bus else { throw SystemError("\(path): not registered on a bus", errno: ENOTCONN) }
        return bus
    }

    // MARK: Registration, for Bus

    func attach(to bus: Bus) throws(SystemError) {
        guard self.bus == nil else { throw SystemError("\(path): already registered", errno: EALREADY) }
        let table = buildVTable()
        var slot: OpaquePointer?
        try checkSD(
            sd_bus_add_object_vtable(
                bus.handle, &slot, path, interface, table, Unmanaged.passUnretained(self).toOpaque()),
            "sd_bus_add_object_vtable(\(path))")
        self.slot = slot
        self.bus = bus
    }

    func detach() {
        sd_bus_slot_unref(slot)
        slot = nil
        bus = nil
    }

    /// One element per member between START and END, zeroed first as sd-bus requires; the C strings
    /// live as long as the object.
    private func buildVTable() -> UnsafeMutablePointer<sd_bus_vtable> {
        releaseVTable()
        let count = 2 + methods.count + properties.count + signals.count
        let table = UnsafeMutablePointer<sd_bus_vtable>.allocate(capacity: count)
        table.initialize(repeating: sd_bus_vtable(), count: count)
        func keep(_ text: String) -> UnsafePointer<CChar> {
            let copy = strdup(text)!
            strings.append(copy)
            return UnsafePointer(copy)
        }
        /// SD_BUS_PARAM's layout: every name followed by a NUL (the C string's own NUL ends the last).
        func names(_ arguments: [BusArgument]) -> UnsafePointer<CChar> {
            let bytes: [UInt8] = arguments.flatMap { Array($0.name.utf8) + [UInt8(0)] }
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
            for (index, byte) in bytes.enumerated() { copy[index] = CChar(bitPattern: byte) }
            copy[bytes.count] = 0
            strings.append(copy)
            return UnsafePointer(copy)
        }
        var element = table
        placed_bus_vtable_start(element, 0)
        for (name, method) in methods {
            element += 1
            placed_bus_vtable_method(
                element, keep(name), keep(BusArgument.signature(of: method.arguments)),
                keep(BusArgument.signature(of: method.returns)), names(method.arguments + method.returns),
                { message, userdata, error in
                    guard let message, let userdata else { return 0 }
                    return Unmanaged<BusObject>.fromOpaque(userdata).takeUnretainedValue().call(message, error)
                }, UInt64(SD_BUS_VTABLE_UNPRIVILEGED))
        }
        for (name, property) in properties {
            element += 1
            placed_bus_vtable_property(
                element, keep(name), keep(property.signature),
                { bus, _, _, property, reply, userdata, error in
                    guard let property, let reply, let userdata else { return -EINVAL }
                    return Unmanaged<BusObject>.fromOpaque(userdata).takeUnretainedValue().get(
                        String(cString: property), into: reply, answering: BusMethodCall.propertiesCall(on: bus), error)
                }, UInt64(SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE))
        }
        for (name, arguments) in signals {
            element += 1
            placed_bus_vtable_signal(
                element, keep(name), keep(BusArgument.signature(of: arguments)), names(arguments), 0)
        }
        element += 1
        placed_bus_vtable_end(element)
        vtable = table
        return table
    }

    private func releaseVTable() {
        vtable?.deallocate()
        vtable = nil
        for string in strings { free(string) }
        strings = []
    }

    // MARK: Dispatch (from sd-bus)

    /// Runs the method's handler and sends its reply; an error goes back through `error`, for sd-bus
    /// to reply with.
    private func call(_ message: OpaquePointer, _ replyError: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
        guard let member = sd_bus_message_get_member(message).map({ String(cString: $0) }),
            let method = methods.first(where: { $0.name == member })?.method
        else {
            return fail(replyError, .unknownMethod("No method in \(interface)"))
        }
        do {
            let values = try method.handler(BusMethodCall(message: message, member: member))
            let replySignature = values.map(\.signature).joined()
            let declared = BusArgument.signature(of: method.returns)
            guard replySignature == declared else {
                throw BusError.failed("\(member) replied (\(replySignature)), declared (\(declared))")
            }
            var reply: OpaquePointer?
            try checkSD(sd_bus_message_new_method_return(message, &reply), "sd_bus_message_new_method_return")
            defer { sd_bus_message_unref(reply) }
            try BusMessageBody(message: reply!).append(values)
            try checkSD(sd_bus_send(nil, reply, nil), "sd_bus_send")
            return 1
        } catch let busError as BusError {
            return fail(replyError, busError)
        } catch {
            return fail(replyError, .failed(String(describing: error)))
        }
    }

    private func get(
        _ name: String, into reply: OpaquePointer, answering call: BusMethodCall?,
        _ replyError: UnsafeMutablePointer<sd_bus_error>?
    ) -> Int32 {
        guard let property = properties.first(where: { $0.name == name })?.property else {
            return fail(replyError, .unknownProperty("No property \(name) in \(interface)"))
        }
        do throws(BusError) {
            let value = try property.get(call)
            guard value.signature == property.signature else {
                throw BusError.failed("property \(name) has type \(value.signature), declared \(property.signature)")
            }
            do {
                try BusMessageBody(message: reply).append(value)
            } catch {
                throw BusError(errno: error.errno, error.call)
            }
            return 1
        } catch {
            return fail(replyError, error)
        }
    }

    /// Sets `error` for sd-bus's reply; the return value is what a vtable callback returns for it.
    private func fail(_ error: UnsafeMutablePointer<sd_bus_error>?, _ busError: BusError) -> Int32 {
        sd_bus_error_set(error, busError.name, busError.message)
    }
}

/// A method's or signal's argument as introspection shows it: a name and a D-Bus signature.
public struct BusArgument: Equatable, Sendable {
    public var name: String
    public var signature: String

    public init(_ name: String, _ signature: String) {
        self.name = name
        self.signature = signature
    }

    /// One unnamed argument per complete type in `signature`.
    static func unnamed(_ signature: String) -> [BusArgument] {
        BusValue.completeTypes(of: signature).map { BusArgument("", $0) }
    }

    static func signature(of arguments: [BusArgument]) -> String { arguments.map(\.signature).joined() }
}

/// The method call being handled. Valid only during the handler: the message belongs to sd-bus.
public struct BusMethodCall {
    let message: OpaquePointer
    /// The method name.
    public let member: String

    /// The sender's unique name (`:1.42`): the same for every call of one connection, never reused.
    public var sender: String? { sd_bus_message_get_sender(message).map { String(cString: $0) } }

    /// The `org.freedesktop.DBus.Properties` call `bus` is answering now, if it is answering one.
    static func propertiesCall(on bus: OpaquePointer?) -> BusMethodCall? {
        guard let message = sd_bus_get_current_message(bus),
            sd_bus_message_is_method_call(message, "org.freedesktop.DBus.Properties", nil) > 0,
            let member = sd_bus_message_get_member(message)
        else { return nil }
        return BusMethodCall(message: message, member: String(cString: member))
    }

    /// The arguments, already checked against the declared signature.
    public func arguments() throws(BusError) -> [BusValue] {
        sd_bus_message_rewind(message, 1)
        do {
            return try BusMessageBody(message: message).readAll()
        } catch {
            throw BusError.invalidArgs("Cannot read arguments: \(error)")
        }
    }

    /// The sender's credentials, as the bus driver took them when the sender connected
    /// (`GetConnectionCredentials`: user, every group, pid). A round trip to the bus driver: ask once
    /// per connection. Not from /proc, which a hardened service (`ProtectProc=invisible`) cannot read.
    public func credentials() throws(BusError) -> Credentials {
        guard let sender else { throw BusError.accessDenied("Cannot determine the caller: no sender") }
        var call: OpaquePointer?
        let bus = sd_bus_message_get_bus(message)
        var status = sd_bus_message_new_method_call(
            bus, &call, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
            "GetConnectionCredentials")
        guard status >= 0, let call else { throw BusError(errno: -status, "GetConnectionCredentials") }
        defer { sd_bus_message_unref(call) }
        do {
            try BusMessageBody(message: call).append(.string(sender))
        } catch {
            throw BusError(errno: error.errno, error.call)
        }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        status = sd_bus_call(bus, call, 0, &error, &reply)
        guard status >= 0, let reply else {
            throw BusError.accessDenied(
                "Cannot determine the caller's credentials: \(error.message.map { String(cString: $0) } ?? "")")
        }
        defer { sd_bus_message_unref(reply) }
        let values: [BusValue]
        do {
            values = try BusMessageBody(message: reply).readAll()
        } catch {
            throw BusError.accessDenied("Cannot read the caller's credentials: \(error)")
        }
        guard let found = values.first?.dictionary, let uid = found["UnixUserID"]?.uint32 else {
            throw BusError.accessDenied("Cannot determine the caller's user")
        }
        // UnixGroupIDs holds the primary group and the supplementary ones, in no particular order.
        let groups = found["UnixGroupIDs"]?.uint32s ?? []
        return Credentials(
            uid: uid, gid: gid_t.max, groups: groups, pid: found["ProcessID"]?.uint32.map { pid_t(bitPattern: $0) })
    }
}
