@testable import PresenceServer
import Testing

/// Gathering a connection's due frames into one write: the bytes are the frames RFC 6455 defines
/// (read back here by an independent parser), in order, within the budget; and the per-turn list
/// of due frames keeps each connection's order and forgets what is taken out.
@Suite struct FrameBatchTests {
    func frame(_ count: Int, _ byte: UInt8 = 0x61) -> OutFrame { OutFrame(payload: [UInt8](repeating: byte, count: count)) }

    /// Server frames back from wire bytes: (fin, opcode, payload); nil when the bytes are not whole frames.
    func parse(_ wire: ArraySlice<UInt8>) -> [(fin: Bool, opcode: UInt8, payload: [UInt8])]? {
        var frames: [(Bool, UInt8, [UInt8])] = []
        var at = wire.startIndex
        while at < wire.endIndex {
            guard wire.endIndex - at >= 2, wire[at + 1] & 0x80 == 0 else { return nil }
            var length = Int(wire[at + 1] & 0x7F), start = at + 2
            if length == 126 {
                length = Int(wire[at + 2]) << 8 | Int(wire[at + 3])
                start = at + 4
            } else if length == 127 {
                length = (0..<8).reduce(0) { $0 << 8 | Int(wire[at + 2 + $1]) }
                start = at + 10
            }
            guard start + length <= wire.endIndex else { return nil }
            frames.append((wire[at] & 0x80 != 0, wire[at] & 0x0F, Array(wire[start..<start + length])))
            at = start + length
        }
        return frames
    }

    @Test func framesOfEveryHeaderSizeComeBackInOrder() throws {
        var batch = FrameBatch()
        let sizes = [0, 1, 125, 126, 127, 300, 16_384]
        for (index, size) in sizes.enumerated() {
            let next = frame(size, UInt8(0x30 + index))
            #expect(batch.fits(next))
            batch.append(next)
        }
        let parsed = try #require(parse(batch.wire[OutFrame.headroom...]))
        #expect(parsed.map(\.payload.count) == sizes)
        #expect(parsed.allSatisfy { $0.fin && $0.opcode == 1 })
        for (index, got) in parsed.enumerated() { #expect(got.payload.allSatisfy { $0 == UInt8(0x30 + index) }) }
        #expect(batch.byteCount == sizes.reduce(0) { $0 + FrameBatch.headerCount($1) + $1 })
        #expect(batch.payloadBytes == sizes.reduce(0, +) && batch.frameCount == sizes.count)
    }

    @Test func aBatchStaysWithinItsBudgetButTakesAnyFirstFrame() throws {
        var batch = FrameBatch()
        let big = frame(70_000)
        #expect(batch.fits(big), "a frame over the budget goes alone")
        batch.append(big)
        #expect(!batch.fits(frame(1)))
        #expect(try #require(parse(batch.wire[OutFrame.headroom...])).map(\.payload.count) == [70_000], "64-bit length")
        batch.reset()
        #expect(batch.isEmpty && batch.byteCount == 0 && batch.wire.count == OutFrame.headroom)
        var taken = 0
        while batch.fits(frame(1_000)) {
            batch.append(frame(1_000))
            taken += 1
        }
        #expect(taken == FrameBatch.budget / 1_004)
        #expect(batch.byteCount <= FrameBatch.budget)
    }

    final class Holder: DueFramesHolder {
        var dueSlot: Int32 = -1
    }

    @Test func dueFramesKeepEachDestinationsOrderAndAllocateNoSlotTwice() {
        var due = DueFrames<Holder>()
        let a = Holder(), b = Holder(), c = Holder()
        let frames = (0..<9).map { frame($0 + 1) }
        // Interleaved: a gets 0, 3, 6; b 1, 4, 7; c 2, 5, 8.
        for (index, frame) in frames.enumerated() { due.append(frame, for: [a, b, c][index % 3]) }
        #expect(due.bytes(for: a) == 1 + 4 + 7 && due.holdsFrames(for: b))
        #expect(due.totalBytes == 45)
        // c's frames go another way (its queue): the flush does not see them.
        #expect(due.take(for: c).map(\.payloadCount) == [3, 6, 9])
        #expect(!due.holdsFrames(for: c) && due.bytes(for: c) == 0)
        #expect(due.totalBytes == 45 - 18)
        var seen: [(Holder, [Int])] = []
        let count = due.beginTurn()
        #expect(due.totalBytes == 0, "the turn's frames are the sends' now")
        for index in 0..<count {
            let (holder, chain) = due.turn(index)
            seen.append((holder, chain.map(\.payloadCount)))
            // Due during the flush: the next turn's.
            if holder === a { due.append(frame(100), for: a) }
        }
        due.endTurn()
        #expect(seen.count == 3 && seen[0].0 === a && seen[1].0 === b && seen[2].0 === c)
        #expect(seen.map(\.1) == [[1, 4, 7], [2, 5, 8], []])
        #expect(b.dueSlot == -1 && c.dueSlot == -1 && a.dueSlot == 0 && due.totalBytes == 100)
        #expect(due.beginTurn() == 1 && due.turn(0).1.map(\.payloadCount) == [100])
        due.endTurn()
        #expect(due.isEmpty && a.dueSlot == -1)
    }
}
