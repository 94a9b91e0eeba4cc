import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PresenceClient

/// ``HTTPGetting`` over URLSession (libcurl on Linux): the REST polls of `watch`.
///
/// TLS: `https://` is verified against the system's trust store; `--ca-file` and
/// `--insecure-skip-verify` apply to the WebSocket only (URLSession on Linux has no per-session trust
/// settings).
final class URLSessionHTTP: HTTPGetting {
    private let session: URLSession

    init(timeoutSeconds: Double = 10) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeoutSeconds
        configuration.timeoutIntervalForResource = timeoutSeconds
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        session = URLSession(configuration: configuration)
    }

    func get(_ request: HTTPGetRequest, completion: @escaping @Sendable (HTTPGetResult) -> Void) {
        guard let url = URL(string: request.url) else {
            completion(.failed("bad URL \(request.url)"))
            return
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = "GET"
        urlRequest.setValue("application/json", forHTTPHeaderField: "Accept")
        if let bearer = request.bearer { urlRequest.setValue("Bearer " + bearer, forHTTPHeaderField: "Authorization") }
        let task = session.dataTask(with: urlRequest) { data, response, error in
            if let http = response as? HTTPURLResponse {
                completion(.response(status: http.statusCode, body: String(decoding: data ?? Data(), as: UTF8.self)))
            } else {
                completion(.failed(error.map(Self.describe) ?? "no response"))
            }
        }
        task.resume()
    }

    static func describe(_ error: any Error) -> String {
        let ns = error as NSError
        return ns.localizedDescription.isEmpty ? "\(error)" : ns.localizedDescription
    }

    deinit { session.invalidateAndCancel() }
}
