/// Who a client is, by address: the TCP peer, or behind a trusted reverse proxy, the address the
/// proxy names in `X-Forwarded-For`. Pure; the binding reads the peer and the header.
enum ClientAddress {
    /// The listening socket is dual-stack, so IPv4 peers arrive as `::ffff:a.b.c.d`: reported as
    /// plain `a.b.c.d`.
    static func plain(_ address: String) -> String {
        let mapped = "::ffff:"
        guard address.lowercased().hasPrefix(mapped), address.dropFirst(mapped.count).contains(".") else { return address }
        return String(address.dropFirst(mapped.count))
    }

    /// The client behind `peer`: the peer itself unless it is a trusted proxy; then the nearest
    /// address in `X-Forwarded-For` (read from the right) that is not a trusted proxy itself.
    static func resolve(peer: String, forwardedFor header: String?, trusted: Set<String>) -> String {
        guard trusted.contains(peer), let header else { return peer }
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        let hops = header.split(separator: ",").map { hop in
            String(hop.drop(while: blank).reversed().drop(while: blank).reversed())
        }.filter { !$0.isEmpty }
        return hops.last { !trusted.contains($0) } ?? hops.first ?? peer
    }
}
