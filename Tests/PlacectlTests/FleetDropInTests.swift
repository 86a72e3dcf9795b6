import PlacectlKit
import Testing

@Suite struct FleetDropInTests {
    static let checkConfig = """
        # /etc/placed/placed.conf, its drop-ins, then the flags: placed would run with
        [Logging]
        LogLevel=info

        [Fleet]
        Broker=mqtts://broker.example:8883 mqtt://[2001:db8::10]:1883 mqtt://127.0.0.1:1883
        Username=van-17
        PasswordCredential=mqtt-password
        KeyFile=/run/credentials/placed.service/device.key
        KeepAlive=60

        """

    @Test func readsTheFleetSectionOfCheckConfig() {
        let settings = FleetDropIn.fleetSettings(fromCheckConfig: Self.checkConfig)
        #expect(settings.map(\.key) == ["Broker", "Username", "PasswordCredential", "KeyFile", "KeepAlive"])
        #expect(FleetDropIn.credentials(in: settings) == ["mqtt-password", "device.key"])
        #expect(FleetDropIn.host(ofBroker: "mqtts://broker.example:8883") == "broker.example")
        #expect(FleetDropIn.host(ofBroker: "mqtt://[2001:db8::10]:1883") == "2001:db8::10")
        #expect(
            FleetDropIn.nameservers(fromResolvConf: "# x\nnameserver 192.0.2.53\nnameserver\t::1\nsearch a\n") == [
                "192.0.2.53", "::1",
            ])
    }

    @Test func allowsRemoteBrokersAndTheirDNSAndLoadsTheCredentials() {
        let text = FleetDropIn.render(
            brokers: [
                .init(
                    url: "mqtts://broker.example:8883", host: "broker.example",
                    addresses: ["192.0.2.10", "2001:db8::1"]),
                .init(url: "mqtt://[2001:db8::10]:1883", host: "2001:db8::10", addresses: ["2001:db8::10"]),
                .init(url: "mqtt://127.0.0.1:1883", host: "127.0.0.1", addresses: ["127.0.0.1"]),
            ], nameservers: ["192.0.2.53", "127.0.0.53"], credentials: ["mqtt-password"])
        let settings = text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(
            settings == [
                "[Service]", "IPAddressAllow=192.0.2.10 2001:db8::1", "IPAddressAllow=2001:db8::10",
                "IPAddressAllow=192.0.2.53", "LoadCredential=mqtt-password:/etc/placed/credentials/mqtt-password",
            ])
        #expect(text.contains("# mqtt://127.0.0.1:1883: on this machine, allowed already"))
    }

    @Test func numericBrokersNeedNoDNS() {
        let text = FleetDropIn.render(
            brokers: [.init(url: "mqtt://192.0.2.10:1883", host: "192.0.2.10", addresses: ["192.0.2.10"])],
            nameservers: ["192.0.2.53"], credentials: [])
        #expect(!text.contains("192.0.2.53"))
        #expect(text.contains("IPAddressAllow=192.0.2.10\n"))
    }
}
