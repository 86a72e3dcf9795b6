import PlacedCore
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@testable import PlacedDaemon

@Suite struct ConfigurationTests {
    @Test func defaults() throws {
        let c = Configuration()
        #expect(try c.resolvedSource() == .gpsd(host: "localhost", port: "2947"))
        #expect(c.distanceFilter == 50)
        #expect(c.resolvedSelectionsPath == "/var/lib/placed/selections.db")
        #expect(c.bus == .system)
    }

    @Test func flagsOverrideAndAcceptBothSpellings() throws {
        guard
            case let .run(c) = try Configuration.parse([
                "--gpsd=gps.local:3000", "--distance-filter", "25", "--bus", "none", "--db", "/tmp/p.db",
            ])
        else {
            Issue.record("expected a run command")
            return
        }
        #expect(try c.resolvedSource() == .gpsd(host: "gps.local", port: "3000"))
        #expect(c.distanceFilter == 25)
        #expect(c.bus == Configuration.Bus.none)
        #expect(c.resolvedSelectionsPath == "/tmp/selections.db")
        #expect(try Configuration.parse(["--help"]) == .help)
    }

    @Test func languageIsALanguageCodeALocaleOrEmpty() throws {
        for text in ["sv", "sv-FI", "sv_FI.UTF-8", "zh-Hant-TW", ""] {
            var c = Configuration()
            try ConfigFile.apply("[Places]\nLanguage=\(text)\n", file: "placed.conf", to: &c)
            #expect(c.language == text)
        }
        for text in ["swedish", "C", "42"] {
            var c = Configuration()
            #expect(throws: (any Error).self, "Language=\(text)") {
                try ConfigFile.apply("[Places]\nLanguage=\(text)\n", file: "placed.conf", to: &c)
            }
            #expect(c.language == "", "a refused value changes nothing")
        }
        guard case let .run(c) = try Configuration.parse(["--language", "fi"]) else {
            Issue.record("expected a run command")
            return
        }
        #expect(c.language == "fi")
        #expect(throws: UsageError.self) { try Configuration.parse(["--language", "finnish"]) }
    }

    @Test func ipv6Endpoint() throws {
        let endpoint = try Settings.parseEndpoint("[::1]:2948")
        #expect(endpoint.host == "::1" && endpoint.port == "2948")
    }

    /// An endpoint is all host and port: nothing after `]` but `:PORT`, no blank in the host, and an
    /// IPv6 address in brackets (fuzz-settings: `--gpsd '[  Pes]p'` was taken as host "  Pes", port
    /// 2947, which `--check-config` printed as another host).
    @Test(arguments: ["[  Pes]p", "[::1]x", "[::1]2947", " localhost:2947", "local host", "::1", "[]:2947", "[a]:"])
    func anEndpointWithMoreThanHostAndPortIsRefused(text: String) {
        #expect(throws: SettingError.self) { try Settings.parseEndpoint(text) }
    }

    @Test(arguments: [
        ["--static", "91,0"], ["--static", "1"], ["--static", "1,2,-3"], ["--distance-filter", "nan"],
        ["--gpsd", "host:0"], ["--bus", "x"], ["--db"], ["--what"],
    ])
    func badFlagsAreUsageErrors(arguments: [String]) {
        #expect(throws: UsageError.self) { try Configuration.parse(arguments) }
    }

    /// A flag's value must fit a file's line as it stands, or what `--check-config` prints would not
    /// read back (fuzz-settings: `--db` with a line break printed a line of its own).
    @Test(arguments: [
        "/tmp/x.db\nStaticPcheck-config", "/tmp/x.db\r\nBus=none", "/tmp/x.db\r", " /tmp/x.db", "/tmp/x.db\t",
    ])
    func aFlagValueNoFileLineCanHoldIsAUsageError(value: String) {
        #expect(throws: UsageError.self) { try Configuration.parse(["--db", value]) }
        #expect(throws: UsageError.self) { try Configuration.parse(["--socket=" + value]) }
        #expect(throws: UsageError.self) { try Configuration.parse(["--config", value]) }
    }

    /// A file saved with CRLF line ends reads as the same file with LF ones.
    @Test func crlfLineEndsReadAsLines() throws {
        var c = Configuration()
        try ConfigFile.apply(
            "# placed\r\n[Location]\r\nDistanceFilter=25\r\n\r\n[Places]\r\nLanguage=fi\r\n", file: "crlf.conf",
            to: &c)
        #expect(c.distanceFilter == 25)
        #expect(c.language == "fi")
    }

    @Test func configFileSectionsKeysAndDropInOrder() throws {
        var c = Configuration()
        try ConfigFile.apply(
            """
            # comment
            [Location]
            Source = static
            StaticPosition=60.17,24.94,12
            DistanceFilter=30

            [Places]
            Database=/srv/places.db
            """, file: "main.conf", to: &c)
        try ConfigFile.apply("[Location]\nDistanceFilter=75\n", file: "10-later.conf", to: &c)
        #expect(c.distanceFilter == 75)
        #expect(c.databasePath == "/srv/places.db")
        #expect(try c.resolvedSource() == .fixed(Coordinate(latitude: 60.17, longitude: 24.94), accuracy: 12))
        // Flags still win over the file.
        guard case let .run(flagged) = try Configuration.parse(["--distance-filter", "5"], over: c) else {
            Issue.record("expected a run command")
            return
        }
        #expect(flagged.distanceFilter == 5)
        #expect(flagged.databasePath == "/srv/places.db")
    }

    @Test(arguments: [
        ("[Location]\nBogus=1\n", 2, "unknown key 'Bogus' in [Location]"),
        ("[Nowhere]\n", 1, "unknown section [Nowhere]"),
        ("DistanceFilter=3\n", 1, "must be inside a [Section]"),
        ("[Location]\n\nDistanceFilter=-3\n", 3, "DistanceFilter=-3: must be a number >= 0"),
        ("[Places]\nDatabase=relative.db\n", 2, "must be an absolute path"),
        ("[Location]\njust words\n", 2, "expected Key=value"),
        ("[Location\n", 1, "malformed section header"),
        ("[Learning]\nLearningTimeFloor=1.5\n", 2, "LearningTimeFloor=1.5"),
        ("[Places]\nClosedWeight=0\n", 2, "ClosedWeight=0: must be a number above 0 and at most 1"),
        ("[Places]\nClosedWeight=1.5\n", 2, "ClosedWeight=1.5"),
    ])
    func configErrorsNameFileAndLine(text: String, line: Int, message: String) {
        var c = Configuration()
        do {
            try ConfigFile.apply(text, file: "/etc/placed/placed.conf", to: &c)
            Issue.record("expected an error for \(text)")
        } catch {
            #expect(error.file == "/etc/placed/placed.conf")
            #expect(error.line == line)
            #expect(error.message.contains(message), "\(error.message)")
        }
        #expect(c == Configuration(), "a bad file changes nothing it did not set before the error")
    }

    @Test func learningTimeFloorReachesTheLearningSettings() throws {
        var c = Configuration()
        #expect(c.learningSettings.timeFloor == LearningSettings.defaultTimeFloor)
        try ConfigFile.apply("[Learning]\nLearningTimeFloor=1\n", file: "placed.conf", to: &c)
        #expect(c.learningSettings.timeFloor == 1 && !c.learningSettings.weighsTimeOfWeek)
    }

    @Test func staticSourceWithoutPositionIsAnError() throws {
        var c = Configuration()
        try ConfigFile.apply("[Location]\nSource=static\n", file: "f", to: &c)
        #expect(throws: UsageError.self) { try c.resolvedSource() }
    }
}

