import CPresenceTap
import Glibc
import Testing

/// The frame-mask tap: it follows frame headers in what lws reads and flags an unmasked frame.
@Suite(.serialized) struct MaskTapTests {
    /// A descriptor number no test opens: the tap only keeps state per number.
    let fd: Int32 = 700

    func frame(_ payload: [UInt8], masked: Bool = true, opcode: UInt8 = 0x1) -> [UInt8] {
        var bytes: [UInt8] = [0x80 | opcode]
        let mask: UInt8 = masked ? 0x80 : 0
        if payload.count < 126 {
            bytes.append(mask | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            bytes += [mask | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            bytes.append(mask | 127)
            bytes += (0..<8).reversed().map { UInt8((UInt64(payload.count) >> (UInt64($0) * 8)) & 0xFF) }
        }
        guard masked else { return bytes + payload }
        let key: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        return bytes + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    }

    func feed(_ bytes: [UInt8]) { bytes.withUnsafeBytes { presence_tap_feed(fd, $0.baseAddress, $0.count) } }

    let head = Array("GET /.ws?v=5 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n".utf8)

    @Test func maskedFramesOfEveryLengthPassEvenSplitAtEveryByte() {
        let stream = frame([]) + frame(Array(repeating: 0x61, count: 125)) + frame(Array(repeating: 0x62, count: 300))
            + frame(Array(repeating: 0x63, count: 70_000)) + frame(Array("ping".utf8), opcode: 0x9)
        for split in [1, 2, 3, 7, 13, 4096] {
            presence_tap_accepted(fd)
            feed(head)
            presence_tap_established(fd)
            feed(stream, split: split)
            #expect(presence_tap_unmasked(fd) == 0, "split \(split)")
            feed(frame(Array("late".utf8), masked: false))
            #expect(presence_tap_unmasked(fd) == 1, "split \(split)")
            presence_tap_forget(fd)
        }
    }

    @Test func framesSentWithTheUpgradeRequestAreFollowedToo() {
        presence_tap_accepted(fd)
        feed(Array(head.prefix(20)))
        feed(Array(head.dropFirst(20)) + frame(Array("{}".utf8)) + frame(Array("{}".utf8), masked: false))
        #expect(presence_tap_unmasked(fd) == 0)
        presence_tap_established(fd)
        #expect(presence_tap_unmasked(fd) == 1)
        presence_tap_forget(fd)
        #expect(presence_tap_unmasked(fd) == 0)
    }

    @Test func plainHTTPAndUnregisteredSocketsAreNeverFlagged() {
        presence_tap_accepted(fd)
        feed(Array("PUT /a.json HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}".utf8))
        feed([0x81, 0x02, 0x7B, 0x7D])
        #expect(presence_tap_unmasked(fd) == 0)
        presence_tap_forget(fd)
        feed(frame([1], masked: false))
        #expect(presence_tap_unmasked(fd) == 0)
    }

    @Test func theRecvLwsCallsIsTappedAndPassesTheBytesThrough() throws {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        presence_tap_accepted(pair[0])
        defer { presence_tap_forget(pair[0]) }
        let sent = head + frame(Array("{}".utf8), masked: false)
        #expect(send(pair[1], sent, sent.count, 0) == sent.count)
        var buffer = [UInt8](repeating: 0, count: 4096)
        // A peek is not counted: lws never peeks, the shell does (streams).
        #expect(recv(pair[0], &buffer, buffer.count, Int32(MSG_PEEK)) == sent.count)
        let count = recv(pair[0], &buffer, buffer.count, 0)
        #expect(count == sent.count && Array(buffer.prefix(count)) == sent)
        presence_tap_established(pair[0])
        #expect(presence_tap_unmasked(pair[0]) == 1)
    }

    func violation() -> (Int32, String?) {
        var why: UnsafePointer<CChar>?
        let code = presence_tap_violation(fd, &why)
        return (code, why.map { String(cString: $0) })
    }

    /// Feeds `stream` in pieces of `split` bytes.
    func feed(_ stream: [UInt8], split: Int) {
        var offset = 0
        while offset < stream.count {
            feed(Array(stream[offset..<min(offset + split, stream.count)]))
            offset += split
        }
    }

    /// Feeds `stream` after a handshake, split every `split` bytes; returns the violation seen.
    func follow(_ stream: [UInt8], split: Int) -> (Int32, String?) {
        presence_tap_accepted(fd)
        defer { presence_tap_forget(fd) }
        feed(head)
        presence_tap_established(fd)
        feed(stream, split: split)
        return violation()
    }

    /// The frames lws 4.1.6 drops without a close frame are spotted, wherever the reads split them;
    /// the frames it handles itself (or that are fine) are not.
    @Test func framesLwsWouldDropSilentlyAreSpottedAtEverySplit() {
        let ok = frame(Array("{}".utf8)) + frame(Array(repeating: 0x61, count: 125), opcode: 0x9)
            + frame([0x03, 0xE8] + Array("bye é".utf8), opcode: 0x8)
        var longLength = frame([], opcode: 0x1)
        longLength[1] = 0x80 | 127
        longLength.insert(contentsOf: [0x80, 0, 0, 0, 0, 0, 0, 5], at: 2)
        let cases: [([UInt8], Int32, String)] = [
            (frame(Array(repeating: 0x61, count: 126), opcode: 0x9), 1002, "control frame longer than 125 bytes"),
            (frame([0x03], opcode: 0x8), 1002, "close frame with a 1-byte payload"),
            (frame([0x03, 0xE8, 0xCE, 0xBA, 0xED, 0xA0, 0x80], opcode: 0x8), 1007, "close reason is not valid UTF-8"),
            (frame([0x03, 0xE8, 0x61, 0xE2, 0x82], opcode: 0x8), 1007, "close reason is not valid UTF-8"),
            (longLength, 1002, "frame length with its most significant bit set"),
        ]
        for split in [1, 2, 3, 5, 4096] {
            #expect(follow(ok, split: split).0 == 0, "split \(split)")
            for (bad, code, why) in cases {
                let (seen, reason) = follow(ok + bad, split: split)
                #expect(seen == code && reason == why, "split \(split): \(bad.prefix(4))")
            }
        }
    }
}
