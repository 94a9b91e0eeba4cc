import PresenceCore

/// Encodes engine messages as v5 envelopes (§2, §3, §4).
public enum OutboundEncoder {
    public static func encode(_ message: Outbound) -> String {
        var out = ""
        switch message {
        case let .hello(timestamp, host, sessionID):
            out += "{\"t\":\"c\",\"d\":{\"t\":\"h\",\"d\":{\"ts\":\(timestamp),\"v\":\"5\",\"h\":"
            JSONWriter.writeString(host, into: &out)
            out += ",\"s\":"
            JSONWriter.writeString(sessionID, into: &out)
            out += "}}}"
        case .pong:
            out += "{\"t\":\"c\",\"d\":{\"t\":\"o\",\"d\":{}}}"
        case let .reply(number, result):
            if case .success(.deferred(let read)) = result {
                // Without a loop to slice it on (tests, fuzzing): the whole answer now.
                switch read.resolved() {
                case .success(let data): return String(decoding: okReply(number: number, data: data), as: UTF8.self)
                case .failure(let error): return encode(.reply(number: number, result: .failure(error)))
                }
            }
            out += "{\"t\":\"d\",\"d\":{\"r\":\(number),\"b\":{\"s\":"
            switch result {
            case .success(let data):
                out += "\"ok\",\"d\":"
                switch data {
                case .empty: out += "\"\""
                case .emptyObject: out += "{}"
                case .json(let json): JSONWriter.write(json, into: &out)
                case .node(let node): node.writeJSON(into: &out, exportFormat: true)
                case .deferred: break  // answered above
                }
            case .failure(let error):
                let (status, text) = WireStatus.failure(for: error)
                JSONWriter.writeString(status.rawValue, into: &out)
                out += ",\"d\":"
                JSONWriter.writeString(text, into: &out)
            }
            out += "}}}"
        case let .data(path, value, tag):
            out += "{\"t\":\"d\",\"d\":{\"a\":\"d\",\"b\":{\"p\":"
            JSONWriter.writeString(path.wireString, into: &out)
            out += ",\"d\":"
            value.writeJSON(into: &out, exportFormat: true)
            if let tag { out += ",\"t\":\(tag)" }
            out += "}}}"
        case let .merge(path, changes, tag):
            out += "{\"t\":\"d\",\"d\":{\"a\":\"m\",\"b\":{\"p\":"
            JSONWriter.writeString(path.wireString, into: &out)
            out += ",\"d\":{"
            for (index, change) in changes.enumerated() {
                if index > 0 { out += "," }
                JSONWriter.writeString(change.path.wireString, into: &out)
                out += ":"
                change.value.writeJSON(into: &out, exportFormat: true)
            }
            out += "}"
            if let tag { out += ",\"t\":\(tag)" }
            out += "}}}"
        case let .listenData(number, read, tag):
            // Without a loop to slice it on (tests, fuzzing): the data now (`messages(for:)` gives
            // the ok reply after it too), or the refusal.
            switch read.resolved() {
            case .success(let data):
                let (prefix, suffix) = dataEnvelope(path: read.path, tag: tag)
                return String(decoding: prefix + data + suffix, as: UTF8.self)
            case .failure(let error):
                return number.map { encode(.reply(number: $0, result: .failure(error))) } ?? encode(.serverError(WireStatus.failure(for: error).message))
            }
        case let .listenRevoked(path, query):
            out += "{\"t\":\"d\",\"d\":{\"a\":\"c\",\"b\":{\"p\":"
            JSONWriter.writeString(path.wireString, into: &out)
            if let query {
                // The JS client maps over `q`, so it must be an array.
                out += ",\"q\":["
                JSONWriter.write(query, into: &out)
                out += "]"
            }
            out += "}}}"
        case let .authRevoked(error):
            let (status, text) = WireStatus.failure(for: error)
            out += "{\"t\":\"d\",\"d\":{\"a\":\"ac\",\"b\":{\"s\":"
            JSONWriter.writeString(status.rawValue, into: &out)
            out += ",\"d\":"
            JSONWriter.writeString(text, into: &out)
            out += "}}}"
        case let .shutdown(reason):
            out += "{\"t\":\"c\",\"d\":{\"t\":\"s\",\"d\":"
            JSONWriter.writeString(reason, into: &out)
            out += "}}"
        case let .serverError(text):
            out += "{\"t\":\"c\",\"d\":{\"t\":\"e\",\"d\":"
            JSONWriter.writeString(text, into: &out)
            out += "}}"
        }
        return out
    }

    /// The ok reply to request `number` whose `d` is `data` (JSON text), as UTF-8 bytes.
    public static func okReply(number: Int, data: [UInt8]) -> [UInt8] {
        let (prefix, suffix) = okReplyEnvelope(number: number)
        var bytes = prefix
        bytes.reserveCapacity(bytes.count + data.count + suffix.count)
        bytes.append(contentsOf: data)
        bytes.append(contentsOf: suffix)
        return bytes
    }

    /// Every message `message` stands for, in order: one, or for a big listen's data the data and
    /// then its ok reply (when the data is within the budget).
    public static func messages(for message: Outbound) -> [String] {
        guard case let .listenData(number?, read, _) = message, case .success = read.resolved() else { return [encode(message)] }
        return [encode(message), encode(.reply(number: number, result: .success(.emptyObject)))]
    }

    /// What comes before and after the `d` of a `d` (data) message at `path`.
    public static func dataEnvelope(path: Path, tag: Int?) -> (prefix: [UInt8], suffix: [UInt8]) {
        var prefix = "{\"t\":\"d\",\"d\":{\"a\":\"d\",\"b\":{\"p\":"
        JSONWriter.writeString(path.wireString, into: &prefix)
        prefix += ",\"d\":"
        return (Array(prefix.utf8), Array(((tag.map { ",\"t\":\($0)" } ?? "") + "}}}").utf8))
    }

    /// What comes before and after the `d` of an ok reply to request `number`.
    public static func okReplyEnvelope(number: Int) -> (prefix: [UInt8], suffix: [UInt8]) {
        (Array("{\"t\":\"d\",\"d\":{\"r\":\(number),\"b\":{\"s\":\"ok\",\"d\":".utf8), Array("}}}".utf8))
    }
}
