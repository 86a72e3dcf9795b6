/// An interface the server implements: its varlink IDL text, as `GetInterfaceDescription` returns it.
/// The name and the method names are read from the text, so a call to a method the description does
/// not declare is answered `MethodNotFound` without reaching the handler.
public struct VarlinkInterface: Sendable, Equatable {
    public let name: String
    public let description: String
    public let methods: Set<String>

    /// Nil when the text declares no `interface` name.
    public init?(description: String) {
        let declared = Self.declarations(in: Array(description.utf8))
        guard let name = declared.name else { return nil }
        self.name = name
        self.description = description
        self.methods = declared.methods
    }

    /// The first `interface` name and every `method` name: the second word of each line whose first word
    /// is that keyword (words end at a space, a tab or "("). Read on the UTF-8 bytes, a String made only of
    /// the names: placed's description is 7 kB with non-ASCII in its comments, and splitting it by
    /// Character took 40 % of the daemon's instructions from exec to READY=1.
    static func declarations(in bytes: [UInt8]) -> (name: String?, methods: Set<String>) {
        var name: String?
        var methods: Set<String> = []
        let newline = UInt8(ascii: "\n")
        func isSeparator(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "(")
        }
        bytes.withUnsafeBufferPointer { text in
            var at = 0
            while at < text.count {
                while at < text.count, isSeparator(text[at]) { at += 1 }
                let keywordStart = at
                while at < text.count, text[at] != newline, !isSeparator(text[at]) { at += 1 }
                let keyword = UnsafeBufferPointer(rebasing: text[keywordStart..<at])
                let isInterface = name == nil && keyword.elementsEqual("interface".utf8)
                if isInterface || keyword.elementsEqual("method".utf8) {
                    while at < text.count, isSeparator(text[at]) { at += 1 }
                    let wordStart = at
                    while at < text.count, text[at] != newline, !isSeparator(text[at]) { at += 1 }
                    if at > wordStart {
                        let word = String(decoding: UnsafeBufferPointer(rebasing: text[wordStart..<at]), as: UTF8.self)
                        if isInterface { name = word } else { methods.insert(word) }
                    }
                }
                while at < text.count, text[at] != newline { at += 1 }
                at += 1
            }
        }
        return (name, methods)
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