@Suite struct ShippedConfigurationTests {
    static let shipped = InterfaceDescriptionTests.root.appendingPathComponent("etc/placed/placed.conf").path

    @Test func shippedFileParsesAndKeepsEveryDefault() throws {
        var c = Configuration()
        try ConfigFile.load(Self.shipped, into: &c)
        #expect(c == Configuration())
    }

    @Test func shippedFileDocumentsEveryKeyWithItsDefault() throws {
        let text = try String(contentsOfFile: Self.shipped, encoding: .utf8)
        var uncommented = ""
        for line in text.split(separator: "\n") {
            uncommented +=
                line.hasPrefix("#") && line.contains("=") && !line.hasPrefix("# ")
                ? line.dropFirst() + "\n" : line + "\n"
        }
        for setting in Settings.all {
            #expect(text.contains("\n#\(setting.key)="), "placed.conf does not document \(setting.key)")
        }
        // Uncommenting every documented default changes nothing but the optional empty values.
        var c = Configuration()
        let withValues = uncommented.split(separator: "\n").filter { !$0.hasSuffix("=") }.joined(separator: "\n")
        try ConfigFile.apply(withValues, file: "placed.conf", to: &c)
        #expect(c == Configuration())
    }

    @Test func relativePathsFromFlagsAreMadeAbsolute() throws {
        var buffer = [CChar](repeating: 0, count: 4096)
        let cwd = String(cString: getcwd(&buffer, buffer.count)!)
        guard case let .run(c) = try Configuration.parse(["--db", "places.db", "--socket=./run/sock"]) else {
            Issue.record("expected a run")
            return
        }
        #expect(c.databasePath == cwd + "/places.db")
        #expect(c.socketPath == cwd + "/run/sock")
        #expect(c.resolvedSelectionsPath == cwd + "/selections.db")
        #expect(throws: UsageError("--db needs a path")) { try Configuration.parse(["--db", ""]) }
    }

