import Glibc

/// A minimal MQTT 3.1.1 codec for the Mosquitto comparison: just the packets the load generator
/// speaks (CONNECT with a will, CONNACK, PUBLISH QoS 0/1, PUBACK, SUBSCRIBE/SUBACK,
/// PINGREQ/PINGRESP, DISCONNECT). Written from the OASIS MQTT 3.1.1 specification, sections 2–3.
enum MQTT {
    enum PacketType: UInt8 {
        case connect = 1, connack, publish, puback, pubrec, pubrel, pubcomp, subscribe, suback,
             unsubscribe, unsuback, pingreq, pingresp, disconnect
    }

    /// The Last Will: published by the broker when the connection ends without DISCONNECT.
    struct Will {
        var topic: String
        var payload: [UInt8]
        var qos: UInt8
        var retain: Bool
    }

    // MARK: encoding

    /// Remaining length: 7 bits per byte, high bit = more bytes follow (at most 4 bytes).
    static func appendRemainingLength(_ n: Int, to out: inout [UInt8]) {
        precondition(n >= 0 && n < 268_435_456, "MQTT remaining length out of range")
        var x = n
        repeat {
            var b = UInt8(x & 0x7F)
            x >>= 7
            if x > 0 { b |= 0x80 }
            out.append(b)
        } while x > 0
    }

    static func appendUInt16(_ v: Int, to out: inout [UInt8]) {
        out.append(UInt8((v >> 8) & 0xFF))
        out.append(UInt8(v & 0xFF))
    }

    /// A UTF-8 string or binary field: two-byte length, then the bytes.
    static func appendField<C: Collection>(_ bytes: C, to out: inout [UInt8]) where C.Element == UInt8 {
        appendUInt16(bytes.count, to: &out)
        out.append(contentsOf: bytes)
    }

    private static func packet(_ firstByte: UInt8, _ body: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [firstByte]
        out.reserveCapacity(body.count + 5)
        appendRemainingLength(body.count, to: &out)
        out += body
        return out
    }

    static func connect(clientID: String, keepAlive: Int, cleanSession: Bool = true, will: Will? = nil) -> [UInt8] {
        var body: [UInt8] = []
        appendField(Array("MQTT".utf8), to: &body)
        body.append(4)  // protocol level 3.1.1
        var flags: UInt8 = cleanSession ? 0x02 : 0
        if let will {
            flags |= 0x04 | ((will.qos & 0x03) << 3) | (will.retain ? 0x20 : 0)
        }
        body.append(flags)
        appendUInt16(keepAlive, to: &body)
        appendField(Array(clientID.utf8), to: &body)
        if let will {
            appendField(Array(will.topic.utf8), to: &body)
            appendField(will.payload, to: &body)
        }
        return packet(PacketType.connect.rawValue << 4, body)
    }

    /// PUBLISH; `packetID` is required (non-zero) for QoS 1.
    static func publish(topic: String, payload: [UInt8], qos: UInt8, retain: Bool, packetID: Int = 0, dup: Bool = false) -> [UInt8] {
        precondition(qos <= 1 && (qos == 0 || packetID > 0), "QoS 1 needs a packet id")
        var body: [UInt8] = []
        body.reserveCapacity(topic.utf8.count + payload.count + 4)
        appendField(Array(topic.utf8), to: &body)
        if qos > 0 { appendUInt16(packetID, to: &body) }
        body += payload
        let first = PacketType.publish.rawValue << 4 | (dup ? 0x08 : 0) | (qos << 1) | (retain ? 1 : 0)
        return packet(first, body)
    }

    static func puback(packetID: Int) -> [UInt8] {
        var body: [UInt8] = []
        appendUInt16(packetID, to: &body)
        return packet(PacketType.puback.rawValue << 4, body)
    }

    /// SUBSCRIBE (fixed-header flags must be 0b0010).
    static func subscribe(packetID: Int, topics: [(String, UInt8)]) -> [UInt8] {
        var body: [UInt8] = []
        appendUInt16(packetID, to: &body)
        for (t, q) in topics {
            appendField(Array(t.utf8), to: &body)
            body.append(q)
        }
        return packet(PacketType.subscribe.rawValue << 4 | 0x02, body)
    }

    static let pingreq: [UInt8] = [PacketType.pingreq.rawValue << 4, 0]
    static let disconnect: [UInt8] = [PacketType.disconnect.rawValue << 4, 0]

    // MARK: decoding

