import PlacedCore

/// A varlink error reply: a qualified name (`org.varlink.service.InvalidParameter`) and parameters.
/// Handlers throw it; the server sends it as the call's final reply.
public struct VarlinkError: Error, Equatable, CustomStringConvertible {
    public var name: String
    public var parameters: [String: JSON]

    public init(_ name: String, _ parameters: [String: JSON] = [:]) {
        self.name = name
        self.parameters = parameters
    }

    public var description: String {
        parameters.isEmpty ? name : "\(name) \(JSON.object(parameters))"
    }

    // The errors of org.varlink.service, which every varlink client knows.
    public static func interfaceNotFound(_ interface: String) -> VarlinkError {
        VarlinkError("org.varlink.service.InterfaceNotFound", ["interface": .string(interface)])
    }
    public static func methodNotFound(_ method: String) -> VarlinkError {
        VarlinkError("org.varlink.service.MethodNotFound", ["method": .string(method)])
    }
    public static func methodNotImplemented(_ method: String) -> VarlinkError {
        VarlinkError("org.varlink.service.MethodNotImplemented", ["method": .string(method)])
    }
    public static func invalidParameter(_ parameter: String) -> VarlinkError {
        VarlinkError("org.varlink.service.InvalidParameter", ["parameter": .string(parameter)])
    }
    public static let permissionDenied = VarlinkError("org.varlink.service.PermissionDenied")
    /// The method only makes sense with `"more": true` (e.g. a watch).
    public static let expectedMore = VarlinkError("org.varlink.service.ExpectedMore")
}

/// An interface the server implements: its varlink IDL text, as `GetInterfaceDescription` returns it.
/// The name and the method names are read from the text, so a call to a method the description does
/// not declare is answered `MethodNotFound` without reaching the handler.
public struct VarlinkInterface: Sendable, Equatable {
    public let name: String
    public let description: String
    public let methods: Set<String>

    /// Nil when the text declares no `interface` name.
    public init?(description: String) {
        var name: String?
        var methods: Set<String> = []
        for line in description.split(separator: "\n") {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "(" })
            guard words.count >= 2 else { continue }
            switch words[0] {
            case "interface" where name == nil: name = String(words[1])
            case "method": methods.insert(String(words[1]))
            default: continue
            }
        }
        guard let name else { return nil }
        self.name = name
        self.description = description
        self.methods = methods
    }

    /// The service interface every varlink server implements (text from the varlink specification).
    public static let service = VarlinkInterface(
        description: """
            # The Varlink Service Interface is provided by every varlink service. It
            # describes the service and the interfaces it implements.
            interface org.varlink.service

            # Get a list of all the interfaces a service provides and information
            # about the implementation.
            method GetInfo() -> (
              vendor: string,
              product: string,
              version: string,
              url: string,
              interfaces: []string
            )

            # Get the description of an interface that is implemented by this service.
            method GetInterfaceDescription(interface: string) -> (description: string)

            # The requested interface was not found.
            error InterfaceNotFound (interface: string)

            # The requested method was not found
            error MethodNotFound (method: string)

            # The interface defines the requested method, but the service does not
            # implement it.
            error MethodNotImplemented (method: string)

            # One of the passed parameters is invalid.
            error InvalidParameter (parameter: string)

            # Client is denied access
            error PermissionDenied ()

            # Method is expected to be called with 'more' set to true, but wasn't
            error ExpectedMore ()

            """)!
}

/// One method call from a client. Answer it once with `reply` or `fail`; a call made with `more`
/// may first send any number of `reply(_:continues: true)`. Keep the object to answer later: the
/// connection reads no further calls until this one is finished (as the varlink protocol orders
/// replies), but other clients are unaffected. Loop thread only.
public final class VarlinkCall {
    /// Fully qualified: `io.placed.Places.Watch`.
    public let method: String
    /// `io.placed.Places` of `io.placed.Places.Watch`.
    public let interface: String
    /// `Watch` of `io.placed.Places.Watch`.
    public let member: String
    public let parameters: [String: JSON]
    /// The client accepts several replies (`"more": true`).
    public let more: Bool
    /// The client wants no reply (`"oneway": true`); replies are dropped.
    public let oneway: Bool
    /// The peer's credentials, taken when it connected.
    public let credentials: Credentials

    /// Called once if the client disconnects (or is dropped) before the call finished.
    public var onCancel: (() -> Void)?

    public private(set) var isFinished = false
    weak var connection: VarlinkConnection?

    init(
        method: String, parameters: [String: JSON], more: Bool, oneway: Bool,
        connection: VarlinkConnection
    ) {
        self.method = method
        let dot = method.lastIndex(of: ".")
        interface = String(method[..<(dot ?? method.startIndex)])
        member = dot.map { String(method[method.index(after: $0)...]) } ?? method
        self.parameters = parameters
        self.more = more
        self.oneway = oneway
        self.credentials = connection.credentials
        self.connection = connection
    }

    /// Sends a reply. With `continues` (only for calls made with `more`; otherwise the reply is sent
    /// as the final one) the call stays open for more replies. Returns whether the reply was queued:
    /// false once the call is finished or the client is gone. Throws, sending nothing, when the
    /// parameters cannot be encoded (NaN or infinity).
    @discardableResult
    public func reply(_ parameters: [String: JSON] = [:], continues: Bool = false) throws(JSONError)
        -> Bool
    {
        guard !isFinished, let connection else { return false }
        let continues = continues && more
        var message: [String: JSON] = ["parameters": .object(parameters)]
        if continues { message["continues"] = .bool(true) }
        let bytes = try VarlinkServer.frame(.object(message))
        let sent = oneway || connection.send(bytes)
        if !continues { finish() }
        return sent
    }

    /// Sends `error` as the final reply.
    @discardableResult
    public func fail(_ error: VarlinkError) -> Bool {
        guard !isFinished, let connection else { return false }
        let sent = oneway || connection.send(VarlinkServer.frame(error: error))
        finish()
        return sent
    }

    /// Answers `ExpectedMore` unless the client called with `"more": true`.
    public func requireMore() throws(VarlinkError) {
        if !more { throw .expectedMore }
    }

    // MARK: Parameters

    /// A required parameter, converted by `extract` (e.g. `\.string`, `\.int`); a missing, null or
    /// wrongly typed one is the client's `InvalidParameter`.
    public func required<T>(_ name: String, _ extract: (JSON) -> T?) throws(VarlinkError) -> T {
        guard let value = parameters[name], let converted = extract(value) else {
            throw .invalidParameter(name)
        }
        return converted
    }

    /// An optional parameter: nil when absent or null, `InvalidParameter` when of the wrong type.
    public func optional<T>(_ name: String, _ extract: (JSON) -> T?) throws(VarlinkError) -> T? {
        guard let value = parameters[name], value != .null else { return nil }
        guard let converted = extract(value) else { throw .invalidParameter(name) }
        return converted
    }

    /// `InvalidParameter` for the first parameter (in name order) not in `names`.
    public func rejectUnknownParameters(allowing names: Set<String>) throws(VarlinkError) {
        if let unknown = parameters.keys.filter({ !names.contains($0) }).min() {
            throw .invalidParameter(unknown)
        }
    }

    // MARK: Lifecycle, for the connection

    private func finish() {
        isFinished = true
        onCancel = nil
        connection?.callFinished(self)
    }

    /// A oneway call after dispatch: nothing more goes to the client.
    func detach() {
        isFinished = true
        onCancel = nil
    }

    /// The client went away first.
    func cancel() {
        guard !isFinished else { return }
        isFinished = true
        let handler = onCancel
        onCancel = nil
        handler?()
    }
}
