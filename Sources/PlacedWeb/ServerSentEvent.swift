import PlacedJSON

/// The text/event-stream format (HTML's Server-Sent Events): `event:`, `id:` and `data:` lines and a
/// blank line. JSON in compact form has no line breaks, so one `data:` line carries it.
public enum ServerSentEvent {
    /// How long a page's EventSource waits before reconnecting, sent once at the start of a stream.
    public static func retry(milliseconds: Int) -> [UInt8] { Array("retry: \(milliseconds)\n\n".utf8) }

    public static func frame(event: String, id: Int, data: JSON) -> [UInt8] {
        var bytes = Array("event: \(event)\nid: \(id)\ndata: ".utf8)
        (try? data.encode(into: &bytes)) ?? bytes.append(contentsOf: "null".utf8)
        bytes.append(contentsOf: "\n\n".utf8)
        return bytes
    }

    /// A comment line: keeps the connection from idling out and finds pages that have gone.
    public static let keepAlive = Array(": keep-alive\n\n".utf8)
}
