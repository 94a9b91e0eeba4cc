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
    /// The lanes that hold something, each under every sequence it waits for, in the order they
    /// began to wait for it. A lane only ever begins to wait for the step being performed, the
    /// newest, so the sequences grow along this queue and the lanes a commit releases are at its
    /// front: a commit costs what it releases, not how many connections wait.
    private var waiting: [(sequence: UInt64, destination: Destination)] = []
    private var waitingHead = 0

    /// Whether some lane may still hold a message.
    var isHolding: Bool { waitingHead < waiting.count }

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
        let ahead = lane.held.last?.sequence ?? 0
        let required = max(ahead, sequence ?? 0)
        // Behind a message that already waits for this step, it leaves with it.
        if required > ahead { waiting.append((required, destination)) }
        lane.held.append((required, item))
    }

    /// Storage made everything up to `sequence` durable. Returns the destinations that have
    /// messages to release (a destination may come more than once); call `release(_:lane:)` for each.
    mutating func markDurable(upTo sequence: UInt64) -> [Destination] {
        guard sequence > durable else { return [] }
        durable = sequence
        var ready: [Destination] = []
        while waitingHead < waiting.count, waiting[waitingHead].sequence <= sequence {
            ready.append(waiting[waitingHead].destination)
            waitingHead += 1
        }
        if waitingHead == waiting.count {
            waiting = []
            waitingHead = 0
        } else if waitingHead >= 1_024, waitingHead * 2 >= waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
        return ready
    }

    /// The messages of `destination`'s lane that may leave now, in the order they were submitted.
    func release<Item>(_ destination: Destination, lane: inout DeliveryLane<Item>) -> [Item] {
        let count = lane.held.prefix { $0.sequence <= durable }.count
        guard count > 0 else { return [] }
        let items = lane.held.prefix(count).map(\.item)
        if count == lane.held.count { lane.held = [] } else { lane.held.removeFirst(count) }
        return items
    }
}

/// One destination's held messages, in submission order (kept by the shell next to the
/// destination's state; empty for nearly every connection). A destination that goes away simply
/// drops its lane.
struct DeliveryLane<Item> {
    fileprivate var held: [(sequence: UInt64, item: Item)] = []

    var isHolding: Bool { !held.isEmpty }
    var heldCount: Int { held.count }
}
