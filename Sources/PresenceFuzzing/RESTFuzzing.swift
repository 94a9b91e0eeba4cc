import PresenceCore
import PresenceWire

/// REST request mapping: the input is a request as the shell hands it over, one line per part:
/// `METHOD /path.json?query` (query `k=v&…`, already percent-decoded), then `name: value`
/// headers, an empty line, and the body. It runs through `RESTHandler.handle` (and `stream` for
/// an event-stream GET) on an engine with the presence rules.
///
/// Invariants: nothing traps; the status is one the API documents; a JSON body is strict JSON;
/// error bodies are `{"error": …}` and short (no client input echoed whole); the stored tree
/// stays valid.
enum RESTFuzzing {
    static let target = FuzzTarget(
        name: "rest",
        summary: "METHOD target / headers / body → RESTHandler.handle and stream; documented statuses, strict-JSON bodies, short errors, valid tree",
        run: run)

    static let statuses: Set<Int> = [200, 204, 304, 400, 401, 404, 405, 412, 413, 429, 501, 503]

    static func run(_ bytes: [UInt8]) {
        let request = parse(bytes)
        let engine = FuzzWorld.engine()
        let handler = RESTHandler(engine: engine, defaultNamespace: "fuzz")
        if case .failure(let refusal)? = handler.stream(request, now: FuzzWorld.now) { check(refusal.response) }
        check(handler.handle(request, now: FuzzWorld.now))
        _ = engine.drainEffects()
        FuzzWorld.checkTree(engine.value(at: .root, namespace: "fuzz"))
    }

    static func check(_ response: HTTPResponse) {
        invariant(statuses.contains(response.status), "undocumented status \(response.status)")
        guard response.status != 204, response.status != 304 else { return }
        guard let json = try? JSONParser.parse(response.body) else {
            return invariant(false, "status \(response.status) with a body that is not JSON: \(ClientInput.quoted(response.body, limit: 200))")
        }
        if response.status >= 400, response.status != 412 {
            guard let message = json["error"]?.stringValue else { return invariant(false, "an error without {\"error\": …}") }
            invariant(message.utf8.count <= FuzzWorld.maxErrorBytes, "an error of \(message.utf8.count) bytes echoes client input")
        }
    }

    static func parse(_ bytes: [UInt8]) -> HTTPRequest {
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.split(separator: "\n", maxSplits: 32, omittingEmptySubsequences: false)[...]
        let requestLine = lines.popFirst() ?? ""
        let words = requestLine.split(separator: " ", maxSplits: 1)
        let target = words.count > 1 ? words[1] : ""
        let pathAndQuery = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var query: [String: String] = [:]
        if pathAndQuery.count > 1 {
            for item in pathAndQuery[1].split(separator: "&") {
                let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                query[String(pair[0])] = pair.count > 1 ? String(pair[1]) : ""
            }
        }
        var headers: [String: String] = [:]
        while let line = lines.popFirst(), !line.isEmpty {
            let pair = line.split(separator: ":", maxSplits: 1)
            guard pair.count == 2 else { continue }
            headers[pair[0].lowercased()] = String(pair[1].drop { $0 == " " })
        }
        return HTTPRequest(method: String(words.first ?? ""), path: String(pathAndQuery.first ?? ""), query: query,
                           headers: headers, body: Array(lines.joined(separator: "\n").utf8))
    }
}
