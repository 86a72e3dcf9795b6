import PlacedTestSupport
import Testing

@testable import PlacedStore

/// `PlaceListing` writes a record's text as it is only where `String(decoding:as:)` would keep it
/// unchanged: `UTF8Check` must say valid exactly then.
@Suite struct UTF8CheckTests {
    private func expectAgreesWithDecoding(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let kept = Array(String(decoding: bytes, as: UTF8.self).utf8) == bytes
        let valid = bytes.withUnsafeBytes { UTF8Check.isValid($0) }
        #expect(valid == kept, "\(bytes)", sourceLocation: sourceLocation)
    }

    @Test func edgesOfEveryEncodedLength() {
        let cases: [[UInt8]] = [
            [], [0], [0x7F], [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xC2, 0x80], [0xDF, 0xBF], [0xC2],
            [0xE0, 0x9F, 0x80], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xED, 0xA0, 0x80], [0xEF, 0xBF, 0xBF],
            [0xE1, 0x80], [0xF0, 0x8F, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],
            [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xF1, 0x80, 0x80], [0xE1, 0x80, 0xC0],
            Array("Mannerheimintie 1, 00100 Helsinki".utf8), Array("Café 😀 カフェ".utf8),
            Array("abcdefgh".utf8) + [0xC3] + Array("abcdefgh".utf8),
        ]
        for bytes in cases { expectAgreesWithDecoding(bytes) }
    }

    /// Every length around the eight-byte words, with a bad or a multi-byte sequence at every position: the
    /// last word, which overlaps what was checked before it, must not hide either.
    @Test func aSequenceAtEveryPositionOfShortAndLongText() {
        let sequences: [[UInt8]] = [[0x80], [0xC3], [0xFF], [0xE1, 0x80], [0xC3, 0xA4], [0xE3, 0x82, 0xAB], [0x7F]]
        for length in 0..<26 {
            for sequence in sequences {
                for position in 0...length {
                    let bytes =
                        [UInt8](repeating: UInt8(ascii: "x"), count: position) + sequence
                        + [UInt8](repeating: UInt8(ascii: "y"), count: length - position)
                    expectAgreesWithDecoding(bytes)
                }
            }
        }
    }

    @Test func randomBytesAndRandomText() {
        var random = SplitMix64(seed: 8)
        let pieces: [[UInt8]] = [
            Array("a".utf8), Array("ä".utf8), Array("カ".utf8), Array("😀".utf8), Array("abcdefghij".utf8), [0x80],
            [0xC3], [0xED, 0xA0, 0x80], [0xF4, 0x90], [0xE0, 0x80, 0x80], [0x1E], [0x1F],
        ]
        for _ in 0..<20_000 {
            var bytes: [UInt8] = []
            if random.next() % 2 == 0 {
                for _ in 0..<Int(random.next() % 12) { bytes += pieces[Int(random.next() % UInt64(pieces.count))] }
            } else {
                bytes = (0..<Int(random.next() % 24)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            }
            expectAgreesWithDecoding(bytes)
        }
    }
}
