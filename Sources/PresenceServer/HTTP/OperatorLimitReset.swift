import PresenceCore
import PresenceWire

/// `DELETE /.admin/users/{uid}/limits/{limit}?ns=…`, an operator's reset of one user's usage of a
/// limit: the only operator route whose answer may wait. On a cluster node the reset is a log
/// entry, and the route answers once it has committed here (docs/scaling.md, "REST, rules and
/// streams on a cluster"), so a refresh sent to this node after the answer is never refused by
/// the usage just reset.
extension OperatorAPI {
    /// The answer for an operator route (nil when `request` is not one): the limit reset's, now or
    /// once committed; any other route's response now.
    func answer(_ request: HTTPRequest) -> RESTAnswer? {
        let parts = request.path.split(separator: "/").map(String.init)
        guard request.method == "DELETE", request.path.hasPrefix("/.admin/"), parts.count == 5, parts[1] == "users",
              parts[3] == "limits" else {
            return route(request).map { .response($0) }
        }
        if let refusal = adminRefusal(request) { return .response(refusal) }
        return resetLimit(uid: parts[2], limit: parts[4], request: request)
    }

    /// 401 unless `request` carries the admin credential (and no auth override).
    func adminRefusal(_ request: HTTPRequest) -> HTTPResponse? {
        isAdmin(request) ? nil : .error(401, "Admin credentials required")
    }

    /// The user starts again from 0 uses. `reset`: whether this node had usage stored.
    private func resetLimit(uid: String, limit: String, request: HTTPRequest) -> RESTAnswer {
        let namespace = request.query["ns"].flatMap { $0.isEmpty ? nil : $0 } ?? configuration.defaultNamespace
        let key = LimitUsageKey(namespace: namespace, limit: limit, uid: uid)
        // `reset`: whether the user had usage, as the engine saw it when ordering the reset (on a
        // cluster this node may have let the namespace go and loaded it again for the reset).
        let finish = { (outcome: DirectOutcome) -> HTTPResponse in
            switch outcome {
            case .reset(.success(let hadUsage)): .json(200, "{\"reset\":\(hadUsage)}")
            case .reset(.failure(let error)): .refusal(for: error)
            default: .error(500, "Internal error: the reset's outcome is of another kind")
            }
        }
        switch engine.submitLimitReset(key, now: now()) {
        case .now(let outcome): return .response(finish(outcome))
        case .later(let ticket): return .pending(ticket, { .response(finish($0)) })
        }
    }
}
