import PlacedJSON
import Testing

@testable import PlacedWeb

/// What placed-web takes from the command line and from a request's headers, decided without I/O.
@Suite struct ListenAddressTests {
    @Test func parsesIPv4IPv6AndLocalhost() throws {
        #expect(
            try ListenAddress(parsing: "127.0.0.1:8080") == ListenAddress(host: "127.0.0.1", port: 8080, family: .ipv4))
        #expect(try ListenAddress(parsing: "[::1]:9000") == ListenAddress(host: "::1", port: 9000, family: .ipv6))
        #expect(try ListenAddress(parsing: "localhost:80").host == "127.0.0.1")
        #expect(try ListenAddress(parsing: "0.0.0.0:8080").isWildcard)
        #expect(try ListenAddress(parsing: "127.5.0.1:1").isLoopback)
        #expect(try !ListenAddress(parsing: "192.0.2.1:8080").isLoopback)
        #expect(try ListenAddress(parsing: "[::1]:9000").description == "[::1]:9000")
    }

    @Test(arguments: [
        "8080", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "256.0.0.1:80", "example.com:80", "[::1]80",
        "[zz]:80", "1.2.3:80", ":80",
    ])
    func refusesWhatIsNotAnAddressAndPort(_ text: String) {
        #expect(throws: ListenAddress.ParseError.self) { try ListenAddress(parsing: text) }
    }
}

@Suite struct RequestPolicyTests {
    let loopback = RequestPolicy(address: ListenAddress(host: "127.0.0.1", port: 8080, family: .ipv4))

    @Test func loopbackTakesItsNamesWithThePort() throws {
        for host in ["127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "[::1]:8080"] {
            try loopback.checkHost(host)
        }
        for host in ["evil.example:8080", "127.0.0.1:8081", "127.0.0.1", "", "localhost"] {
            #expect(throws: HTTPFailure.forbiddenHost) { try loopback.checkHost(host) }
        }
        #expect(throws: HTTPFailure.forbiddenHost) { try loopback.checkHost(nil) }
    }

    /// Listening on every address, the Host is still checked: an address, localhost or the machine's own
    /// name, never a name whose DNS someone else answers (rebinding it to this machine).
    @Test func wildcardTakesAddressesAndTheMachinesNamesOnly() throws {
        for listen in [
            ListenAddress(host: "0.0.0.0", port: 8080, family: .ipv4),
            ListenAddress(host: "::", port: 8080, family: .ipv6),
        ] {
            let any = RequestPolicy(address: listen, machineName: "Kiosk-7")
            for host in [
                "192.0.2.7:8080", "127.0.0.1:8080", "[fd00::7]:8080", "[::1]:8080", "[::ffff:192.0.2.7]:8080",
                "localhost:8080", "kiosk-7:8080", "KIOSK-7:8080",
            ] {
                try any.checkHost(host)
            }
            for host in [
                "evil.example:8080", "kiosk-7.evil.example:8080", "192.0.2.7:8081", "192.0.2.7", "192.0.2.7:",
                "192.0.2.7:+8080", "[fd00::7]", "[fd00::7]8080", "[evil.example]:8080", "fd00::7:8080", "1.2.3:8080",
                "localhost", "", "0x7f.1:8080",
            ] {
                #expect(throws: HTTPFailure.forbiddenHost, "\(host)") { try any.checkHost(host) }
            }
            #expect(throws: HTTPFailure.forbiddenHost) { try any.checkHost(nil) }
        }
        let onPort80 = RequestPolicy(address: ListenAddress(host: "0.0.0.0", port: 80, family: .ipv4), machineName: nil)
        for host in ["192.0.2.7", "192.0.2.7:80", "[fd00::7]", "localhost"] { try onPort80.checkHost(host) }
        #expect(throws: HTTPFailure.forbiddenHost) { try onPort80.checkHost("kiosk-7") }
    }

    @Test func originMustBeThePagesOwn() throws {
        try loopback.checkOrigin("http://127.0.0.1:8080", host: "127.0.0.1:8080")
        try loopback.checkOrigin("http://localhost:8080", host: "localhost:8080")
        for origin in [nil, "null", "http://evil.example", "https://127.0.0.1:8080", "http://127.0.0.1:8080/x"] {
            #expect(throws: HTTPFailure.forbiddenOrigin) { try loopback.checkOrigin(origin, host: "127.0.0.1:8080") }
        }
        #expect(throws: HTTPFailure.forbiddenOrigin) { try loopback.checkOrigin("http://127.0.0.1:8080", host: nil) }
    }

