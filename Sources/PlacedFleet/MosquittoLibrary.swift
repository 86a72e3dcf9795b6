import CMosquitto
import PlacedSystem

#if canImport(Glibc)
    import Glibc
#endif

/// libmosquitto, opened when the fleet export first needs it. placed does not link it: the library
/// brings libssl and libcrypto, 2 MB of resident memory that a device without a `Broker=` should not
/// pay. Each function is called through a pointer of the type its header declares (CMosquitto/shim.h).
struct MosquittoLibrary: @unchecked Sendable {
    static let soname = "libmosquitto.so.1"

    let libInit: placed_mosquitto_lib_init_fn
    let libVersion: placed_mosquitto_lib_version_fn
    let strerror: placed_mosquitto_strerror_fn
    let connackString: placed_mosquitto_connack_string_fn
    let reasonString: placed_mosquitto_reason_string_fn
    let new: placed_mosquitto_new_fn
    let destroy: placed_mosquitto_destroy_fn
    let userDataSet: placed_mosquitto_user_data_set_fn
    let intOption: placed_mosquitto_int_option_fn
    let maxInflightMessagesSet: placed_mosquitto_max_inflight_messages_set_fn
    let willSet: placed_mosquitto_will_set_fn
    let usernamePasswordSet: placed_mosquitto_username_pw_set_fn
    let tlsSet: placed_mosquitto_tls_set_fn
    let tlsOptionsSet: placed_mosquitto_tls_opts_set_fn
    let tlsInsecureSet: placed_mosquitto_tls_insecure_set_fn
    let connectCallbackSet: placed_mosquitto_connect_v5_callback_set_fn
    let publishCallbackSet: placed_mosquitto_publish_v5_callback_set_fn
    let disconnectCallbackSet: placed_mosquitto_disconnect_v5_callback_set_fn
    let logCallbackSet: placed_mosquitto_log_callback_set_fn
    let propertyAddInt32: placed_mosquitto_property_add_int32_fn
    let propertyFreeAll: placed_mosquitto_property_free_all_fn
    let connectBindV5: placed_mosquitto_connect_bind_v5_fn
    let connectAsync: placed_mosquitto_connect_async_fn
    let socket: placed_mosquitto_socket_fn
    let publish: placed_mosquitto_publish_fn
    let disconnect: placed_mosquitto_disconnect_fn
    let loopRead: placed_mosquitto_loop_read_fn
    let loopWrite: placed_mosquitto_loop_write_fn
    let loopMisc: placed_mosquitto_loop_misc_fn
    let wantWrite: placed_mosquitto_want_write_fn
    let subscribe: placed_mosquitto_subscribe_fn
    let subscribeCallbackSet: placed_mosquitto_subscribe_callback_set_fn
    let messageCallbackSet: placed_mosquitto_message_callback_set_fn

    /// The library, opened and initialized once per process; the same failure every time it cannot be.
    static func shared() throws(FleetError) -> MosquittoLibrary {
        switch loaded {
        case .success(let library): return library
        case .failure(let error): throw error
        }
    }

    private static let loaded: Result<MosquittoLibrary, FleetError> = {
        do throws(FleetError) {
            let library = try MosquittoLibrary()
            _ = library.libInit()
            return .success(library)
        } catch {
            return .failure(error)
        }
    }()

