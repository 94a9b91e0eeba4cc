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
        if masked { bytes += [0x12, 0x34, 0x56, 0x78] }
        return bytes + payload
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
            var offset = 0
            while offset < stream.count {
                feed(Array(stream[offset..<min(offset + split, stream.count)]))
                offset += split
            }
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
}
