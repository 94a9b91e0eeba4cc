/// Turns whole WebSocket text messages into protocol messages (§2.2): ignores the `"0"` keepalive
/// and joins count-prefixed multi-frame messages. Fragment reassembly happens below, in the shell.
public struct FrameAssembler: Sendable {
    public enum Output: Equatable, Sendable {
        /// A complete protocol message to decode.
        case message([UInt8])
        /// The `"0"` keepalive, or a piece of a multi-frame message that is not complete yet.
        case nothing
    }

    /// What a server takes by default (`presence-server --max-message-bytes`), and what a client
    /// sends at most until told otherwise.
    public static let defaultMaxMessageBytes = 1 << 20

    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        case tooLarge(limit: Int)
        /// Also the reason of the server's 1009 close, which clients read back (`init(reason:)`).
        public var description: String {
            switch self {
            case .tooLarge(let limit): return "message larger than \(limit) bytes"
            }
        }

        /// The failure a close reason states (`description` read back): how a client learns the
        /// server's limit. Nil for any other text, or a limit that is not a positive number.
        public init?(reason: String) {
            let prefix = "message larger than ", suffix = " bytes"
            guard reason.hasPrefix(prefix), reason.hasSuffix(suffix),
                  reason.utf8.count > prefix.utf8.count + suffix.utf8.count else { return nil }
            let digits = reason.dropFirst(prefix.count).dropLast(suffix.count)
            guard digits.allSatisfy(\.isASCII), let limit = Int(digits), limit > 0 else { return nil }
            self = .tooLarge(limit: limit)
        }
    }

    public let maxMessageBytes: Int
    private var expectedPieces = 0
    private var receivedPieces = 0
    private var buffer: [UInt8] = []

    public init(maxMessageBytes: Int) {
        self.maxMessageBytes = maxMessageBytes
    }

    public var isCollecting: Bool { expectedPieces > 0 }

    public mutating func accept(_ frame: [UInt8]) throws(Failure) -> Output {
        if expectedPieces > 0 {
            guard buffer.count + frame.count <= maxMessageBytes else {
                reset()
                throw .tooLarge(limit: maxMessageBytes)
            }
            buffer.append(contentsOf: frame)
            receivedPieces += 1
            guard receivedPieces == expectedPieces else { return .nothing }
            let message = buffer
            reset()
            return .message(message)
        }
        if let count = FrameAssembler.frameCount(frame) {
            if count == 0 { return .nothing }  // the keepalive
            expectedPieces = count
            receivedPieces = 0
            buffer.removeAll(keepingCapacity: true)
            return .nothing
        }
        guard frame.count <= maxMessageBytes else { throw .tooLarge(limit: maxMessageBytes) }
        return .message(frame)
    }

    private mutating func reset() {
        expectedPieces = 0
        receivedPieces = 0
        buffer = []
    }

    /// A frame of at most 6 ASCII digits is a count (the JS client's rule).
    static func frameCount(_ frame: [UInt8]) -> Int? {
        guard !frame.isEmpty, frame.count <= 6 else { return nil }
        var value = 0
        for byte in frame {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }
}
