import PresenceCore
import Testing
@testable import PresenceClient

@Suite struct DevTokenTests {
    func payload(_ token: String) throws -> JSON {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3 && parts[2].isEmpty)
        let bytes = try #require(Base64URL.decode(String(parts[1])))
        return try JSONParser.parse(String(decoding: bytes, as: UTF8.self))
    }

    @Test func unsignedTokenCarriesExtraClaims() throws {
        let token = DevToken.unsigned(uid: "bob", claims: [("subscription", "lite"), ("created_at", .number(1_700_000_000_000)),
                                                           ("exp", .number(99)), ("sub", "mallory")])
        let p = try payload(token)
        #expect(p["sub"] == .string("bob") && p["user_id"] == .string("bob"))
        #expect(p["subscription"] == .string("lite"))
        #expect(p["created_at"] == .number(1_700_000_000_000))
        #expect(p["exp"] == .number(99))
        #expect(try payload(DevToken.unsigned(uid: "bob"))["subscription"] == nil)
    }
}
