/// A decoded client request (§3.1). The wire codec builds these; the engine executes them.
public enum Request: Sendable, Equatable {
    /// `s`: client statistics; `sdk` is the client's SDK and version when it names one ("js 8.10.1").
    case stats(sdk: String?)
    /// `auth` or `gauth`. `authVariable` / `noAuth` are the admin's auth-variable override.
    case auth(credential: String, authVariable: JSON?, noAuth: Bool)
    case unauth
    case appCheck
    case unappCheck
    case listen(path: Path, query: JSON?, tag: Int?)
    case unlisten(path: Path, query: JSON?, tag: Int?)
    case put(path: Path, data: JSON, hash: String?)
    case merge(path: Path, children: [Update])
    case onDisconnectPut(path: Path, data: JSON)
    case onDisconnectMerge(path: Path, children: [Update])
    case onDisconnectCancel(path: Path)
    case get(path: Path, query: JSON?)

    /// One key of an update (`m`, `om`): a relative path and its new value.
    public struct Update: Sendable, Equatable {
        public var path: Path
        public var value: JSON
        public init(path: Path, value: JSON) {
            self.path = path
            self.value = value
        }
    }

    public var isWrite: Bool {
        switch self {
        case .put, .merge: return true
        default: return false
        }
    }
}

/// A request with its request number (`r`), when the client sent one.
public struct NumberedRequest: Sendable, Equatable {
    public var number: Int?
    public var request: Request
    public init(number: Int?, request: Request) {
        self.number = number
        self.request = request
    }
}
