import PresenceCore

/// Engine messages as Server-Sent Events for a stream at `location` (§9.4). Each payload is on
/// one line; paths are relative to the streamed location, `/` meaning the location itself.
public enum ServerSentEvents {
    /// The text of the events for one message, and whether the stream ends after them.
    public static func events(for message: Outbound, location: Path) -> (text: String, ends: Bool)? {
        switch message {
        case let .data(path, value, _):
            var data = "{\"path\":"
            JSONWriter.writeString(relative(path, to: location), into: &data)
            data += ",\"data\":"
            value.writeJSON(into: &data, exportFormat: false)
            data += "}"
            return (event("put", data), false)
        case let .merge(path, changes, _):
            var data = "{\"path\":"
            JSONWriter.writeString(relative(path, to: location), into: &data)
            data += ",\"data\":{"
            for (index, change) in changes.enumerated() {
                if index > 0 { data += "," }
                JSONWriter.writeString(change.path.wireString, into: &data)
                data += ":"
                change.value.writeJSON(into: &data, exportFormat: false)
            }
            data += "}}"
            return (event("patch", data), false)
        case .listenRevoked:
            return (event(WireStatus.StreamEvent.cancel.rawValue, "\"Permission denied\""), true)
        case .authRevoked:
            // The Python Admin SDK compares this exact text, without JSON quotes.
            return (event(WireStatus.StreamEvent.authRevoked.rawValue, "credential is no longer valid"), true)
        default:
            return nil
        }
    }

    /// The text around a `put` event's data, for data written elsewhere (a big first event made in
    /// slices): the same event `events(for: .data…)` makes.
    public static func dataEnvelope(path: Path, location: Path) -> (prefix: [UInt8], suffix: [UInt8]) {
        var prefix = "event: put\ndata: {\"path\":"
        JSONWriter.writeString(relative(path, to: location), into: &prefix)
        prefix += ",\"data\":"
        return (Array(prefix.utf8), Array("}\n\n".utf8))
    }

    public static let keepAlive = event("keep-alive", "null")

    static func event(_ name: String, _ data: String) -> String { "event: \(name)\ndata: \(data)\n\n" }

    static func relative(_ path: Path, to location: Path) -> String {
        "/" + (location.relative(path)?.wireString ?? path.wireString)
    }
}
