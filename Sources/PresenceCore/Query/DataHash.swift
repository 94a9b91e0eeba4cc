/// The client's data hash (§8.4): `base64(SHA-1(S))` of a pre-image string S built from the value,
/// `""` for an empty node. It is compared with the `h` of transactional puts and listens.
///
/// PresenceCore has no dependencies, so the SHA-1 itself is injected: pass a function that maps
/// bytes to their 20-byte SHA-1 digest (the server passes swift-crypto's `Insecure.SHA1`).
public enum DataHash {
    public typealias Digest = (_ bytes: [UInt8]) -> [UInt8]

    /// The hash of `node`: `""` when it is empty, else standard padded base64 of the digest of
    /// `preimage(node)`.
    public static func hash(_ node: Node, digest: Digest) -> String {
        var out: [UInt8] = []
        appendHash(of: node, digest: digest, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The string the JS client hashes (`LeafNode.hash`, `ChildrenNode.hash`):
    /// * a leaf: `priority:<p>:` if it has a priority, then `number:<hex>`, `boolean:true|false`
    ///   or `string:<raw text>`;
    /// * a branch: the same priority prefix, then `:<key>:<child hash>` for every child in priority
    ///   order (§8.2), skipping children whose hash is `""`;
    /// * null: `""`.
    /// `<p>` is `number:<hex>` or `string:<text>`. `<hex>` is `numberHex(_:)`. Children's hashes
    /// need the digest, hence the parameter.
    public static func preimage(_ node: Node, digest: Digest) -> String {
        var out: [UInt8] = []
        appendPreimage(of: node, digest: digest, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `hash(node)` appended to `out` as bytes: the pre-images are built as bytes and each child's
    /// base64 goes straight into its parent's (a big location's hash was mostly string building).
    static func appendHash(of node: Node, digest: Digest, to out: inout [UInt8]) {
        var preimage: [UInt8] = []
        appendPreimage(of: node, digest: digest, to: &preimage)
        if !preimage.isEmpty { appendBase64(digest(preimage), to: &out) }
    }

    static func appendPreimage(of node: Node, digest: Digest, to out: inout [UInt8]) {
        if let priority = node.priority {
            out.append(contentsOf: "priority:".utf8)
            switch priority {
            case .number(let n): out.append(contentsOf: "number:".utf8); out.append(contentsOf: numberHex(n).utf8)
            case .string(let s): out.append(contentsOf: "string:".utf8); out.append(contentsOf: s.utf8)
            }
            out.append(UInt8(ascii: ":"))
        }
        switch node {
        case .leaf(.number(let n), _): out.append(contentsOf: "number:".utf8); out.append(contentsOf: numberHex(n).utf8)
        case .leaf(.bool(let b), _): out.append(contentsOf: (b ? "boolean:true" : "boolean:false").utf8)
        case .leaf(.string(let s), _): out.append(contentsOf: "string:".utf8); out.append(contentsOf: s.utf8)
        case .branch(let children, _):
            // Priority order; without priorities that is key order, sorted with each key read once
            // (comparing keys as UTF-16 at every step made most of a big location's hash).
            let ordered = children.values.contains { $0.priority != nil }
                ? QueryOrder.sortedChildren(of: node, by: .priority) : KeyOrder.sorted(children).map { ($0.key, $0.value) }
            var childHash: [UInt8] = []
            for (key, child) in ordered {
                childHash.removeAll(keepingCapacity: true)
                appendHash(of: child, digest: digest, to: &childHash)
                guard !childHash.isEmpty else { continue }
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: key.utf8)
                out.append(UInt8(ascii: ":"))
                out.append(contentsOf: childHash)
            }
        }
    }

    /// The 16 lowercase hex digits the JS client writes for a number (`doubleToIEEE754String`).
    /// That is the IEEE-754 bit pattern for most values, but the JS routine derives the exponent
    /// from `Math.log` and drops fraction bits that overflow, so it differs for some values (for
    /// example just below a large power of two, such as 2^53-1, and below about 2^-970). We
    /// reproduce the routine step by step so that our hashes equal the client's.
    public static func numberHex(_ value: Double) -> String {
        let bits = JSDoubleBits.bits(of: value)
        let digits = String(bits, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    private static let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard base64 (RFC 4648 §4) with `=` padding.
    public static func base64(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        appendBase64(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func appendBase64(_ bytes: [UInt8], to out: inout [UInt8]) {
        out.reserveCapacity(out.count + (bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let count = min(3, bytes.count - index)
            var group = UInt32(bytes[index]) << 16
            if count > 1 { group |= UInt32(bytes[index + 1]) << 8 }
            if count > 2 { group |= UInt32(bytes[index + 2]) }
            for position in 0..<4 {
                if position <= count {
                    out.append(base64Alphabet[Int((group >> UInt32(18 - 6 * position)) & 0x3F)])
                } else {
                    out.append(UInt8(ascii: "="))
                }
            }
            index += 3
        }
    }
}
