/// Why a request's path or data was refused. Mapped to a wire status in `PresenceWire`.
/// `invalidPath` keeps the client's text; `description` quotes only a short prefix of it.
public enum DataError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidPath(String, reason: String)
    case invalidData(path: String, reason: String)
    case unknownServerValue(path: String)

    public var description: String {
        switch self {
        case let .invalidPath(path, reason): return "Invalid path \(ClientInput.quoted(path)): \(reason)"
        case let .invalidData(path, reason): return "Invalid data at \(path): \(reason)"
        case let .unknownServerValue(path): return "Invalid data at \(path): unknown server value"
        }
    }
}
