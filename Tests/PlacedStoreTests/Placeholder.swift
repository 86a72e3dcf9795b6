import Testing
@testable import PlacedStore

@Test func PlacedStoreBuilds() { #expect(Bool(true)) }
