import FuzzSupport
import PlacedSystem

@testable import PlacedWeb

#if canImport(Glibc)
    import Glibc
#endif

/// A request to placed-web as libmicrohttpd hands it over: method, path, headers, query arguments and
/// body, given to the gateway's own `handle` (routing, Host and Origin checks, the page token, the
/// map's numbers, the select body) in front of a placed in this process, whose replies come back on
/// the same loop. libmicrohttpd's HTTP parsing is not ours and is not fuzzed; the input is an HTTP/1.1
/// request's text, split here as it splits one. A token header `@TOKEN@` is replaced by a token the
/// gateway issued, so the fuzzer reaches what a page with its token can send.
private final class Harness {
    let placed: FuzzDaemon
    let gateway: Gateway
    let listening: Int32

    init() throws {
        placed = try FuzzDaemon()
        var options = WebOptions()
        options.socketPath = placed.socketPath
        // The tree's page: fuzz/Sources/fuzz-web/FuzzWeb.swift is four levels below the tree.
        options.webDirectory = "/" + #filePath.split(separator: "/").dropLast(4).joined(separator: "/") + "/web"
        let address = ListenAddress(host: "127.0.0.1", port: 8080, family: .ipv4)
        // Never accepted on: requests come through `handle`. Port 0: any free one.
        listening = try ListenSocket.listen(on: ListenAddress(host: "127.0.0.1", port: 0, family: .ipv4))
        gateway = try Gateway(options: options, loop: placed.loop, listeningSocket: listening, address: address)
        for _ in 0..<100 { try placed.loop.runOnce(timeout: 1_000) }
    }

    /// The answer to `request`, waiting on the loop for placed's reply.
    func answer(_ request: HTTPRequest) throws -> HTTPAnswer? {
        var answer: HTTPAnswer?
        gateway.handle(request, HTTPResponder { answer = $0 })
        for _ in 0..<2000 where answer == nil { try placed.loop.runOnce(timeout: 1_000) }
        return answer
    }

    func token() throws -> String {
        let page = HTTPRequest(method: "GET", path: "/", headers: [("Host", "127.0.0.1:8080")], query: [])
        guard case .response(let response)? = try answer(page), case .bytes(let bytes) = response.body else {
            fatalError("the page did not come")
        }
        let marker = Array(#"name="placed-token" content=""#.utf8)
        guard let at = bytes.indices.first(where: { bytes[$0...].starts(with: marker) }) else {
            fatalError("no token in the page")
        }
        return String(decoding: bytes[(at + marker.count)...].prefix(32), as: UTF8.self)
    }

    func serve(_ bytes: [UInt8]) throws {
        var request = parse(bytes)
        if request.headers.contains(where: { $0.1 == "@TOKEN@" }) {
            let token = try token()
            request.headers = request.headers.map { ($0.0, $0.1 == "@TOKEN@" ? token : $0.1) }
        }
        let answer = try answer(
            HTTPRequest(
                method: request.method, path: request.path, body: request.body, headers: request.headers,
                query: request.query))
        switch answer {
        case .response(let response)?:
            guard (100...599).contains(response.status) else { fatalError("status \(response.status)") }
        case .stream(let stream, _)?:
            stream.closed()
        case nil:
            fatalError("no answer to \(request.method) \(request.path) within 2 s")
        }
    }
}

/// A request's parts as libmicrohttpd gives them: the request line's method and URL, the headers
/// (name: value, trimmed), the URL's query arguments decoded (`%XX`, `+`), the body after the blank line.
private func parse(_ bytes: [UInt8]) -> (
    method: String, path: String, headers: [(String, String)], query: [(String, String)], body: [UInt8]
) {
    let separator: [UInt8] = Array("\r\n\r\n".utf8)
    var headEnd = bytes.count
    var bodyStart = bytes.count
    if bytes.count >= 4 {
        for index in 0...(bytes.count - 4) where bytes[index..<(index + 4)].elementsEqual(separator) {
            headEnd = index
            bodyStart = index + 4
            break
        }
    }
    let head = String(decoding: bytes[..<headEnd], as: UTF8.self)
    let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
    let requestLine = lines.first.map { $0.split(separator: " ", omittingEmptySubsequences: true) } ?? []
    let method = requestLine.first.map(String.init) ?? "GET"
    let path = requestLine.count > 1 ? String(requestLine[1]) : "/"
    var headers: [(String, String)] = []
    for line in lines.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        let name = line[..<colon].trimmingCharacters(in: " \t")
        let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t")
        headers.append((name, value))
    }
    var query: [(String, String)] = []
    if let mark = path.firstIndex(of: "?") {
        for argument in path[path.index(after: mark)...].split(separator: "&") {
            let pair = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            query.append((decode(pair[0]), pair.count > 1 ? decode(pair[1]) : ""))
        }
    }
    return (method, path, headers, query, Array(bytes[bodyStart...]))
}

private func decode(_ text: Substring) -> String {
    var out: [UInt8] = []
    var bytes = Array(text.utf8)[...]
    while let byte = bytes.popFirst() {
        if byte == UInt8(ascii: "+") {
            out.append(UInt8(ascii: " "))
        } else if byte == UInt8(ascii: "%"), bytes.count >= 2,
            let value = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16)
        {
            out.append(value)
            bytes = bytes.dropFirst(2)
        } else {
            out.append(byte)
        }
    }
    return String(decoding: out, as: UTF8.self)
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}

nonisolated(unsafe) private let harness = try! Harness()

runFuzzer { input in
    try! harness.serve(input.bytes)
}
