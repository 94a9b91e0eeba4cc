import CLibWebSockets

/// One outgoing WebSocket text message with `LWS_PRE` bytes of headroom for lws's header.
/// A broadcast shares one `OutFrame` among all recipients: writes happen one at a time on the
/// loop thread and lws writes the same header bytes for each, so sharing is safe.
final class OutFrame {
    static let headroom = Int(lwss_pre())
    var storage: [UInt8]
    let payloadCount: Int

    init(payload: [UInt8]) {
        var storage = [UInt8](repeating: 0, count: OutFrame.headroom + payload.count)
        storage.replaceSubrange(OutFrame.headroom..., with: payload)
        self.storage = storage
        self.payloadCount = payload.count
    }

    /// Writes the frame to `wsi` as one text message. Returns false when lws failed.
    func write(to wsi: OpaquePointer) -> Bool {
        let count = payloadCount
        let written = storage.withUnsafeMutableBufferPointer { buffer in
            lwss_write(wsi, buffer.baseAddress! + OutFrame.headroom, count, Int32(LWS_WRITE_TEXT.rawValue))
        }
        return Int(written) >= count
    }
}