    private init() throws(FleetError) {
        let library: SharedLibrary
        do {
            library = try SharedLibrary(Self.soname)
        } catch {
            throw .client("cannot load \(Self.soname) (Debian package libmosquitto1): \(error.reason)")
        }
        func symbol<Function>(_ name: String, as type: Function.Type) throws(FleetError) -> Function {
            guard let function = library.function(name, as: type) else {
                throw .client("\(Self.soname) has no \(name): libmosquitto 2.0 or later is needed")
            }
            return function
        }
        libInit = try symbol("mosquitto_lib_init", as: placed_mosquitto_lib_init_fn.self)
        libVersion = try symbol("mosquitto_lib_version", as: placed_mosquitto_lib_version_fn.self)
        strerror = try symbol("mosquitto_strerror", as: placed_mosquitto_strerror_fn.self)
        connackString = try symbol("mosquitto_connack_string", as: placed_mosquitto_connack_string_fn.self)
        reasonString = try symbol("mosquitto_reason_string", as: placed_mosquitto_reason_string_fn.self)
        new = try symbol("mosquitto_new", as: placed_mosquitto_new_fn.self)
        destroy = try symbol("mosquitto_destroy", as: placed_mosquitto_destroy_fn.self)
        userDataSet = try symbol("mosquitto_user_data_set", as: placed_mosquitto_user_data_set_fn.self)
        intOption = try symbol("mosquitto_int_option", as: placed_mosquitto_int_option_fn.self)
        maxInflightMessagesSet = try symbol(
            "mosquitto_max_inflight_messages_set", as: placed_mosquitto_max_inflight_messages_set_fn.self)
        willSet = try symbol("mosquitto_will_set", as: placed_mosquitto_will_set_fn.self)
        usernamePasswordSet = try symbol("mosquitto_username_pw_set", as: placed_mosquitto_username_pw_set_fn.self)
        tlsSet = try symbol("mosquitto_tls_set", as: placed_mosquitto_tls_set_fn.self)
        tlsOptionsSet = try symbol("mosquitto_tls_opts_set", as: placed_mosquitto_tls_opts_set_fn.self)
        tlsInsecureSet = try symbol("mosquitto_tls_insecure_set", as: placed_mosquitto_tls_insecure_set_fn.self)
        connectCallbackSet = try symbol(
            "mosquitto_connect_v5_callback_set", as: placed_mosquitto_connect_v5_callback_set_fn.self)
        publishCallbackSet = try symbol(
            "mosquitto_publish_v5_callback_set", as: placed_mosquitto_publish_v5_callback_set_fn.self)
        disconnectCallbackSet = try symbol(
            "mosquitto_disconnect_v5_callback_set", as: placed_mosquitto_disconnect_v5_callback_set_fn.self)
        logCallbackSet = try symbol("mosquitto_log_callback_set", as: placed_mosquitto_log_callback_set_fn.self)
        propertyAddInt32 = try symbol("mosquitto_property_add_int32", as: placed_mosquitto_property_add_int32_fn.self)
        propertyFreeAll = try symbol("mosquitto_property_free_all", as: placed_mosquitto_property_free_all_fn.self)
        connectBindV5 = try symbol("mosquitto_connect_bind_v5", as: placed_mosquitto_connect_bind_v5_fn.self)
        connectAsync = try symbol("mosquitto_connect_async", as: placed_mosquitto_connect_async_fn.self)
        socket = try symbol("mosquitto_socket", as: placed_mosquitto_socket_fn.self)
        publish = try symbol("mosquitto_publish", as: placed_mosquitto_publish_fn.self)
        disconnect = try symbol("mosquitto_disconnect", as: placed_mosquitto_disconnect_fn.self)
        loopRead = try symbol("mosquitto_loop_read", as: placed_mosquitto_loop_read_fn.self)
        loopWrite = try symbol("mosquitto_loop_write", as: placed_mosquitto_loop_write_fn.self)
        loopMisc = try symbol("mosquitto_loop_misc", as: placed_mosquitto_loop_misc_fn.self)
        wantWrite = try symbol("mosquitto_want_write", as: placed_mosquitto_want_write_fn.self)
        subscribe = try symbol("mosquitto_subscribe", as: placed_mosquitto_subscribe_fn.self)
        subscribeCallbackSet = try symbol(
            "mosquitto_subscribe_callback_set", as: placed_mosquitto_subscribe_callback_set_fn.self)
        messageCallbackSet = try symbol(
            "mosquitto_message_callback_set", as: placed_mosquitto_message_callback_set_fn.self)
    }

    func describe(_ rc: Int32) -> String { text(strerror(rc)) }

    /// A string libmosquitto returned (its own static text), without its closing full stop: it goes in the
    /// middle of log lines ("...: The connection was lost; trying ...").
    func text(_ pointer: UnsafePointer<CChar>?) -> String {
        guard let pointer else { return "?" }
        let text = String(cString: pointer)
        return text.hasSuffix(".") ? String(text.dropLast()) : text
    }

    var version: String {
        var major: Int32 = 0
        var minor: Int32 = 0
        var revision: Int32 = 0
        _ = libVersion(&major, &minor, &revision)
        return "\(major).\(minor).\(revision)"
    }
}
