import PresenceCore

/// What a streaming read asks for.
public struct StreamRequest: Sendable {
    public var path: Path
    public var namespace: String
    public var credentials: Credentials
    public var query: QuerySpec
}

/// The REST API (protocol doc §9) on top of the engine: `/<path>.json?ns=…` with GET, PUT, PATCH,
/// POST and DELETE, `X-HTTP-Method-Override`, `print=silent|pretty`, `shallow`, `format=export`,
/// and the same credentials, rules and listener pushes as the wire protocol.
public final class RESTHandler {
    let engine: Engine
    let defaultNamespace: String
    var pushIDs = PushID.Generator()

    public init(engine: Engine, defaultNamespace: String) {
        self.engine = engine
        self.defaultNamespace = defaultNamespace
    }

    /// A request on a single node, answered at once (a replicated node uses `respond`).
    public func handle(_ request: HTTPRequest, now: Int64) -> HTTPResponse {
        switch respond(request, now: now) {
        case .response(let response): return response
        case .sliced(let sliced): return sliced.response(for: sliced.read.resolved())
        case .pending: return .error(503, "This node answers through the log; retry")
        }
    }

    /// A request: its response now, or (a replicated node) a ticket whose outcome makes it.
    public func respond(_ request: HTTPRequest, now: Int64) -> RESTAnswer {
        let method: String
        switch effectiveMethod(request) {
        case .success(let resolved): method = resolved
        case .failure(let refusal): return .response(refusal.response)
        }
        if request.path == "/.settings/rules.json" {
            return rules(method, request: request, now: now)
        }
        let credentials: Credentials, path: Path
        switch dataTarget(request, now: now) {
        case .success(let target): (credentials, path) = target
        case .failure(let refusal): return .response(refusal.response)
        }
        let namespace = namespace(of: request)
        switch method {
        case "GET": return get(path, namespace: namespace, credentials: credentials, request: request, now: now)
        case "PUT", "PATCH", "POST", "DELETE":
            return write(method, path, namespace: namespace, credentials: credentials, request: request, now: now)
        default: return .response(.error(405, "Method \(ClientInput.quoted(method)) is not allowed"))
        }
    }

    /// A streaming read (`Accept: text/event-stream`, §9.4): nil when `request` is not one, else
    /// the location, credentials and query to stream, or the refusal to send.
    public func stream(_ request: HTTPRequest, now: Int64) -> Result<StreamRequest, HTTPRefusal>? {
        guard request.method == "GET", request.headers["accept"]?.contains("text/event-stream") == true,
              request.path.hasSuffix(".json") else { return nil }
        let credentials: Credentials, path: Path
        switch dataTarget(request, now: now) {
        case .success(let target): (credentials, path) = target
        case .failure(let refusal): return .failure(refusal)
        }
        let query: QuerySpec
        do { query = try QuerySpec(rest: request.query) } catch { return .failure(HTTPRefusal(.error(400, error.description))) }
        let namespace = namespace(of: request)
        return .success(StreamRequest(path: path, namespace: namespace, credentials: credentials, query: query))
    }

    /// A data request's (`/a/b.json`) credentials and location, or why it is refused (not a data
    /// path, then its query parameters, then the credentials, then the path).
    func dataTarget(_ request: HTTPRequest, now: Int64) -> Result<(credentials: Credentials, path: Path), HTTPRefusal> {
        guard request.path.hasSuffix(".json") else {
            return .failure(HTTPRefusal(.error(404, "Not found: data paths end in .json, e.g. /users/alice.json")))
        }
        if let refusal = RESTParameters.refusal(request.query) { return .failure(HTTPRefusal(refusal)) }
        let credentials: Credentials
        switch resolveCredentials(request, now: now) {
        case .success(let resolved): credentials = resolved
        case .failure(let refusal): return .failure(refusal)
        }
        do { return .success((credentials, try Path(String(request.path.dropLast(".json".count))))) } catch {
            return .failure(HTTPRefusal(.error(400, error.description)))
        }
    }

