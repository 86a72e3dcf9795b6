import Testing
@testable import PlacedOSM

@Test func PlacedOSMBuilds() { #expect(Bool(true)) }
