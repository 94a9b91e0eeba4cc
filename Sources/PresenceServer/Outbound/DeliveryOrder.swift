/// The durability barrier: when each outgoing message may leave the server.
///
/// - A push leaves at once.
/// - An acknowledgement (the reply to a write, or a REST response) waits until storage has made
///   its step durable: it carries that step's sequence.
/// - Nothing sent to a destination after a waiting message overtakes it: it waits in the same lane.
///
/// Equivalently, a destination has received exactly the longest prefix of what was submitted to it
/// in which every message's sequence is durable. That is what `DeliveryOrderTests` checks against
/// random interleavings of writes, commits, listens and closes.
///
/// Pure: no sockets, no clock. The shell keeps one lane per destination (next to the destination's
/// other state, so a push to an idle lane costs no lookup), submits every message, tells the order
/// what storage reports durable, and sends what the order lets go.
struct DeliveryOrder<Destination: Hashable> {
    /// The highest sequence storage reported durable.
    private(set) var durable: UInt64 = 0
    /// Destinations whose lane holds messages.
    private(set) var holding: Set<Destination> = []

    /// A message for `destination`, whose lane is `lane`. `sequence` is what must be durable before
    /// it may leave (an acknowledgement's step), nil for a push. Returns true when it may leave now;
    /// otherwise the lane keeps it until `release`.
    mutating func submit<Item>(_ item: Item, waitsFor sequence: UInt64?, to destination: Destination,
                               lane: inout DeliveryLane<Item>) -> Bool {
        if mayLeave(waitsFor: sequence, lane: lane) { return true }
        hold(item, waitsFor: sequence, to: destination, lane: &lane)
        return false
    }

    /// `submit` in two steps, so the caller builds the item only when it is held: whether a message
    /// waiting for `sequence` may leave through `lane` now.
    func mayLeave<Item>(waitsFor sequence: UInt64?, lane: DeliveryLane<Item>) -> Bool {
        max(lane.held.last?.sequence ?? 0, sequence ?? 0) <= durable
    }

    /// Keeps a message that may not leave yet (`mayLeave` said no).
    mutating func hold<Item>(_ item: Item, waitsFor sequence: UInt64?, to destination: Destination, lane: inout DeliveryLane<Item>) {
        lane.held.append((max(lane.held.last?.sequence ?? 0, sequence ?? 0), item))
        holding.insert(destination)
    }

    /// Storage made everything up to `sequence` durable. Returns the destinations that may have
    /// messages to release; call `release(_:lane:)` for each.
    mutating func markDurable(upTo sequence: UInt64) -> Set<Destination> {
        guard sequence > durable else { return [] }
        durable = sequence
        return holding
    }

    /// The messages of `destination`'s lane that may leave now, in the order they were submitted.
    mutating func release<Item>(_ destination: Destination, lane: inout DeliveryLane<Item>) -> [Item] {
        let count = lane.held.prefix { $0.sequence <= durable }.count
        guard count > 0 else { return [] }
        let items = lane.held.prefix(count).map(\.item)
        lane.held.removeFirst(count)
        if lane.held.isEmpty {
            lane.held = []
            holding.remove(destination)
        }
        return items
    }

    /// The destination is gone: what it held will never be sent.
    mutating func forget(_ destination: Destination) {
        holding.remove(destination)
    }
}

/// One destination's held messages, in submission order (kept by the shell next to the
/// destination's state; empty for nearly every connection).
struct DeliveryLane<Item> {
    fileprivate var held: [(sequence: UInt64, item: Item)] = []

    var isHolding: Bool { !held.isEmpty }
    var heldCount: Int { held.count }
}
