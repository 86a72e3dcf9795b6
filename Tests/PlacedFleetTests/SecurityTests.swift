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
