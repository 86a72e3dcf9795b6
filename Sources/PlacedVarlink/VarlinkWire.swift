import PlacedJSON

/// The varlink wire format, for the server and its clients alike: JSON objects, each terminated by a
/// NUL byte. Framing lives here and nowhere else.
public enum VarlinkWire {
    /// The other side broke the protocol: the reason, in a few words.
    public struct ProtocolError: Error, Equatable, CustomStringConvertible {
        public enum Kind: Sendable, Equatable {
            /// A message (complete or not) longer than the framer's limit.
            case tooLarge(limit: Int)
            /// Bytes that are not JSON, or JSON that is not a varlink message.
            case malformed
        }

        public let kind: Kind
        public let description: String

        init(_ kind: Kind, _ description: String) {
            self.kind = kind
            self.description = description
        }
    }

    /// One message on the wire: compact JSON and the NUL terminator.
    public static func frame(_ message: JSON) throws(JSONError) -> [UInt8] {
        var bytes = try message.encoded()
        bytes.append(0)
        return bytes
    }

    /// An error reply, framed. Parameters that cannot be encoded (NaN) are dropped rather than the
    /// error itself.
    public static func frame(error name: String, parameters: [String: JSON]) -> [UInt8] {
        let message: JSON = ["error": .string(name), "parameters": .object(parameters)]
        return (try? frame(message)) ?? (try! frame(["error": .string(name), "parameters": [:]]))
    }

    /// A reply, framed: `{"parameters":{...}}` and `"continues": true` while more follow.
    public static func reply(_ parameters: [String: JSON], continues: Bool = false) throws(JSONError) -> [UInt8] {
        var message: [String: JSON] = ["parameters": .object(parameters)]
        if continues { message["continues"] = .bool(true) }
        return try frame(.object(message))
    }

    /// A reply, framed, whose parameters object `write` appends itself as compact JSON text with its
    /// keys in `JSON.keyPrecedes` order: the bytes `reply(_:continues:)` makes of the same object, for
    /// hot replies that cost more to build as `JSON` values than to write. `capacity`: the expected
    /// size, so the buffer is allocated once. What `write` throws is thrown, and nothing is sent.
    public static func reply<Failure: Error>(
        continues: Bool = false, capacity: Int = 256,
        writingParameters write: (inout [UInt8]) throws(Failure) -> Void
    ) throws(Failure) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(capacity + 32)
        bytes.append(contentsOf: continues ? #"{"continues":true,"parameters":"#.utf8 : #"{"parameters":"#.utf8)
        try write(&bytes)
        bytes.append(UInt8(ascii: "}"))
        bytes.append(0)
        return bytes
    }

    /// A call, framed: `{"method":"io.placed.Places.Watch","more":true,"parameters":{...}}\0`.
    public static func call(_ method: String, parameters: [String: JSON] = [:], more: Bool = false)
        throws(JSONError) -> [UInt8]
    {
        var message: [String: JSON] = ["method": .string(method), "parameters": .object(parameters)]
        if more { message["more"] = true }
        return try frame(.object(message))
    }

    /// One reply: its parameters, or the error it names; `continues` while more replies follow.
    public struct Reply: Equatable, Sendable {
        public var parameters: [String: JSON]
        public var error: String?
        public var continues: Bool

        public init(parameters: [String: JSON], error: String? = nil, continues: Bool = false) {
            self.parameters = parameters
            self.error = error
            self.continues = continues
        }

        /// Reads a reply message; anything but an object with an object (or absent) `parameters`
        /// is a protocol violation.
        public init(_ message: JSON) throws(ProtocolError) {
            guard let object = message.object else { throw ProtocolError(.malformed, "a reply that is not an object") }
            switch object["parameters"] {
            case nil, .null?: parameters = [:]
            case .object(let members)?: parameters = members
            default: throw ProtocolError(.malformed, "reply parameters that are not an object")
            }
            switch object["error"] {
            case nil, .null?: error = nil
            case .string(let name)?: error = name
            default: throw ProtocolError(.malformed, "an error name that is not a string")
            }
            continues = object["continues"]?.bool ?? false
        }
    }

    /// Splits a byte stream into messages at NUL bytes, holding a partial message until the rest
    /// arrives. A message longer than `maximumMessageSize` (without its NUL) is an error, not
    /// unbounded memory: the check holds before the terminator has arrived too.
    ///
    /// Messages are taken from an offset into the buffer, which is compacted only when the messages
    /// it holds have been taken, so a burst of pipelined calls is scanned once and moved at most once.
    public struct Framer: Sendable {
        public let maximumMessageSize: Int
        private var buffer: [UInt8] = []
        /// `buffer[consumed...]` has not been taken yet.
        private var consumed = 0
        /// Where the search for the next NUL resumes, so a message arriving in pieces is scanned once.
        private var scanned = 0

        public init(maximumMessageSize: Int = 16 << 20) { self.maximumMessageSize = maximumMessageSize }

        public mutating func append(_ bytes: some Collection<UInt8>) {
            if consumed == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                consumed = 0
                scanned = 0
            }
            buffer.append(contentsOf: bytes)
        }

        /// The next complete message's bytes, without the NUL; nil until one is complete.
        public mutating func nextMessage() throws(ProtocolError) -> ArraySlice<UInt8>? {
            guard let end = buffer[scanned...].firstIndex(of: 0) else {
                scanned = buffer.count
                if buffer.count - consumed > maximumMessageSize { throw tooLarge }
                return nil
            }
            if end - consumed > maximumMessageSize { throw tooLarge }
            let message = buffer[consumed..<end]
            consumed = end + 1
            scanned = consumed
            return message
        }

        /// The next complete message, parsed; nil until one is complete.
        public mutating func next() throws(ProtocolError) -> JSON? {
            guard let bytes = try nextMessage() else { return nil }
            do {
                return try JSON(parsing: bytes)
            } catch {
                throw ProtocolError(.malformed, "\(error)")
            }
        }

        /// Drops what was taken: an idle peer keeps no buffer, and a peer that pipelines without pause
        /// cannot grow it beyond what it has not been served.
        public mutating func compact() {
            if consumed == buffer.count {
                buffer = []
                consumed = 0
                scanned = 0
            } else if consumed > 0 {
                buffer.removeSubrange(..<consumed)
                scanned -= consumed
                consumed = 0
            }
        }

        /// Bytes received and not yet taken as messages.
        public var pendingCount: Int { buffer.count - consumed }

        private var tooLarge: ProtocolError {
            ProtocolError(.tooLarge(limit: maximumMessageSize), "a message longer than \(maximumMessageSize) bytes")
        }
    }
}
