/// Splits outgoing messages longer than 16,384 characters into a count frame and pieces (§2.2),
/// cutting on UTF-8 boundaries so each WebSocket text frame is valid UTF-8 on its own.
public enum FrameSplitter {
    public static let maxFrameBytes = 16_384
    /// Clients read a count frame only when it is at most 4 digits (iOS).
    public static let maxPieces = 9_999

    /// The frames to send for one message, as UTF-8 bytes; nil when it would need more than
    /// `maxPieces` pieces.
    public static func frames(for message: String) -> [[UInt8]]? {
        frames(for: Array(message.utf8))
    }

    /// The same for a message already in UTF-8.
    public static func frames(for bytes: [UInt8]) -> [[UInt8]]? {
        if bytes.count <= maxFrameBytes { return [bytes] }
        var pieces: [[UInt8]] = []
        var start = 0
        while start < bytes.count {
            let end = pieceEnd(in: bytes, from: start)
            pieces.append(Array(bytes[start..<end]))
            start = end
        }
        guard pieces.count <= maxPieces else { return nil }
        return [Array(String(pieces.count).utf8)] + pieces
    }

    /// Where the piece starting at `start` ends: at most `maxFrameBytes` on, backed up to the start
    /// of a UTF-8 sequence (continuation bytes are 10xxxxxx).
    public static func pieceEnd(in bytes: [UInt8], from start: Int) -> Int {
        var end = min(start + maxFrameBytes, bytes.count)
        while end < bytes.count, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return end
    }
}
