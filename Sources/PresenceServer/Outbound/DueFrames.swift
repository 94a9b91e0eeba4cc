/// Something frames can be due for: it keeps its slot in `DueFrames` (-1 when nothing is due).
protocol DueFramesHolder: AnyObject {
    var dueSlot: Int32 { get set }
}

/// The frames due in this turn of the loop, per destination, in the order they were submitted:
/// the outbound path sends each destination's frames together at the end of the turn (one `send`
/// per connection however many pushes it got).
///
/// One array holds every frame due (each destination's frames chained through `next`) and one the
/// destinations, in the order they first got a frame; both keep their capacity from turn to turn,
/// and a destination keeps only its slot, so a push allocates nothing and an idle connection pays
/// four bytes. Pure (no sockets).
struct DueFrames<Holder: DueFramesHolder> {
    fileprivate struct Entry {
        let frame: OutFrame
        var next: Int32
    }

    private struct Slot {
        let holder: Holder
        var first: Int32
        var last: Int32
        var bytes: Int
    }

    private var entries: [Entry] = []
    private var slots: [Slot] = []
    /// The arrays of the turn being sent (swapped in `drain`, so frames due meanwhile go to the
    /// next turn), kept for their capacity.
    private var spareEntries: [Entry] = []
    private var spareSlots: [Slot] = []

    var isEmpty: Bool { slots.isEmpty }

    /// Payload bytes due in this turn, all destinations together (until `beginTurn`, which hands
    /// them to the sends).
    private(set) var totalBytes = 0

    /// Payload bytes due for `holder`.
    func bytes(for holder: Holder) -> Int { holder.dueSlot < 0 ? 0 : slots[Int(holder.dueSlot)].bytes }

    func holdsFrames(for holder: Holder) -> Bool { holder.dueSlot >= 0 && slots[Int(holder.dueSlot)].first >= 0 }

    mutating func append(_ frame: OutFrame, for holder: Holder) {
        let index = Int32(entries.count)
        entries.append(Entry(frame: frame, next: -1))
        totalBytes += frame.payloadCount
        if holder.dueSlot < 0 {
            holder.dueSlot = Int32(slots.count)
            slots.append(Slot(holder: holder, first: index, last: index, bytes: frame.payloadCount))
            return
        }
        let slot = Int(holder.dueSlot)
        if slots[slot].first < 0 {
            slots[slot].first = index
        } else {
            entries[Int(slots[slot].last)].next = index
        }
        slots[slot].last = index
        slots[slot].bytes += frame.payloadCount
    }

    /// Takes `holder`'s due frames out (they go another way: to its queue, or nowhere when it
    /// closes), in order.
    mutating func take(for holder: Holder) -> Chain {
        guard holder.dueSlot >= 0 else { return Chain(entries: [], first: -1) }
        let slot = Int(holder.dueSlot)
        let chain = Chain(entries: entries, first: slots[slot].first)
        totalBytes -= slots[slot].bytes
        slots[slot].first = -1
        slots[slot].last = -1
        slots[slot].bytes = 0
        return chain
    }

    /// Begins sending the turn: returns how many destinations it has (`turn(_:)` gives each, in
    /// the order they first got a frame). Frames appended from now on belong to the next turn.
    /// Call `endTurn()` after.
    mutating func beginTurn() -> Int {
        swap(&entries, &spareEntries)
        swap(&slots, &spareSlots)
        totalBytes = 0
        for slot in spareSlots { slot.holder.dueSlot = -1 }
        return spareSlots.count
    }

    /// The turn's destination `index` and its frames (none when they were taken out).
    func turn(_ index: Int) -> (Holder, Chain) {
        let slot = spareSlots[index]
        return (slot.holder, Chain(entries: slot.first >= 0 ? spareEntries : [], first: slot.first))
    }

    mutating func endTurn() {
        // A burst's large arrays are let go rather than kept for every later turn.
        spareEntries.removeAll(keepingCapacity: spareEntries.capacity <= 65_536)
        spareSlots.removeAll(keepingCapacity: spareSlots.capacity <= 65_536)
    }

    /// One destination's due frames, in order.
    struct Chain: Sequence, IteratorProtocol {
        fileprivate let entries: [Entry]
        fileprivate var first: Int32

        mutating func next() -> OutFrame? {
            guard first >= 0 else { return nil }
            let entry = entries[Int(first)]
            first = entry.next
            return entry.frame
        }
    }
}
