/// Replicated namespaces that hold data and that nothing on this node used any more, in the order
/// they went idle (`Engine+IdleReplicas`). The idle period is the same for all, so the queue is
/// also in the order they fall due: `tick` looks at its front only. An entry is a candidate, not a
/// promise: the namespace may have been used (or gone idle again, queued anew) since.
struct IdleReplicas {
    private var queue: [(namespace: String, since: Int64)] = []
    private var head = 0

    var isEmpty: Bool { head == queue.count }

    /// When the oldest candidate went idle.
    var oldestSince: Int64? { isEmpty ? nil : queue[head].since }

    mutating func note(_ namespace: String, since: Int64) {
        queue.append((namespace, since))
    }

    /// Takes the candidates that went idle at or before `time`, oldest first.
    mutating func takeIdle(since time: Int64) -> [(namespace: String, since: Int64)] {
        var taken: [(namespace: String, since: Int64)] = []
        while head < queue.count, queue[head].since <= time {
            taken.append(queue[head])
            head += 1
        }
        if head > 256, head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
        return taken
    }
}
