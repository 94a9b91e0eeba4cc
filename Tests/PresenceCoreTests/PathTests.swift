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
}
