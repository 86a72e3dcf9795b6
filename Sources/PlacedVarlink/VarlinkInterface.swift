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
