import Foundation
import PlacedCore
import Testing

@testable import PlacedFleet

#if canImport(Glibc)
    import Glibc
#endif

/// TLS with a CA and certificates the test makes, a broker ACL, and passwords from a systemd credential.
@Suite(.serialized) struct SecurityTests {
    /// The device may write only placed/<its name>/#; the consumer reads everything.
    static let acl = [
        "user consumer", "topic read placed/#", "topic read owntracks/#", "", "pattern write placed/%u/#",
    ]

    struct TLSBroker {
        let pki: TestPKI
        let broker: MosquittoBroker
        let consumer: Subscriber
        let device: (cert: String, key: String)

        init(device name: String, serverName: String = "IP:127.0.0.1") throws {
            pki = try TestPKI()
            let server = try pki.issue("broker", subjectAltName: serverName)
            let consumerCertificate = try pki.issue("consumer")
            device = try pki.issue(name)
            broker = try MosquittoBroker(
                tls: .init(caFile: pki.caFile, certFile: server.cert, keyFile: server.key), aclLines: SecurityTests.acl)
            consumer = try Subscriber(
                broker: broker, clientID: "consumer",
                extra: [
                    "--cafile", pki.caFile, "--cert", consumerCertificate.cert, "--key", consumerCertificate.key,
                    "--insecure",
                ])
        }

        var url: String { "mqtts://127.0.0.1:\(broker.port)" }
    }

    @Test func verifiedTLSWithAClientCertificateAndAnACL() throws {
        let setup = try TLSBroker(device: "tlsdev")
        defer { setup.pki.remove() }
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: setup.url)
            try settings.set("DeviceId", to: "tlsdev")
            try settings.set("CAFile", to: setup.pki.caFile)
            try settings.set("CertFile", to: setup.device.cert)
            try settings.set("KeyFile", to: setup.device.key)
            try settings.set("Protocol", to: "5")
            try settings.set("OwnTracks", to: "yes")
        }
        for index in 0..<20 {
            try publisher.select()
            if index % 7 == 3 {
                publisher.exporter.moved(
                    to: Fix(
                        coordinate: Coordinate(latitude: 60.17 + Double(index) * 1e-3, longitude: 24.95), accuracy: 4),
                    location: ["latitude": .number(60.17)], top: nil)
            }
        }
        let delivered = publisher.loop.pump(seconds: 60) {
            publisher.isDrained && MarkerLedger(setup.consumer.messages, device: "tlsdev").firstSeen.count == 20
        }
        #expect(delivered, "status \(publisher.exporter.status.summary): \(tail(of: setup.broker.log))")
        #expect(publisher.exporter.status.state == .connected)
        // The ACL lets the device write placed/tlsdev/# only. mosquitto answers each OwnTracks location
        // with PUBACK "not authorized" and, over TLS, closes the connection too, PUBACK or not: each is
        // refused or found to be the message the broker will not take, counted, and not sent again.
        #expect(publisher.exporter.status.rejected == 3)
        #expect(!setup.consumer.messages.contains { $0.topic.hasPrefix("owntracks/") })
        #expect(MarkerLedger(setup.consumer.messages, device: "tlsdev").problems.isEmpty)
    }

    @Test func aBrokerCertificateFromAnotherCAIsRefused() throws {
        let setup = try TLSBroker(device: "tlsdev")
        let stranger = try TestPKI(name: "stranger")
        defer {
            setup.pki.remove()
            stranger.remove()
        }
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: setup.url)
            try settings.set("DeviceId", to: "tlsdev")
            try settings.set("CAFile", to: stranger.caFile)
            try settings.set("CertFile", to: setup.device.cert)
            try settings.set("KeyFile", to: setup.device.key)
        }
        try publisher.select()
        let refused = publisher.loop.pump(seconds: 10) { publisher.exporter.status.lastError != nil }
        publisher.loop.pump(for: 1)
        let status = publisher.exporter.status
        #expect(refused)
        #expect(status.state != .connected)
        #expect(status.lastError?.contains("certificate verify failed") == true, "\(status.lastError ?? "-")")
        #expect(status.backlog == 2, "the marker and its state wait for a broker we trust")
        #expect(!setup.consumer.messages.contains { $0.topic.hasPrefix("placed/tlsdev/") })
    }

    @Test func aBrokerCertificateForAnotherHostIsRefused() throws {
        let setup = try TLSBroker(device: "tlsdev", serverName: "DNS:broker.example")
        defer { setup.pki.remove() }
        let publisher = try Publisher { settings in
            try settings.set("Broker", to: setup.url)
            try settings.set("DeviceId", to: "tlsdev")
            try settings.set("CAFile", to: setup.pki.caFile)
            try settings.set("CertFile", to: setup.device.cert)
            try settings.set("KeyFile", to: setup.device.key)
        }
        let refused = publisher.loop.pump(seconds: 10) { publisher.exporter.status.lastError != nil }
        publisher.loop.pump(for: 1)
        #expect(refused)
        #expect(publisher.exporter.status.state != .connected)
        #expect(
            publisher.exporter.status.lastError?.contains("TLS") == true,
            "\(publisher.exporter.status.lastError ?? "-")")
    }

    @Test func thePasswordComesFromASystemdCredential() throws {
        let broker = try MosquittoBroker(passwords: ["meter": "correct horse"])
        let credentials = makeTemporaryDirectory("placed-fleet-credentials")
        defer { removeTestDirectory(credentials) }
        try "correct horse\n".write(toFile: credentials + "/mqtt-password", atomically: true, encoding: .utf8)
        try "wrong horse\n".write(toFile: credentials + "/wrong-password", atomically: true, encoding: .utf8)
        setenv("CREDENTIALS_DIRECTORY", credentials, 1)
        defer { unsetenv("CREDENTIALS_DIRECTORY") }

        let right = try Publisher { settings in
            try settings.set("Broker", to: broker.url)
            try settings.set("DeviceId", to: "meter")
            try settings.set("Username", to: "meter")
            try settings.set("PasswordCredential", to: "mqtt-password")
        }
        #expect(right.loop.pump(seconds: 10) { right.exporter.status.state == .connected })

        let wrong = try Publisher { settings in
            try settings.set("Broker", to: broker.url)
            try settings.set("DeviceId", to: "meter2")
            try settings.set("Username", to: "meter")
            try settings.set("PasswordCredential", to: "wrong-password")
        }
        #expect(wrong.loop.pump(seconds: 10) { wrong.exporter.status.lastError != nil })
        #expect(wrong.exporter.status.state != .connected)
        let error = wrong.exporter.status.lastError ?? ""
        #expect(error.contains("not authori"), "\(error)")
        #expect(!error.contains("horse"), "the password is never shown")

        #expect(throws: FleetError.self) {
            _ = try Publisher { settings in
                try settings.set("Broker", to: broker.url)
                try settings.set("DeviceId", to: "meter3")
                try settings.set("Username", to: "meter")
                try settings.set("PasswordCredential", to: "missing")
            }
        }
    }
}
