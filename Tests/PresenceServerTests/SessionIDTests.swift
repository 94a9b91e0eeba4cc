import Testing
@testable import PresenceServer

/// Operators paste session ids into `presence-client admin kick <id>`; one that starts with `-`
/// is read as a flag there (exit 64), which once failed a live test at random.
@Suite struct SessionIDTests {
    @Test func idsNeverStartLikeAFlagAndUseTheURLSafeAlphabet() {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var firsts = Set<Character>()
        for _ in 0..<20_000 {
            let id = SessionIDs.make()
            #expect(id.count == 16)
            #expect(id.allSatisfy(allowed.contains))
            let first = id.first!
            #expect(first.isLetter || first.isNumber, "\(id) starts with \(first)")
            firsts.insert(first)
        }
        // Still random in the first place: all 62 letters and digits turn up in 20,000 draws.
        #expect(firsts.count == 62)
    }
}