    /// The database a request names with `ns` (empty or missing: the default one).
    func namespace(of request: HTTPRequest) -> String {
        request.query["ns"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultNamespace
    }

    /// `Authorization: Bearer <token>`, `access_token=`, `auth=`; then the admin's
    /// `auth_variable_override` (a JSON auth object, or null for unauthenticated).
    public func resolveCredentials(_ request: HTTPRequest, now: Int64) -> Result<Credentials, HTTPRefusal> {
        var credentials = Credentials.unauthenticated
        var tokens: [String] = []
        if let header = request.headers["authorization"] {
            let parts = header.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else {
                return .failure(HTTPRefusal(.error(401, "Authorization header must be 'Bearer <token>'")))
            }
            tokens.append(String(parts[1]))
        }
        if let token = request.query["access_token"] { tokens.append(token) }
        if let token = request.query["auth"] { tokens.append(token) }
        for token in tokens {
            switch engine.verify(credential: token, now: now) {
            case .success(let verified): credentials = verified
            case .failure(let error):
                return .failure(HTTPRefusal(.refusal(for: EngineError(error))))
            }
        }
        if let override = request.query["auth_variable_override"] {
            guard credentials.isAdmin else {
                return .failure(HTTPRefusal(.error(401, "auth_variable_override needs admin credentials")))
            }
            guard let json = try? JSONParser.parse(override) else {
                return .failure(HTTPRefusal(.error(400, "auth_variable_override is not valid JSON")))
            }
            switch json {
            case .null: credentials = .unauthenticated
            case .object: credentials = .user(auth: json, expiresAt: nil)
            default: return .failure(HTTPRefusal(.error(400, "auth_variable_override must be a JSON object or null")))
            }
        }
        return .success(credentials)
    }

    /// `GET` / `PUT /.settings/rules.json?ns=…`, admin only.
    func rules(_ method: String, request: HTTPRequest, now: Int64) -> RESTAnswer {
        guard case .success(let credentials) = resolveCredentials(request, now: now), credentials.isAdmin,
              request.query["auth_variable_override"] == nil else {
            return .response(.error(401, "Permission denied: rules need admin credentials"))
        }
        let namespace = namespace(of: request)
        switch method {
        case "GET":
            return RESTAnswer(engine.submitRulesDocument(namespace: namespace, now: now)) { [self] outcome in
                switch outcome {
                case .rulesDocument(let rules?):
                    if request.query["format"] != "strict", let text = rules.text { return .json(200, text) }
                    return render(rules.document, request: request)
                case .rulesDocument(nil): return .error(404, "No rules document is in force")
                case .read(.failure(let error)): return .refusal(for: error)
                default: return RESTAnswer.mismatch
                }
            }
        case "PUT":
            guard let text = String(validating: request.body, as: UTF8.self) else { return .response(.error(400, "Rules must be UTF-8 text")) }
            let ruleSet: RuleSet
            do {
                ruleSet = try RuleSet.load(text: text, source: "PUT /.settings/rules.json?ns=\(ClientInput.quoted(namespace))")
            } catch {
                return .response(.error(400, error.description))
            }
            // Replicated, the rules go through the log: answered once they are in force here.
            return RESTAnswer(engine.submitRules(ruleSet, text: text, namespace: namespace, now: now)) { outcome in
                switch outcome.done {
                case .success?: return .json(200, "{\"status\":\"ok\"}")
                case .failure(let error)?: return .refusal(for: error)
                case nil: return RESTAnswer.mismatch
                }
            }
        default:
            return .response(.error(405, "Rules support GET and PUT"))
        }
    }

    func get(_ path: Path, namespace: String, credentials: Credentials, request: HTTPRequest, now: Int64) -> RESTAnswer {
        let query: QuerySpec
        do { query = try QuerySpec(rest: request.query) } catch { return .response(.error(400, error.description)) }
        let shallow = request.query["shallow"] == "true"
        // A big answer is written in slices, unless its ETag is asked for (a hash of the whole value).
        let hashed = wantsETag(request) || request.headers["if-none-match"] != nil
        let form: DeferredRead.Form? = hashed ? nil : shallow ? .shallow : request.query["format"] == "export" ? .export : .plain
        let answer = engine.submitRead(path, namespace: namespace, credentials: credentials, now: now, query: query, countsAsUse: true,
                                       shallow: shallow, sliced: form, hashed: hashed)
        return RESTAnswer(answer, answering: { [self] outcome in
            if case .slicedRead(let read) = outcome { return .sliced(SlicedResponse(read: read, pretty: request.query["print"] == "pretty")) }
            return .response(render(read: outcome.read, at: path, request: request))
        })
    }

    /// A `GET`'s response for the read's result.
    func render(read: Result<Node, EngineError>?, at path: Path, request: HTTPRequest) -> HTTPResponse {
        switch read {
        case nil: return RESTAnswer.mismatch
        case .failure(let error)?: return .refusal(for: error)
        case .success(let node)?:
            var headers: [(String, String)] = []
            if wantsETag(request) || request.headers["if-none-match"] != nil {
                // The ETag hashes the whole value at once: past `--max-hash-bytes`, 413.
                if let refusal = engine.hashRefusal(node, at: path) { return .refusal(for: refusal) }
                let tag = etag(node, at: path, request: request)
                if let match = request.headers["if-none-match"], match == tag {
                    return HTTPResponse(status: 304, headers: [("ETag", tag)], body: "")
                }
                headers.append(("ETag", tag))
            }
            let body = request.query["shallow"] == "true" ? Shallow.shallow(node) : node.json(exportFormat: request.query["format"] == "export")
            return render(body, request: request, headers: headers)
        }
    }

    func wantsETag(_ request: HTTPRequest) -> Bool { request.headers["x-firebase-etag"]?.lowercased() == "true" }

    /// The §8.4 hash of the value at `path`, or `null_etag` for no data (§9.3); kept by the engine
    /// until that value changes.
    func etag(_ node: Node, at path: Path, request: HTTPRequest) -> String {
        engine.etag(node, at: path, namespace: namespace(of: request))
    }

    func write(_ method: String, _ path: Path, namespace: String, credentials: Credentials, request: HTTPRequest, now: Int64) -> RESTAnswer {
        var body: JSON = .null
        if method != "DELETE" {
            do { body = try JSONParser.parse(bytes: request.body) } catch {
                return .response(.error(400, "Invalid data; couldn't parse JSON object, array, or value. (\(error.description))"))
            }
        }
        var target = path
        let operation: Engine.DirectWrite
        switch method {
        case "PATCH":
            guard case .object(let members) = body else { return .response(.error(400, "PATCH needs a JSON object of paths to values")) }
            var updates: [Request.Update] = []
            for (key, value) in members {
                guard let relative = try? Path(key), !relative.isRoot else {
                    return .response(.error(400, "Invalid key in update: \(ClientInput.quoted(key))"))
                }
                updates.append(Request.Update(path: relative, value: value))
            }
            operation = .update(updates)
        case "POST":
            target = path.child(pushIDs.next(now: now))
            operation = .set(body)
        case "DELETE":
            operation = .set(.null)
        default:
            operation = .set(body)
        }
        // A conditional write (the Admin SDK's transactions) applies only while the value at the
        // request's path still has the ETag the client read.
        let ifMatch = request.headers["if-match"].map { (path: path, etag: $0) }
        let answer = engine.submitWrite(operation, at: target, namespace: namespace, credentials: credentials, now: now, ifMatch: ifMatch,
                                        readBack: ifMatch != nil || wantsETag(request) ? path : nil)
        return RESTAnswer(answer) { [self] outcome in
            render(write: outcome.write, method: method, path: path, target: target, conditional: ifMatch != nil, request: request)
        }
    }

    /// A write's response for its result. The ETag and the current value of a 412 come from the
    /// value at the request's path when the write was decided, for a caller who may read it.
    func render(write: DirectWriteResult?, method: String, path: Path, target: Path, conditional: Bool, request: HTTPRequest) -> HTTPResponse {
        guard let write else { return RESTAnswer.mismatch }
        switch write.result {
        case .failure(.dataStale) where conditional:
            guard let current = write.readBack else { return .error(412, "The value changed since it was read (ETag mismatch)") }
            return .json(412, JSONWriter.string(current.json(exportFormat: true)), headers: [("ETag", etag(current, at: path, request: request))])
        case .failure(let error):
            return .refusal(for: error)
        case .success(let written):
            var headers: [(String, String)] = []
            if conditional || wantsETag(request), let current = write.readBack { headers.append(("ETag", etag(current, at: path, request: request))) }
            if request.query["print"] == "silent" { return HTTPResponse(status: 204, headers: headers, body: "") }
            switch method {
            case "POST": return render(.object([("name", .string(target.last ?? ""))]), request: request, headers: headers)
            case "DELETE": return render(.null, request: request, headers: headers)
            case "PATCH":
                let members = written.map { (path.relative($0.0)?.wireString ?? $0.0.wireString, $0.1.json(exportFormat: true)) }
                return render(.object(members), request: request, headers: headers)
            default: return render(written.first?.1.json(exportFormat: true) ?? .null, request: request, headers: headers)
            }
        }
    }

    func render(_ json: JSON, request: HTTPRequest, headers: [(String, String)] = []) -> HTTPResponse {
        let text = request.query["print"] == "pretty" ? JSONWriter.pretty(json) : JSONWriter.string(json)
        return .json(200, text, headers: headers)
    }
}
