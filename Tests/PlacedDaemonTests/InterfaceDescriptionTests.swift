import Foundation
import Testing

@testable import PlacedDaemon

/// The daemon serves its interface descriptions from compiled-in strings; the files under etc/ are
/// what is shipped and installed. They must be the same text.
@Suite struct InterfaceDescriptionTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func varlinkDescriptionEqualsTheShippedFile() throws {
        let shipped = try String(
            contentsOf: Self.root.appendingPathComponent("etc/io.placed.Places.varlink"), encoding: .utf8)
        #expect(InterfaceDescriptions.varlink + "\n" == shipped, "run scripts/gen-interfaces.py")
    }
}
