import PlacedJSON

/// A varlink error reply: a qualified name (`org.varlink.service.InvalidParameter`) and parameters.
/// Handlers throw it; the server sends it as the call's final reply.
public struct VarlinkError: Error, Equatable, CustomStringConvertible {
    public var name: String
    public var parameters: [String: JSON]

    public init(_ name: String, _ parameters: [String: JSON] = [:]) {
        self.name = name
        self.parameters = parameters
    }

    /// The error reply on the wire.
    var framed: [UInt8] { VarlinkWire.frame(error: name, parameters: parameters) }

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
