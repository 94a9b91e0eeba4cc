import Logging
import PresenceCore
import PresenceWire

/// Plain HTTP on the WebSocket port: health, readiness, metrics and the operator API first, then
/// REST streaming reads, then the REST API (with request bodies up to `--max-message-bytes`).
final class HTTPRoute {
    /// A request whose body is still arriving.
    private struct PendingRequest {
        var request: HTTPRequest
        var tooLarge = false
    }

    private let maxBodyBytes: Int
    private let logger: Logger
    private let engine: Engine
    private let rest: RESTHandler
    private let table: ConnectionTable
    private let responder: HTTPResponder
    private let streams: EventStreams
    private let operators: OperatorAPI
    private let steps: EngineSteps
    private var pendingRequests: [OpaquePointer: PendingRequest] = [:]

    init(configuration: ServerConfiguration, logger: Logger, engine: Engine, rest: RESTHandler, table: ConnectionTable,
         responder: HTTPResponder, streams: EventStreams, operators: OperatorAPI, steps: EngineSteps) {
        maxBodyBytes = configuration.maxMessageBytes
        self.logger = logger
        self.engine = engine
        self.rest = rest
        self.table = table
        self.responder = responder
        self.streams = streams
        self.operators = operators
        self.steps = steps
    }

    /// `LWS_CALLBACK_HTTP`: the request's head has arrived.
    func request(_ wsi: OpaquePointer, uri: UnsafeMutableRawPointer?) -> Int32 {
        let request = LWSRead.request(wsi, uri: uri)
        let hasBody = ["PUT", "PATCH", "POST"].contains(request.method) && (Int(request.headers["content-length"] ?? "") ?? 0) > 0
        if !hasBody, let response = operators.route(request) {
            return responder.respond(wsi, response, after: steps.run())
        }
        switch rest.stream(request, now: WallClock.nowMilliseconds()) {
        case .success(let stream)?: return open(stream, on: wsi)
        case .failure(let refusal)?: return responder.respond(wsi, refusal.response)
        case nil: break
        }
        if hasBody {
            pendingRequests[wsi] = PendingRequest(request: request)
            return 0
        }
        let response = rest.handle(request, now: WallClock.nowMilliseconds())
        return responder.respond(wsi, response, after: steps.run())
    }

    func body(_ wsi: OpaquePointer, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard var pending = pendingRequests[wsi], let input else { return 0 }
        if pending.request.body.count + length > maxBodyBytes {
            pending.tooLarge = true
            pending.request.body = []
        } else if !pending.tooLarge {
            pending.request.body.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
        }
        pendingRequests[wsi] = pending
        return 0
    }

    func bodyComplete(_ wsi: OpaquePointer) -> Int32 {
        guard let pending = pendingRequests.removeValue(forKey: wsi) else { return 0 }
        if pending.tooLarge {
            logger.notice("refused a REST body over \(maxBodyBytes) bytes")
            return responder.respond(wsi, .error(413, "Request body larger than \(maxBodyBytes) bytes"))
        }
        let response = operators.route(pending.request) ?? rest.handle(pending.request, now: WallClock.nowMilliseconds())
        return responder.respond(wsi, response, after: steps.run())
    }

    /// A streaming read: the engine checks it (a refusal is answered with its status from the error
    /// table: 401, 429 with `Retry-After`, 400, …) and queues the first `put`.
    private func open(_ request: StreamRequest, on wsi: OpaquePointer) -> Int32 {
        let id = table.nextID()
        let opened = engine.openStream(ConnectionID(id), path: request.path, namespace: request.namespace,
                                       credentials: request.credentials, query: request.query, now: WallClock.nowMilliseconds())
        if case .failure(let error) = opened {
            return responder.respond(wsi, .refusal(for: error), after: steps.run())
        }
        guard streams.begin(id: id, wsi: wsi, location: request.path) else {
            engine.disconnect(ConnectionID(id), now: WallClock.nowMilliseconds())
            return -1
        }
        logger.info("stream opened", metadata: ["stream": "\(id)", "path": "\(request.path)", "ns": "\(request.namespace)"])
        steps.run()
        return 0
    }

    func writeable(_ wsi: OpaquePointer) -> Int32 {
        streams.writeable(wsi) ?? responder.writeable(wsi)
    }

    /// `CLOSED_HTTP`: a response connection or a stream went away.
    func closed(_ wsi: OpaquePointer) {
        MaskTap.closed(wsi)
        responder.closed(wsi)
        pendingRequests.removeValue(forKey: wsi)
        guard let id = streams.closed(wsi) else { return }
        engine.disconnect(ConnectionID(id), now: WallClock.nowMilliseconds())
        logger.info("stream closed", metadata: ["stream": "\(id)"])
        steps.run()
    }
}
