import PresenceWire

/// Writes HTTP responses: the head in one `HTTP_WRITEABLE`, the body in the next, and neither
/// before storage has made the request's step durable (a write's response is its acknowledgement;
/// the same `DeliveryOrder` rule as for WebSocket acks).
///
/// Connections are not kept alive: after its response, a connection closes. lws 4.1.6 cannot read
/// a pipelined request with a body (it hands the request's own header bytes over as the body and
/// then loops forever in `lws_http_action`), and with keep-alive any request can be followed by a
/// pipelined one in the same packet. While a response waits, its socket is not polled for input,
/// so bytes a client sends after its request never wake the loop (see `LWSWrite.pauseHTTP`).
final class HTTPResponder {
    private struct Pending {
        var response: HTTPResponse
        var lane = DeliveryLane<Void>()
        var headWritten = false
    }

    private var pending: [OpaquePointer: Pending] = [:]
    private var order = DeliveryOrder<OpaquePointer>()

    /// Queues the response to the request on `wsi`; it is written once step `sequence` is durable.
    func respond(_ wsi: OpaquePointer, _ response: HTTPResponse, after sequence: UInt64? = nil) -> Int32 {
        var entry = Pending(response: response)
        let now = order.submit((), waitsFor: sequence, to: wsi, lane: &entry.lane)
        pending[wsi] = entry
        if now { LWSWrite.requestHTTPWriteable(wsi) } else { LWSWrite.pauseHTTP(wsi) }
        return 0
    }

    /// Storage made steps up to `sequence` durable: write the responses that waited for them.
    func durable(upTo sequence: UInt64) {
        for wsi in order.markDurable(upTo: sequence) {
            guard var entry = pending[wsi] else { continue }
            let released = !order.release(wsi, lane: &entry.lane).isEmpty
            pending[wsi] = entry
            if released { LWSWrite.requestHTTPWriteable(wsi) }
        }
    }

    /// `HTTP_WRITEABLE`: the head, then the body; then the connection closes.
    func writeable(_ wsi: OpaquePointer) -> Int32 {
        guard var entry = pending[wsi], !entry.lane.isHolding else { return 0 }
        let body = Array(entry.response.body.utf8)
        if !entry.headWritten {
            let headers = entry.response.headers + [("Connection", "close")]
            guard LWSWrite.httpHead(status: entry.response.status, headers: headers, contentLength: body.count, to: wsi) else { return -1 }
            entry.headWritten = true
            pending[wsi] = entry
            LWSWrite.requestHTTPWriteable(wsi)
            return 0
        }
        pending.removeValue(forKey: wsi)
        _ = LWSWrite.httpBody(body, final: true, to: wsi)
        return -1
    }

    /// The connection closed (`CLOSED_HTTP`).
    func closed(_ wsi: OpaquePointer) {
        pending.removeValue(forKey: wsi)
    }
}
