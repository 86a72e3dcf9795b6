import PlacedJSON
import PlacedSystem

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
        let bytes = try VarlinkWire.reply(parameters, continues: continues)
        let sent = oneway || connection.send(bytes)
        if !continues { finish() }
        return sent
    }

    /// `reply(_:continues:)` with parameters written as JSON text by `write`: see
    /// `VarlinkWire.reply(continues:capacity:writingParameters:)`; when `write` throws, nothing is sent
    /// and the call stays open.
    @discardableResult
    public func reply<Failure: Error>(
        continues: Bool = false, capacity: Int = 256,
        writingParameters write: (inout [UInt8]) throws(Failure) -> Void
    ) throws(Failure) -> Bool {
        guard !isFinished, let connection else { return false }
        let continues = continues && more
        let bytes = try VarlinkWire.reply(continues: continues, capacity: capacity, writingParameters: write)
        let sent = oneway || connection.send(bytes)
        if !continues { finish() }
        return sent
    }

    /// Sends `error` as the final reply.
    @discardableResult
    public func fail(_ error: VarlinkError) -> Bool {
        guard !isFinished, let connection else { return false }
        let sent = oneway || connection.send(error.framed)
        finish()
        return sent
    }

    /// Answers `ExpectedMore` unless the client called with `"more": true`.
    public func requireMore() throws(VarlinkError) {
        if !more { throw .expectedMore }
    }

    // MARK: Parameters

    /// A required parameter, converted by `extract` (e.g. `\.string`, `\.int`); a missing, null or
    /// wrongly typed one is the client's `InvalidParameter`. Inlinable, so that it is specialized where it
    /// is called (the generic one looked up `Optional<T>`'s metadata on every call).
    @inlinable
    public func required<T>(_ name: String, _ extract: (JSON) -> T?) throws(VarlinkError) -> T {
        guard let value = parameters[name], let converted = extract(value) else {
            throw .invalidParameter(name)
        }
        return converted
    }

    /// An optional parameter: nil when absent or null, `InvalidParameter` when of the wrong type.
    @inlinable
    public func optional<T>(_ name: String, _ extract: (JSON) -> T?) throws(VarlinkError) -> T? {
        guard let value = parameters[name], value != .null else { return nil }
        guard let converted = extract(value) else { throw .invalidParameter(name) }
        return converted
    }

    /// `InvalidParameter` for the first parameter (in name order) not in `names`. An array, not a set:
    /// a handful of names is searched faster than a set is built on every call.
    public func rejectUnknownParameters(allowing names: [String]) throws(VarlinkError) {
        var unknown: String?
        for key in parameters.keys where !names.contains(key) {
            if unknown.map({ key < $0 }) ?? true { unknown = key }
        }
        if let unknown { throw .invalidParameter(unknown) }
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
