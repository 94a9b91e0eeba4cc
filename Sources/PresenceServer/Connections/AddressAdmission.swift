/// The per-address limits at the WebSocket handshake: too many live connections, or too many new
/// ones this second, from one address are refused with 429. Pure: the shell passes the time and
/// the address's live connections.
struct AddressAdmission {
    enum Decision: Equatable {
        case admit
        /// Refuse with this reason; `log` is true once per address and second.
        case refuse(reason: String, log: Bool)
    }

    let maxConnections: Int
    let maxPerSecond: Int
    private var recent: [String: (second: Int64, count: Int, logged: Bool)] = [:]

    init(maxConnections: Int, maxPerSecond: Int) {
        self.maxConnections = maxConnections
        self.maxPerSecond = maxPerSecond
    }

    var isActive: Bool { maxConnections > 0 || maxPerSecond > 0 }

    mutating func admit(_ address: String, live: Int, nowMilliseconds now: Int64) -> Decision {
        guard isActive else { return .admit }
        let second = now / 1000
        var entry = recent[address] ?? (second, 0, false)
        if entry.second != second { entry = (second, 0, false) }
        entry.count += 1
        // Bounded: forget other seconds when many addresses connect.
        if recent.count > 10_000 { recent = recent.filter { $0.value.second == second } }
        let reason: String
        if maxConnections > 0, live >= maxConnections {
            reason = "more than \(maxConnections) connections from this address"
        } else if maxPerSecond > 0, entry.count > maxPerSecond {
            reason = "more than \(maxPerSecond) new connections per second from this address"
        } else {
            recent[address] = entry
            return .admit
        }
        let log = !entry.logged
        entry.logged = true
        recent[address] = entry
        return .refuse(reason: reason, log: log)
    }
}
