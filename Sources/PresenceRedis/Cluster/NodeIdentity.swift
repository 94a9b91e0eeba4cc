/// A node's identity in the lease table: `<name>#<incarnation>`. The name is stable (`--node-id`,
/// by default the node's host:port); the incarnation is random per process start, so a restarted
/// node is a new member and its previous incarnation can be declared dead at once.
public struct NodeIdentity: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let incarnation: String

    public enum Invalid: Error, Equatable {
        case name(String)
    }

    /// `name` must be 1-200 bytes without `#`.
    public init(name: String, incarnation: String = NodeIdentity.randomIncarnation()) throws(Invalid) {
        guard !name.isEmpty, name.utf8.count <= 200, !name.contains("#") else { throw .name(name) }
        self.name = name
        self.incarnation = incarnation
    }

    public var id: String { "\(name)#\(incarnation)" }
    public var description: String { id }

    /// 12 random URL-safe characters.
    public static func randomIncarnation() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<12).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }

    /// A fresh random epoch for a new log (`RedisLog.create`).
    public static func randomEpoch() -> String { randomIncarnation() + randomIncarnation() }
}
