import PresenceCore

/// Development credentials.
public enum DevToken {
    /// The unsigned token the SDKs' `mockUserToken` makes (`alg: none`, empty signature, trailing
    /// dot): a server in emulator auth mode accepts it as `uid`. `claims` are added to the payload
    /// in order (`subscription: "lite"`, `created_at: 1700000000000`); one with the name of a
    /// standard claim replaces it, except `sub` and `user_id`, which always name `uid`.
    public static func unsigned(uid: String, projectID: String = "demo-presence", claims: [(String, JSON)] = []) -> String {
        let header: JSON = .object([("alg", "none"), ("type", "JWT")])
        var members: [(String, JSON)] = [
            ("iss", .string("https://securetoken.google.com/\(projectID)")),
            ("aud", .string(projectID)),
            ("iat", 0), ("exp", 3600), ("auth_time", 0),
            ("sub", .string(uid)), ("user_id", .string(uid)),
            ("firebase", .object([("sign_in_provider", "custom"), ("identities", .object([]))])),
        ]
        for (key, value) in claims where key != "sub" && key != "user_id" {
            members.removeAll { $0.0 == key }
            members.append((key, value))
        }
        let payload: JSON = .object(members)
        return Base64URL.encode(Array(JSONWriter.string(header).utf8)) + "."
            + Base64URL.encode(Array(JSONWriter.string(payload).utf8)) + "."
    }
}

/// Server values written on the command line: `.sv:timestamp` and `.sv:increment:N`, as a whole
/// argument or as any string inside a JSON value.
public enum ServerValueSyntax {
    /// The placeholder for `{".sv":"timestamp"}`.
    public static let timestamp: JSON = .object([(".sv", "timestamp")])

    /// Parses a command-line value: JSON when it parses, else a plain string; then expands the
    /// shorthands.
    public static func parse(_ argument: String) -> JSON {
        let json = (try? JSONParser.parse(argument)) ?? .string(argument)
        return expand(json)
    }

    /// Replaces `.sv:timestamp` / `.sv:increment:N` strings anywhere in `value`.
    public static func expand(_ value: JSON) -> JSON {
        switch value {
        case .string(let s):
            if s == ".sv:timestamp" { return timestamp }
            if s.hasPrefix(".sv:increment:"), let n = Double(s.dropFirst(".sv:increment:".count)) {
                return .object([(".sv", .object([("increment", .number(n))]))])
            }
            return value
        case .array(let items): return .array(items.map(expand))
        case .object(let members): return .object(members.map { ($0.0, expand($0.1)) })
        default: return value
        }
    }
}