    @Test func onlyJSONBodies() {
        #expect(RequestPolicy.isJSON("application/json"))
        #expect(RequestPolicy.isJSON("Application/JSON; charset=utf-8"))
        #expect(!RequestPolicy.isJSON("text/plain"))
        #expect(!RequestPolicy.isJSON("application/x-www-form-urlencoded"))
        #expect(!RequestPolicy.isJSON(nil))
    }
}

@Suite struct PageTokensTests {
    static func bytes(_ seed: UInt8) -> [UInt8] { (0..<16).map { $0 &+ seed } }

    @Test func issuedTokensAreAcceptedOthersNot() {
        var tokens = PageTokens()
        let token = tokens.issue(randomBytes: Self.bytes(1))
        #expect(token == "0102030405060708090a0b0c0d0e0f10")
        let accepted1 = tokens.accept(token)
        #expect(accepted1)
        let accepted2 = tokens.accept("f" + token.dropFirst())
        #expect(!accepted2)
        let accepted3 = tokens.accept(nil)
        #expect(!accepted3)
        let accepted4 = tokens.accept("")
        #expect(!accepted4)
    }

    @Test func keepsTheNewestAndRefreshesUsedOnes() {
        var tokens = PageTokens(capacity: 2)
        let first = tokens.issue(randomBytes: Self.bytes(1))
        let second = tokens.issue(randomBytes: Self.bytes(2))
        let refreshed = tokens.accept(first)  // now the newest
        #expect(refreshed)
        let third = tokens.issue(randomBytes: Self.bytes(3))
        #expect(tokens.count == 2)
        let accepted5 = tokens.accept(first)
        let accepted6 = tokens.accept(third)
        #expect(accepted5 && accepted6)
        let accepted7 = tokens.accept(second)
        #expect(!accepted7, "the oldest unused token went")
    }
}

@Suite struct KioskStateTests {
    static let place: JSON = ["id": "osm:node/1", "name": "Café", "likelihood": 0.5]
    static let location: JSON = ["latitude": 60.17, "longitude": 24.94, "accuracy": 12.0]

    @Test func firstReplyReplacesLaterRepliesMerge() {
        var state = KioskState()
        #expect(state.snapshot["upstream"] == "connecting")
        state.apply(
            watchReply: ["generation": 3, "stale": false, "location": Self.location, "places": [Self.place]],
            first: true)
        #expect(state.snapshot["upstream"] == "connected")
        #expect(state.snapshot["generation"] == 3 && state.places == [Self.place])
        // A marker reply has no places: the ranking stays.
        let marker: JSON = ["place": Self.place, "selection": 7]
        state.apply(watchReply: ["generation": 3, "stale": false, "marker": marker], first: false)
        #expect(state.places == [Self.place] && state.marker == marker)
        // A change of staleness alone.
        state.apply(watchReply: ["generation": 3, "stale": true], first: false)
        #expect(state.snapshot["stale"] == true && state.marker == marker)
        // A visit, then its end.
        state.apply(watchReply: ["generation": 3, "stale": true, "visit": ["place": Self.place]], first: false)
        #expect(state.snapshot["visit"]?["place"] == Self.place)
        state.apply(watchReply: ["generation": 4, "stale": false, "places": [Self.place]], first: false)
        #expect(state.snapshot["visit"]?["place"] == Self.place, "a ranking during the visit keeps it")
        state.apply(
            watchReply: [
                "generation": 4, "stale": false, "visit": ["place": Self.place, "ended": "2026-12-01T10:00:00Z"],
            ],
            first: false)
        #expect(state.snapshot["visit"] == nil, "an ended visit is over")
        // A new Watch (placed restarted) starts from scratch.
        state.apply(watchReply: ["generation": 1, "stale": false, "places": []], first: true)
        #expect(state.marker == nil && state.location == nil && state.generation == 1)
    }

