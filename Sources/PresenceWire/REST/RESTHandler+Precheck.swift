import PresenceCore

extension RESTHandler {
    /// The method a request stands for: a POST may name another with `X-HTTP-Method-Override`.
    func effectiveMethod(_ request: HTTPRequest) -> Result<String, HTTPRefusal> {
        guard request.method == "POST", let override = request.headers["x-http-method-override"]?.uppercased() else {
            return .success(request.method)
        }
        guard ["PUT", "PATCH", "DELETE", "GET"].contains(override) else {
            return .failure(HTTPRefusal(.error(400, "X-HTTP-Method-Override must be PUT, PATCH or DELETE")))
        }
        return .success(override)
    }

    /// What a request with a body is told before its body is read, from its head alone: the
    /// route, the method, the credentials, and whether the rules could let these credentials
    /// write there with any value (`Engine.mightWrite`). Nil when the body is worth reading; the
    /// request is then checked in full with it (`handle`). Lets the shell refuse before buffering
    /// a byte of a body nobody may send.
    public func precheck(_ request: HTTPRequest, now: Int64) -> HTTPResponse? {
        let method: String
        switch effectiveMethod(request) {
        case .success(let resolved): method = resolved
        case .failure(let refusal): return refusal.response
        }
        if request.path == "/.settings/rules.json" {
            guard case .success(let credentials) = resolveCredentials(request, now: now), credentials.isAdmin,
                  request.query["auth_variable_override"] == nil else {
                return .error(401, "Permission denied: rules need admin credentials")
            }
            return nil
        }
        let credentials: Credentials, path: Path
        switch dataTarget(request, now: now) {
        case .success(let target): (credentials, path) = target
        case .failure(let refusal): return refusal.response
        }
        switch method {
        case "PUT", "DELETE", "PATCH", "POST":
            let below = method == "PATCH" || method == "POST"
            guard engine.mightWrite(at: path, below: below, namespace: namespace(of: request), credentials: credentials, now: now) else {
                return .refusal(for: .permissionDenied)
            }
            return nil
        case "GET":
            return nil
        default:
            return .error(405, "Method \(method) is not allowed")
        }
    }
}
