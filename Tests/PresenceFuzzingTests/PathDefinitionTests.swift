import PresenceFuzzing
import Testing

/// The path target on random paths built from the interesting pieces, so the one-pass parser is
/// checked against the definition (split on "/", drop empty pieces, check each key, then the
/// limits; `PathFuzzing.definition`) in every `swift test`, not only under `make fuzz`.
@Suite struct PathDefinitionTests {
    @Test func onePassParserAgreesWithTheDefinitionOnRandomPaths() throws {
        let target = try #require(FuzzTarget.named("path"))
        let pieces: [String] = ["a", "b", "/", "/", ".", "$", "\u{7F}", "\u{1F}", "é", "\u{0650}", ".priority", "/.priority",
                                String(repeating: "k", count: 200)]
        var state: UInt64 = 16
        func next() -> Int {
            // SplitMix64, so a failure reproduces.
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int(truncatingIfNeeded: (z ^ (z >> 31)) >> 1)
        }
        for _ in 0..<5_000 {
            let path = (0..<(next() % 12)).map { _ in pieces[next() % pieces.count] }.joined()
            target.run(Array(path.utf8))
        }
    }
}