    @Test func losingPlacedKeepsTheLastRanking() {
        var state = KioskState()
        state.apply(watchReply: ["generation": 2, "stale": false, "places": [Self.place]], first: true)
        state.lose("connect(/run/placed/io.placed.Places): No such file or directory")
        #expect(state.snapshot["upstream"] == "unreachable")
        #expect(state.snapshot["reason"] == "connect(/run/placed/io.placed.Places): No such file or directory")
        #expect(state.places == [Self.place])
    }
}

@Suite struct ServerSentEventTests {
    @Test func framesAreEventIdAndOneDataLine() throws {
        let bytes = ServerSentEvent.frame(event: "state", id: 4, data: ["name": "line\nbreak"])
        #expect(String(decoding: bytes, as: UTF8.self) == "event: state\nid: 4\ndata: {\"name\":\"line\\nbreak\"}\n\n")
        #expect(String(decoding: ServerSentEvent.retry(milliseconds: 2000), as: UTF8.self) == "retry: 2000\n\n")
    }
}

@Suite struct WebOptionsTests {
    @Test func defaults() throws {
        let options = try WebOptions(arguments: [])
        #expect(options.socketPath == "/run/placed/io.placed.Places")
        #expect(options.listen.description == "127.0.0.1:8080")
        #expect(options.webDirectory == "/usr/share/placed/web")
        #expect(options.leafletDirectory == "/usr/share/javascript/leaflet")
    }

    @Test func flagsWithSpaceOrEquals() throws {
        let options = try WebOptions(arguments: [
            "--socket=/tmp/s", "--listen", "[::1]:9000", "--max-event-clients", "3", "--max-connections=10",
        ])
        #expect(options.socketPath == "/tmp/s" && options.listen.family == .ipv6)
        #expect(options.maximumEventClients == 3 && options.maximumConnections == 10)
    }

    @Test(arguments: [
        (["--listen", "nope"], "--listen nope: expected ADDRESS:PORT, such as 127.0.0.1:8080"),
        (["--max-event-clients", "0"], "--max-event-clients 0: expected a number from 1 to 256"),
        (
            ["--max-connections", "4", "--max-event-clients", "4"],
            "--max-event-clients must be below --max-connections (pages need to load too)"
        ),
        (["--bogus"], "unknown option --bogus"), (["stray"], "unexpected argument stray"),
        (["--socket"], "--socket needs a value"),
    ])
    func usageErrors(_ arguments: [String], _ message: String) {
        #expect(throws: WebOptions.UsageError(description: message)) { try WebOptions(arguments: arguments) }
    }
}

@Suite struct UpstreamFailureTests {
    @Test func placedErrorsBecomeNamedHTTPErrors() {
        #expect(Gateway.failure(.unreachable("gone")).status == 503)
        #expect(Gateway.failure(.timedOut).status == 504)
        let notInRanking = Gateway.failure(.replied(name: "io.placed.Places.NotInRanking", parameters: [:]))
        #expect(notInRanking.status == 409 && notInRanking.name == "not-in-ranking")
        #expect(Gateway.failure(.replied(name: "io.placed.Places.PermissionDenied", parameters: [:])).status == 502)
        #expect(Gateway.failure(.replied(name: "io.placed.Places.InvalidRadius", parameters: [:])).status == 400)
    }
}

@Suite struct EventStreamTests {
    /// A page that always leaves a few bytes unread: the stream holds about what is unsent, not every
    /// byte ever sent, and the page gets every byte in order.
    @Test func aPageThatNeverCatchesUpHoldsOnlyWhatIsUnsent() {
        let stream = EventStream(maximumBacklog: 10_000)
        var received: [UInt8] = []
        var chunk = [CChar](repeating: 0, count: 90)
        for round in 0..<500 {
            stream.send((0..<100).map { UInt8(truncatingIfNeeded: round &+ $0) })
            let count = stream.read(into: &chunk, maximum: chunk.count)
            received += chunk[..<count].map { UInt8(bitPattern: $0) }
        }
        let unsent = 500 * 100 - received.count
        #expect(unsent == 5_000 && !stream.isClosed)
        #expect(stream.bufferedByteCount <= 2 * unsent + 100, "\(stream.bufferedByteCount) bytes held")
        let expected = (0..<500).flatMap { round in (0..<100).map { UInt8(truncatingIfNeeded: round &+ $0) } }
        #expect(received == Array(expected.prefix(received.count)))
    }
}