    /// One decoded packet. Slices refer to the bytes handed to ``Reader/feed(_:_:)``; copy what you keep.
    struct Packet {
        var type: UInt8
        var flags: UInt8
        /// The variable header and payload.
        var body: UnsafeRawBufferPointer

        var packetType: PacketType? { PacketType(rawValue: type) }

        /// CONNACK: return code (0 = accepted).
        var connackCode: Int? { body.count >= 2 ? Int(body[1]) : nil }
        /// PUBACK/SUBACK: packet identifier.
        var packetID: Int? { body.count >= 2 ? Int(body[0]) << 8 | Int(body[1]) : nil }
        /// SUBACK: granted QoS per topic (0x80 = failure).
        var subackCodes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: body[min(2, body.count)...]) }

        var qos: UInt8 { (flags >> 1) & 0x03 }
        var retain: Bool { flags & 1 != 0 }

        /// PUBLISH: topic, packet id (QoS > 0) and payload.
        var publish: (topic: UnsafeRawBufferPointer, packetID: Int, payload: UnsafeRawBufferPointer)? {
            guard body.count >= 2 else { return nil }
            let tl = Int(body[0]) << 8 | Int(body[1])
            var i = 2 + tl
            guard body.count >= i else { return nil }
            let topic = UnsafeRawBufferPointer(rebasing: body[2..<i])
            var pid = 0
            if qos > 0 {
                guard body.count >= i + 2 else { return nil }
                pid = Int(body[i]) << 8 | Int(body[i + 1])
                i += 2
            }
            return (topic, pid, UnsafeRawBufferPointer(rebasing: body[i...]))
        }
    }

    enum DecodeError: Error { case malformedLength, tooLarge }

    /// Reassembles MQTT packets from a byte stream (one per connection): WebSocket messages may
    /// carry several packets or part of one.
    struct Reader {
        private var buffer: [UInt8] = []
        var maxPacket = 1 << 20

        /// Calls `body` for every complete packet in `buffer` + `bytes`.
        mutating func feed(_ bytes: UnsafeRawBufferPointer, _ body: (Packet) -> Void) throws {
            if buffer.isEmpty {
                let used = try Reader.parse(bytes, maxPacket: maxPacket, body)
                if used < bytes.count { buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[used...])) }
                return
            }
            buffer.append(contentsOf: bytes)
            let mp = maxPacket
            let used = try buffer.withUnsafeBytes { try Reader.parse($0, maxPacket: mp, body) }
            buffer.removeFirst(used)
        }

        /// Parses complete packets; returns the bytes consumed.
        private static func parse(_ b: UnsafeRawBufferPointer, maxPacket: Int, _ body: (Packet) -> Void) throws -> Int {
            var i = 0
            while i + 2 <= b.count {
                var len = 0
                var shift = 0
                var j = i + 1
                var complete = false
                while j < b.count {
                    let c = b[j]
                    len |= Int(c & 0x7F) << shift
                    j += 1
                    if c & 0x80 == 0 { complete = true; break }
                    shift += 7
                    if shift > 21 { throw DecodeError.malformedLength }
                }
                guard complete else { break }
                guard len <= maxPacket else { throw DecodeError.tooLarge }
                guard j + len <= b.count else { break }
                let first = b[i]
                body(Packet(type: first >> 4, flags: first & 0x0F, body: UnsafeRawBufferPointer(rebasing: b[j..<(j + len)])))
                i = j + len
            }
            return i
        }
    }

    // MARK: presence payloads

    /// `{"online":bool,"lastSeen":ms}`.
    static func presencePayload(online: Bool, lastSeenMillis: Int) -> [UInt8] {
        Array(#"{"online":\#(online),"lastSeen":\#(lastSeenMillis)}"#.utf8)
    }

    /// The user index in a topic `users/user<N>/presence`, if it has that shape.
    static func userIndex(topic: UnsafeRawBufferPointer) -> Int? {
        let prefix = Array("users/user".utf8)
        guard topic.count > prefix.count else { return nil }
        for k in 0..<prefix.count where topic[k] != prefix[k] { return nil }
        var v = 0
        var i = prefix.count
        var any = false
        while i < topic.count, topic[i] >= 48, topic[i] <= 57 {
            v = v * 10 + Int(topic[i] - 48)
            i += 1
            any = true
        }
        return any ? v : nil
    }
}

/// Wall clock in milliseconds (the `lastSeen` Mosquitto clients write themselves; it has no server value).
func wallClockMillis() -> Int {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}
