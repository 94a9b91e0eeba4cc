import PresenceCore
import PresenceWire

/// Writes HTTP responses: the head in one `HTTP_WRITEABLE`, the body in the next ones (at most
/// `pieceBytes` per WRITEABLE, so a big REST answer never fills lws's buffer at once), and none of
/// it before storage has made the request's step durable (a write's response is its
/// acknowledgement; the same `DeliveryOrder` rule as for WebSocket acks). A body made pretty as it
/// goes (`PrettyJSONStream`, a big answer's `print=pretty`) has no known length: it is chunked.
///
/// Connections are not kept alive: after its response, a connection closes. lws 4.1.6 cannot read
/// a pipelined request with a body (it hands the request's own header bytes over as the body and
/// then loops forever in `lws_http_action`), and with keep-alive any request can be followed by a
/// pipelined one in the same packet. While a response waits, its socket is not polled for input,
/// so bytes a client sends after its request never wake the loop (see `LWSWrite.pauseHTTP`).
final class HTTPResponder {
    private struct Pending {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]
        var written = 0
        /// Set for a body made pretty piece by piece (sent chunked).
        var pretty: PrettyJSONStream?
        var lane = DeliveryLane<Void>()
        var headWritten = false
    }

    /// Body bytes written per `HTTP_WRITEABLE`.
    static let pieceBytes = 128 * 1024

    private var pending: [OpaquePointer: Pending] = [:]
    private var order = DeliveryOrder<OpaquePointer>()

    /// Queues the response to the request on `wsi`; it is written once step `sequence` is durable.
    func respond(_ wsi: OpaquePointer, _ response: HTTPResponse, after sequence: UInt64? = nil) -> Int32 {
        respond(wsi, Pending(status: response.status, headers: response.headers, body: Array(response.body.utf8)), after: sequence)
    }

    /// A 200 with a JSON body made elsewhere (a big read's text), made pretty as it is written when
    /// `pretty`.
    func respond(_ wsi: OpaquePointer, json body: [UInt8], pretty: Bool, after sequence: UInt64?) {
        var headers = [SlicedResponse.contentType]
        if pretty { headers.append(("Transfer-Encoding", "chunked")) }
        _ = respond(wsi, Pending(status: 200, headers: headers, body: body, pretty: pretty ? PrettyJSONStream() : nil), after: sequence)
    }

    private func respond(_ wsi: OpaquePointer, _ response: Pending, after sequence: UInt64?) -> Int32 {
        var entry = response
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

    /// `HTTP_WRITEABLE`: the head, then the body a piece at a time; then the connection closes.
    func writeable(_ wsi: OpaquePointer) -> Int32 {
        guard var entry = pending[wsi], !entry.lane.isHolding else { return 0 }
        if !entry.headWritten {
            let headers = entry.headers + [("Connection", "close")]
            let length = entry.pretty == nil ? entry.body.count : nil
            guard LWSWrite.httpHead(status: entry.status, headers: headers, contentLength: length, to: wsi) else { return -1 }
            entry.headWritten = true
            pending[wsi] = entry
            LWSWrite.requestHTTPWriteable(wsi)
            return 0
        }
        let end = min(entry.body.count, entry.written + Self.pieceBytes)
        let last = end == entry.body.count
        var piece = Array(entry.body[entry.written..<end])
        if var pretty = entry.pretty {
            var out: [UInt8] = []
            pretty.append(piece, to: &out)
            if last { pretty.finish(into: &out) }
            entry.pretty = pretty
            piece = out.isEmpty ? [] : EventStreams.chunk(out)
            if last { piece += EventStreams.lastChunk }
        }
        if last {
            pending.removeValue(forKey: wsi)
            _ = LWSWrite.httpBody(piece, final: true, to: wsi)
            return -1
        }
        entry.written = end
        pending[wsi] = entry
        guard LWSWrite.httpBody(piece, final: false, to: wsi) else { return -1 }
        LWSWrite.requestHTTPWriteable(wsi)
        return 0
    }

    /// The connection closed (`CLOSED_HTTP`).
    func closed(_ wsi: OpaquePointer) {
        pending.removeValue(forKey: wsi)
    }
}