    @Test func numberBoundsReadAsTyped() throws {
        #expect(throws: UsageError("--distance-filter expects a number >= 0, not '-1'")) {
            try Configuration.parse(["--distance-filter", "-1"])
        }
        #expect(throws: UsageError("--gpsd-timeout expects a number from 0.1 to 86400, not '0'")) {
            try Configuration.parse(["--gpsd-timeout", "0"])
        }
        #expect(throws: UsageError("--gpsd-timeout expects a number from 0.1 to 86400, not '1e14'")) {
            try Configuration.parse(["--gpsd-timeout", "1e14"])
        }
        var c = Configuration()
        #expect(throws: ConfigError(file: "f", line: 2, message: "DistanceFilter=-3: must be a number >= 0")) {
            try ConfigFile.apply("[Location]\nDistanceFilter=-3", file: "f", to: &c)
        }
    }

    @Test func versionAndCheckConfigAreCommands() throws {
        #expect(try Configuration.parse(["--version"]) == .version)
        guard case let .check(c) = try Configuration.parse(["--check-config", "--distance-filter", "20"]) else {
            Issue.record("--check-config should be a check")
            return
        }
        #expect(c.distanceFilter == 20)
    }

    /// What `placed --check-config` prints, read back as a file, is the same configuration.
    @Test func effectiveSettingsReadBackToTheSameConfiguration() throws {
        var changed = Configuration()
        changed.sourceKind = .static
        changed.staticPosition = .init(coordinate: Coordinate(latitude: 60.1699, longitude: 24.9384), accuracy: 7.5)
        changed.gpsdHost = "::1"
        changed.gpsdPort = "3000"
        changed.gpsdTimeout = 2.5
        changed.distanceFilter = 0
        changed.databasePath = "/srv/places.db"
        changed.selectionsPath = "/srv/log/selections.db"
        changed.selectionGenerations = 7
        changed.language = "sv_FI.UTF-8"
        changed.writerGroup = "kiosk"
        changed.bus = .none
        changed.socketPath = "/run/kiosk/places"
        for (key, value) in [
            ("Broker", "mqtts://broker.example mqtt://[::1]:1884"), ("DeviceId", "van-17"), ("CAFile", "/etc/ca.pem"),
            ("CertFile", "/etc/d.pem"), ("KeyFile", "/etc/d.key"), ("Username", "van-17"),
            ("PasswordCredential", "mqtt-password"), ("KeepAlive", "30"), ("Protocol", "5"), ("OwnTracks", "yes"),
            ("OwnTracksUser", "fleet"), ("Backlog", "5000"),
        ] {
            try changed.fleet.set(key, to: value)
        }
        for original in [Configuration(), changed] {
            let text = ConfigFile.effective(original)
            var read = Configuration()
            try ConfigFile.apply(text, file: "effective", to: &read)
            var expected = original
            expected.selectionsPath = original.resolvedSelectionsPath  // printed as the path it resolves to
            #expect(read == expected, "\(text)")
        }
        let keys = ConfigFile.effective(changed).split(separator: "\n").filter { $0.contains("=") }
        #expect(keys.count == Settings.all.count, "every key is printed")
    }
}
