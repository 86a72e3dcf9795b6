import CSystemd

/// The device's default name in the fleet (`DeviceId=` unset): the machine id hashed with placed's own
/// application id (`sd_id128_get_machine_app_specific`), so it is stable across reboots and
/// re-installs of placed, yet reveals nothing of /etc/machine-id to the brokers.
public enum DeviceIdentity {
    /// placed's application id, fixed forever: changing it renames every device of every fleet.
    static let applicationID:
        (
            UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
            UInt8, UInt8, UInt8, UInt8
        ) = (
            0xad, 0x6d, 0xe3, 0x38, 0x22, 0x8d, 0x44, 0x4e, 0xb4, 0xda, 0xb5, 0x3e, 0xf3, 0xbc, 0x1c, 0xd8
        )

    /// 32 lowercase hexadecimal digits.
    public static func machineSpecific() throws(FleetError) -> String {
        var application = sd_id128_t()
        application.bytes = applicationID
        var result = sd_id128_t()
        let rc = sd_id128_get_machine_app_specific(application, &result)
        guard rc >= 0 else {
            throw .configuration(
                "no DeviceId= and no machine id to derive one from (/etc/machine-id): \(SystemErrorText(-rc))")
        }
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        withUnsafeBytes(of: result.bytes) { bytes in
            for byte in bytes {
                text.append(digits[Int(byte >> 4)])
                text.append(digits[Int(byte & 0xF)])
            }
        }
        return String(decoding: text, as: UTF8.self)
    }
}
