import Testing
@testable import PlacedGPS

@Test func PlacedGPSBuilds() { #expect(Bool(true)) }
