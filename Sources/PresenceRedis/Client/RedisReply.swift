import CHiredis

/// A Redis reply (RESP2, all hiredis 0.14.1 knows), copied out of hiredis's reply tree before
/// hiredis frees it. An error reply is a value, not a thrown error: it belongs to one command, and
/// a script or pipeline can return several.
public indirect enum RedisReply: Sendable, Hashable {
    case status(String)
    case error(String)
    case integer(Int64)
    case bulk([UInt8])
    case null
    case array([RedisReply])

    init(_ reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING:
            self = .bulk(RedisReply.bytes(r.str, r.len))
        case REDIS_REPLY_STATUS:
            self = .status(String(decoding: RedisReply.bytes(r.str, r.len), as: UTF8.self))
        case REDIS_REPLY_ERROR:
            self = .error(String(decoding: RedisReply.bytes(r.str, r.len), as: UTF8.self))
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(r.integer))
        case REDIS_REPLY_ARRAY:
            var elements: [RedisReply] = []
            elements.reserveCapacity(r.elements)
            for i in 0..<r.elements {
                if let element = r.element[i] { elements.append(RedisReply(element)) } else { elements.append(.null) }
            }
            self = .array(elements)
        default:
            self = .null
        }
    }

    private static func bytes(_ pointer: UnsafeMutablePointer<CChar>?, _ count: Int) -> [UInt8] {
        guard let pointer, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// A bulk or status reply as text (bulk bytes decoded as UTF-8).
    public var string: String? {
        switch self {
        case .bulk(let bytes): String(decoding: bytes, as: UTF8.self)
        case .status(let text): text
        default: nil
        }
    }

    /// An integer reply, or a bulk/status reply holding a decimal integer (what HGET returns).
    public var integer: Int64? {
        switch self {
        case .integer(let value): value
        case .bulk, .status: string.flatMap { Int64($0) }
        default: nil
        }
    }

    public var bytes: [UInt8]? {
        if case .bulk(let bytes) = self { return bytes }
        return string.map { Array($0.utf8) }
    }

    public var array: [RedisReply]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    public var errorMessage: String? {
        if case .error(let message) = self { return message }
        return nil
    }

    public var isNull: Bool { self == .null }
}
