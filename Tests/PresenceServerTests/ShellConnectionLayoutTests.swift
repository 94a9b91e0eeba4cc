@testable import PresenceServer
import Testing

/// glibc's usable size of a malloc'd block (not exported by the Glibc module).
@_silgen_name("malloc_usable_size") private func mallocUsableSize(_ pointer: UnsafeMutableRawPointer?) -> Int

/// What every connection pays in the shell (issue 15: the redesign must cost nothing per
/// connection; `bench/connections.sh` measures 19,900 of them). An idle connection's record stays
/// in malloc's 208-byte class, and the parts an idle connection does not use hold no storage.
@Suite struct ShellConnectionLayoutTests {
    func idle() -> ShellConnection {
        ShellConnection(id: 1, wsi: OpaquePointer(bitPattern: 0x1000)!, socket: 7, remote: "127.0.0.1", userAgent: nil, now: 0,
                        maxMessageBytes: 1 << 20, budget: MessageBudget(perSecond: 1_000, burst: 2_000, now: 0))
    }

    @Test func anIdleConnectionFitsItsMallocClass() {
        let connection = idle()
        let chunk = mallocUsableSize(Unmanaged.passUnretained(connection).toOpaque())
        #expect(chunk <= 200, "the record grew into a larger malloc class (\(chunk) usable bytes)")
    }

    @Test func idlePartsHoldNoStorage() {
        #expect(MemoryLayout<OutboundQueue>.size == MemoryLayout<Int>.size, "an empty queue is one nil reference")
        #expect(MemoryLayout<MessageReceiver>.size == 2 * MemoryLayout<Int>.size, "the limit and one nil reference")
        #expect(MemoryLayout<MessageBudget>.size <= 24)
        #expect(MemoryLayout<ShellConnection.Closing?>.size == MemoryLayout<Int>.size)
    }

    /// Storage appears while a queue or a message in pieces needs it, and goes when drained.
    @Test func storageComesAndGoesWithUse() {
        let connection = idle()
        connection.queue.append(OutFrame(payload: [0x61]))
        #expect(!connection.queue.isEmpty && connection.queue.bytes == 1)
        _ = connection.queue.popFirst()
        #expect(connection.queue.isEmpty && connection.queue.bytes == 0)

        let piece = Array("{\"a\":".utf8), rest = Array("1}".utf8)
        let first = piece.withUnsafeBytes { connection.receiver.receive($0, messageEnds: false) }
        #expect(first == .nothing)
        let whole = rest.withUnsafeBytes { connection.receiver.receive($0, messageEnds: true) }
        #expect(whole == .message(Array("{\"a\":1}".utf8)))
    }
}
