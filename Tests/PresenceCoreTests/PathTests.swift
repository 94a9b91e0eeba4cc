import PresenceCore
import Testing

@Suite struct PathTests {
    @Test func parsesWithOrWithoutLeadingSlash() throws {
        #expect(try Path("/users/alice").segments == ["users", "alice"])
        #expect(try Path("users/alice/").segments == ["users", "alice"])
        #expect(try Path("/").isRoot)
        #expect(try Path("").isRoot)
        #expect(try Path("/users/alice").wireString == "users/alice")
    }

    @Test(arguments: ["/a.b", "/a$", "/a#", "/a[", "/a]", "/a\u{7F}", "/a\u{01}b"])
    func rejectsForbiddenCharacters(_ raw: String) {
        #expect(throws: DataError.self) { try Path(raw) }
    }

    @Test func enforcesDepthAndByteLimits() throws {
        let deep = "/" + Array(repeating: "k", count: 33).joined(separator: "/")
        #expect(throws: DataError.self) { try Path(deep) }
        _ = try Path("/" + Array(repeating: "k", count: 32).joined(separator: "/"))
        let long = "/" + String(repeating: "x", count: 769)
        #expect(throws: DataError.self) { try Path(long) }
        _ = try Path("/" + String(repeating: "x", count: 768))
    }

    @Test func containmentAndRelativePaths() throws {
        let users = try Path("/users")
        let alice = try Path("/users/alice/presence")
        #expect(users.contains(alice))
        #expect(!alice.contains(users))
        #expect(Path.root.contains(users))
        #expect(users.relative(alice)?.segments == ["alice", "presence"])
        #expect(try !Path("/user").contains(Path("/users")))
    }

    @Test func allowsATrailingPriorityKeyOnly() throws {
        _ = try Path("/a/.priority")
        #expect(throws: DataError.self) { try Path("/.priority/a") }
    }

    /// Issue 16: a 1 MB invalid path was scanned in full and echoed whole in the error. The error
    /// now quotes a short prefix and says how long the path was.
    @Test(arguments: [
        String(repeating: "a", count: 1 << 20) + "/b.c",
        "/ok/" + String(repeating: "é", count: 1 << 19) + ".",
        String(repeating: "x.", count: 1 << 19),
        String(repeating: "a/", count: 1 << 19),
        String(repeating: "\u{1}", count: 1 << 20),
        "/" + String(repeating: "\u{301}", count: 1 << 19),
    ])
    func hugeInvalidPathIsRefusedWithAShortMessage(_ raw: String) {
        #expect {
            try Path(raw)
        } throws: { error in
            let text = (error as? DataError)?.description ?? ""
            return text.utf8.count < 300 && text.contains("(\(raw.utf8.count) bytes)")
        }
    }

    @Test func errorsNameTheReasonAndQuoteEscapedInput() {
        func message(_ raw: String) -> String {
            do { _ = try Path(raw); return "" } catch { return error.description }
        }
        #expect(message("/a/b.c") == #"Invalid path "/a/b.c": invalid key "b.c": keys must be non-empty and may not contain . $ # [ ] / or control characters"#)
        #expect(message("/a\n\"") == #"Invalid path "/a\n\"": invalid key "a\n\"": keys must be non-empty and may not contain . $ # [ ] / or control characters"#)
        #expect(message("/.priority/a").contains(#"invalid key ".priority""#))
        #expect(message("/" + Array(repeating: "k", count: 33).joined(separator: "/")).hasSuffix("deeper than 32 levels"))
        #expect(message("/" + String(repeating: "x", count: 769)).hasSuffix("longer than 768 bytes"))
    }

    @Test func manySlashesAreStillOnlySeparators() throws {
        #expect(try Path(String(repeating: "/", count: 1 << 20)).isRoot)
        #expect(try Path(String(repeating: "/", count: 1000) + "a" + String(repeating: "/", count: 1000) + "b").segments == ["a", "b"])
        #expect(try Path("/über/ключ/🙂").segments == ["über", "ключ", "🙂"])
        // "/" then a combining mark is still a separator, as in the JS client (found by fuzzing).
        #expect(try Path("/a/\u{0650}b").segments == ["a", "\u{0650}b"])
    }
}
