import CLibWebSockets
import PresenceWire

/// One outgoing message's bytes with `LWS_PRE` bytes of headroom for lws's frame header.
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

    /// The frames of one encoded message (count-prefixed pieces when it is long), or nil when it
    /// is too large to split.
    static func frames(for text: String) -> [OutFrame]? {
        FrameSplitter.frames(for: text).map { $0.map(OutFrame.init(payload:)) }
    }
}
