import PresenceWire

/// REST request bodies while they arrive, and the bounds on them: one body at most
/// `maxBodyBytes`; all bodies together at most `maxPendingBytes`, reserved from `Content-Length`
/// when the head arrives (so the bound holds whatever the clients then send); and a deadline for
/// each, `timeout` plus the time to send its length at `minBytesPerSecond` (a body trickled a byte
/// a second is dropped, a large one on a slow link is not).
///
/// A request refused from its head is answered at once; what it then sends of its body is read
/// and dropped (up to `maxBodyBytes`, and within the deadline), so that closing the connection
/// does not reset a socket the client is still writing to, which can swallow the answer.
///
/// Pure: the HTTP route passes the time and does the I/O. `Key` is the connection (its wsi).
struct RequestBodies<Key: Hashable> {
    struct Limits: Equatable {
        var maxBodyBytes: Int
        var maxPendingBytes: Int
        var timeoutMilliseconds: Int64
        var minBytesPerSecond: Int
    }

    enum Admission: Equatable {
        /// Read the body; the request goes on when it is complete.
        case read
        /// Answer now with this status and message, and drop the body.
        case refuse(status: Int, message: String)
    }

    enum Arrival: Equatable {
        case kept
        /// Part of a refused request's body, dropped.
        case dropped
        /// A refused request sent more than is worth reading: close the connection.
        case tooMuch
        /// The body's deadline passed (`expire`): close the connection. lws re-arms its own
        /// content timeout on every piece of a body, which cancels the drop the route asked for
        /// at the deadline if a byte arrives before the drop is carried out.
        case late
    }

    private struct Entry {
        var request: HTTPRequest
        let reserved: Int
        let deadline: Int64
        var refused = false
        var dropped = 0
    }

    let limits: Limits
    private var entries: [Key: Entry] = [:]
    /// Connections whose body expired, until they close.
    private var late: Set<Key> = []
    /// Bytes reserved by the bodies being read (their `Content-Length`).
    private(set) var reservedBytes = 0

    init(limits: Limits) {
        self.limits = limits
    }

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    /// The head of a request with a body of `length` bytes arrived and passed the route's checks:
    /// read the body, or refuse it for its size or because the bodies in flight take all the room.
    mutating func admit(_ key: Key, request: HTTPRequest, length: Int, now: Int64) -> Admission {
        if length > limits.maxBodyBytes {
            refuse(key, length: length, now: now)
            return .refuse(status: 413, message: "Request body of \(length) bytes is over the limit of \(limits.maxBodyBytes) bytes (--max-message-bytes): send less, e.g. PATCH smaller parts")
        }
        if reservedBytes + length > limits.maxPendingBytes {
            refuse(key, length: length, now: now)
            return .refuse(status: 503, message: "The server is reading too many request bodies at once (--max-pending-body-bytes); retry in a second")
        }
        reservedBytes += length
        entries[key] = Entry(request: request, reserved: length, deadline: deadline(for: length, now: now))
        return .read
    }

    /// A request with a body of `length` bytes is answered from its head: drop what it sends.
    mutating func refuse(_ key: Key, length: Int, now: Int64) {
        entries[key] = Entry(request: HTTPRequest(method: "", path: ""), reserved: 0, deadline: deadline(for: min(length, limits.maxBodyBytes), now: now),
                             refused: true)
    }

    private func deadline(for length: Int, now: Int64) -> Int64 {
        let transfer = Int64(length) * 1_000 / Int64(max(1, limits.minBytesPerSecond))
        return now + limits.timeoutMilliseconds + transfer
    }

    /// Body bytes arrived for `key`.
    mutating func arrived(_ key: Key, _ bytes: UnsafeRawBufferPointer) -> Arrival {
        guard var entry = entries[key] else { return late.contains(key) ? .late : .dropped }
        if entry.refused {
            entry.dropped += bytes.count
            entries[key] = entry
            return entry.dropped > limits.maxBodyBytes ? .tooMuch : .dropped
        }
        // lws stops at Content-Length, which was reserved: a body never outgrows its reservation.
        guard entry.request.body.count + bytes.count <= entry.reserved else { return .tooMuch }
        entries[key] = nil  // no copy-on-write of the body while it grows
        entry.request.body.append(contentsOf: bytes)
        entries[key] = entry
        return .kept
    }

    enum Completion {
        /// The request with its whole body.
        case request(HTTPRequest)
        /// A refused request's body has all been dropped.
        case refused
    }

    /// The body is complete (nil: no body was expected on `key`). Frees its room.
    mutating func complete(_ key: Key) -> Completion? {
        guard let entry = forget(key) else { return nil }
        return entry.refused ? .refused : .request(entry.request)
    }

    /// The connection went away (or was dropped): frees its room.
    @discardableResult
    private mutating func forget(_ key: Key) -> Entry? {
        guard let entry = entries.removeValue(forKey: key) else { return nil }
        reservedBytes -= entry.reserved
        return entry
    }

    mutating func closed(_ key: Key) {
        forget(key)
        late.remove(key)
    }

    /// Whether `key`'s body expired (its connection is being dropped).
    func isLate(_ key: Key) -> Bool { late.contains(key) }

    /// Requests whose body is late: forgotten here; the route drops their connections.
    mutating func expire(now: Int64) -> [(key: Key, refused: Bool)] {
        let late = entries.filter { $0.value.deadline <= now }.map { (key: $0.key, refused: $0.value.refused) }
        for (key, _) in late {
            forget(key)
            self.late.insert(key)
        }
        return late
    }
}
