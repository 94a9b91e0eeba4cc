import Logging
import PresenceCore
import PresenceLoop
import PresenceWire

/// Plain HTTP on the WebSocket port: health, readiness, metrics and the operator API first, then
/// REST streaming reads, then the REST API.
///
/// A request with a body is judged from its head before a byte of the body is read: its size
/// (`Content-Length` over `--max-message-bytes`: 413), its route, method and credentials, and
/// whether the rules could let those credentials write there at all (401, 404, 405, 400); then
/// the room left for bodies in flight (`--max-pending-body-bytes`: 503). A refused request is
/// answered at once and its body dropped; an admitted one is buffered (`RequestBodies`) and must
/// arrive before its deadline (`--http-timeout`, plus time for its length), or it is dropped.
final class HTTPRoute {
    private let logger: Logger
    private let engine: Engine
    private let rest: RESTHandler
    private let table: ConnectionTable
    private let responder: HTTPResponder
    private let streams: EventStreams
    private let operators: OperatorAPI
    private let steps: EngineSteps
    private let storage: StorageLink
    private let shedder: WriteShedder
    private let trustedProxies: Set<String>
    private var bodies: RequestBodies<OpaquePointer>
    private let pending = PendingAnswers()
    private let slicedReads: SlicedHTTPReads
    /// Operator requests waiting for the other nodes (a token each: lws may reuse a closed `wsi`).
    private var operatorWaits: [OpaquePointer: UInt64] = [:]
    private var operatorTokens: UInt64 = 0
    private var refusals = RefusalLog()
    private var lateBodies = RefusalLog()
    private var deadlineTimer: LoopTimer!

    init(configuration: ServerConfiguration, logger: Logger, engine: Engine, rest: RESTHandler, table: ConnectionTable,
         responder: HTTPResponder, streams: EventStreams, operators: OperatorAPI, steps: EngineSteps, storage: StorageLink,
         slices: SlicedReplies, runtime: LoopRuntime, shedder: WriteShedder) {
        self.logger = logger
        self.engine = engine
        self.rest = rest
        self.table = table
        self.responder = responder
        self.streams = streams
        self.operators = operators
        self.steps = steps
        self.storage = storage
        self.shedder = shedder
        trustedProxies = configuration.trustedProxies
        bodies = RequestBodies(limits: .init(maxBodyBytes: configuration.maxMessageBytes, maxPendingBytes: configuration.maxPendingBodyBytes,
                                             timeoutMilliseconds: Int64(configuration.httpTimeoutSeconds) * 1_000,
                                             minBytesPerSecond: Self.minBodyBytesPerSecond))
        slicedReads = SlicedHTTPReads(engine: engine, slices: slices, responder: responder, table: table, steps: steps, logger: logger,
                                      runtime: runtime)
        deadlineTimer = runtime.makeTimer { [unowned self] in expireBodies() }
        steps.onDirectOutcomes = { [unowned self] outcomes, sequence in deliver(outcomes, after: sequence) }
        streams.refuse = { [unowned self] id, wsi, read, error in refuseStream(id, wsi: wsi, read: read, error) }
    }

    /// A body's deadline allows its length at this rate (512 kbit/s) on top of `--http-timeout`.
    static let minBodyBytesPerSecond = 64 * 1024

    /// `LWS_CALLBACK_HTTP`: the request's head has arrived.
    func request(_ wsi: OpaquePointer, uri: UnsafeMutableRawPointer?) -> Int32 {
        let request = LWSRead.request(wsi, uri: uri)
        if ["PUT", "PATCH", "POST"].contains(request.method), let declared = request.headers["content-length"] {
            guard let length = Int(declared), length >= 0 else {
                return refuse(wsi, .error(400, "Content-Length must be a number of bytes"), length: 0, request: request)
            }
            if length > 0 { return admitBody(of: request, length: length, on: wsi) }
        }
        if let answered = routeOperators(request, on: wsi) { return answered }
        if let refusal = storageRefusal(request) ?? namespaceRefusal(request) ?? shedRefusal(request, on: wsi) {
            return responder.respond(wsi, refusal)
        }
        switch rest.stream(request, now: WallClock.nowMilliseconds()) {
        case .success(let stream)?: return open(stream, on: wsi)
        case .failure(let refusal)?: return responder.respond(wsi, refusal.response)
        case nil: break
        }
        return respond(wsi, rest.respond(request, now: WallClock.nowMilliseconds()))
    }

    /// Health, metrics and the operator API; nil when `request` is for none of them. A cluster's
    /// listing and remote kicks are answered once the other nodes have (or the wait is over).
    private func routeOperators(_ request: HTTPRequest, on wsi: OpaquePointer) -> Int32? {
        if let later = operators.laterRoute(request) {
            operatorTokens += 1
            let token = operatorTokens
            operatorWaits[wsi] = token
            LWSWrite.keepOpen(wsi)
            LWSWrite.pauseHTTP(wsi)
            later { [weak self] response in
                guard let self, operatorWaits[wsi] == token else { return } // the client left meanwhile
                operatorWaits[wsi] = nil
                _ = responder.respond(wsi, response, after: steps.run())
            }
            return 0
        }
        guard let answer = operators.answer(request) else { return nil }
        return respond(wsi, answer)
    }

    /// A REST answer: a response now, a big read's made in slices, or (replicated) one made when
    /// the ticket's outcome arrives.
    private func respond(_ wsi: OpaquePointer, _ answer: RESTAnswer) -> Int32 {
        if case let .pending(ticket, finish) = answer {
            wait(for: ticket, .response(wsi, finish))
            return 0
        }
        self.answer(wsi, answer, after: steps.run())
        return 0
    }

    /// A response, or a big read's to make in slices, written once step `sequence` is durable.
    private func answer(_ wsi: OpaquePointer, _ answer: RESTAnswer, after sequence: UInt64?) {
        switch answer {
        case .response(let response): _ = responder.respond(wsi, response, after: sequence)
        case .sliced(let sliced): slicedReads.start(sliced, on: wsi, after: sequence)
        case .pending: _ = responder.respond(wsi, RESTAnswer.mismatch, after: sequence)
        }
    }

    /// Keeps the connection open, unpolled, until the outcome arrives (bounded by the engine).
    private func wait(for ticket: DirectTicket, _ waiter: PendingAnswers.Waiter) {
        pending.add(ticket, waiter)
        LWSWrite.keepOpen(waiter.wsi)
        LWSWrite.pauseHTTP(waiter.wsi)
        steps.run()
    }

    /// Outcomes of requests answered through tickets.
    private func deliver(_ outcomes: [(DirectTicket, DirectOutcome)], after sequence: UInt64?) {
        for (ticket, outcome) in outcomes {
            switch pending.take(ticket) {
            case nil:
                continue // the client left meanwhile
            case let .response(wsi, finish)?:
                answer(wsi, finish(outcome), after: sequence)
            case let .stream(wsi, id, request)?:
                switch outcome.done {
                case .success?:
                    begin(id: id, wsi: wsi, request)
                case .failure(let error)?:
                    _ = responder.respond(wsi, .refusal(for: error), after: sequence)
                case nil:
                    _ = responder.respond(wsi, RESTAnswer.mismatch, after: sequence)
                }
            }
        }
    }

    /// A request with a body: checked from its head, then its body is read or dropped.
    private func admitBody(of request: HTTPRequest, length: Int, on wsi: OpaquePointer) -> Int32 {
        let now = WallClock.nowMilliseconds()
        if length <= bodies.limits.maxBodyBytes,
           let refusal = storageRefusal(request) ?? namespaceRefusal(request) ?? precheck(request, now: now) ?? shedRefusal(request, on: wsi) {
            return refuse(wsi, refusal, length: length, request: request)
        }
        let admission = bodies.admit(wsi, request: request, length: length, now: now)
        if !deadlineTimer.isScheduled { deadlineTimer.schedule(afterMicroseconds: 1_000_000) }
        switch admission {
        case .read:
            return 0
        case let .refuse(status, message):
            var response = HTTPResponse.error(status, message)
            if status == 503 { response.headers.append(("Retry-After", "1")) }
            return answer(wsi, response, request: request)
        }
    }

    /// While storage commits fail, REST writes are refused (503): not stored means not acknowledged.
    private func storageRefusal(_ request: HTTPRequest) -> HTTPResponse? {
        guard storage.isFailing, Self.isDataWrite(request) else { return nil }
        var response = HTTPResponse.error(503, StorageLink.unavailableMessage)
        response.headers.append(("Retry-After", "5"))
        return response
    }

    /// Past saturation, a share of REST data writes is refused (503) from the head, the heaviest
    /// client addresses first (`WriteShedding`).
    private func shedRefusal(_ request: HTTPRequest, on wsi: OpaquePointer) -> HTTPResponse? {
        guard Self.isDataWrite(request), !shedder.admit(restFrom: LWSRead.clientAddress(wsi, trustedProxies: trustedProxies)) else { return nil }
        var response = HTTPResponse.error(503, WriteShedder.message)
        response.headers.append(("Retry-After", "1"))
        return response
    }

    /// REST writes (PUT, PATCH, POST, DELETE), not the operator API's.
    private static func isDataWrite(_ request: HTTPRequest) -> Bool {
        ["PUT", "PATCH", "POST", "DELETE"].contains(request.method) && request.path != "/.admin" && !request.path.hasPrefix("/.admin/")
    }

    /// A cluster keeps each namespace under Redis keys, which bound its name (as for WebSockets).
    /// A namespace whose history Redis lost is refused (503) until Redis holds a history this
    /// node may serve (ClusterRefusals.swift).
    private func namespaceRefusal(_ request: HTTPRequest) -> HTTPResponse? {
        guard engine.nodeID != nil, request.path.hasSuffix(".json"),
              !request.path.hasPrefix("/.admin/") else { return nil }
        let ns = request.query["ns"].flatMap { $0.isEmpty ? nil : $0 } ?? operators.configuration.defaultNamespace
        if ns.utf8.count > WebSocketRoute.maxClusterNamespaceBytes {
            return .error(400, "Namespace names are at most \(WebSocketRoute.maxClusterNamespaceBytes) bytes on a cluster")
        }
        guard operators.cluster?.refusals.reason(for: ns) != nil else { return nil }
        var response = HTTPResponse.error(503, NamespaceRefusals.clientMessage(ns))
        response.headers.append(("Retry-After", "5"))
        return response
    }

    /// What the head alone tells: operators need the admin credential; REST routes, methods,
    /// credentials and rules are `RESTHandler.precheck`'s.
    private func precheck(_ request: HTTPRequest, now: Int64) -> HTTPResponse? {
        if ["/healthz", "/readyz", "/metrics"].contains(request.path) { return nil }
        if request.path == "/.admin" || request.path.hasPrefix("/.admin/") {
            guard case .success(let credentials) = rest.resolveCredentials(request, now: now), credentials.isAdmin else {
                return .error(401, "Admin credentials required")
            }
            return nil
        }
        return rest.precheck(request, now: now)
    }

    /// Refuses a request from its head: answered now, its body dropped as it arrives.
    private func refuse(_ wsi: OpaquePointer, _ response: HTTPResponse, length: Int, request: HTTPRequest) -> Int32 {
        bodies.refuse(wsi, length: length, now: WallClock.nowMilliseconds())
        if !deadlineTimer.isScheduled { deadlineTimer.schedule(afterMicroseconds: 1_000_000) }
        return answer(wsi, response, request: request)
    }

    /// Writes a refusal at once (the body has not been read, so `HTTPResponder`'s turn would come
    /// only after it); the connection closes once the body is in, or at its deadline.
    private func answer(_ wsi: OpaquePointer, _ response: HTTPResponse, request: HTTPRequest) -> Int32 {
        let path = request.path.count > 200 ? request.path.prefix(200) + "…" : request.path
        if let line = refusals.note("refused \(request.method) \(path) from its head: \(response.status) \(response.body)", now: WallClock.nowMilliseconds()) {
            logger.notice("\(line)")
        }
        let body = Array(response.body.utf8)
        guard LWSWrite.httpHead(status: response.status, headers: response.headers + [("Connection", "close")],
                                contentLength: body.count, to: wsi),
              LWSWrite.httpBody(body, final: true, to: wsi) else {
            bodies.closed(wsi)
            return -1
        }
        return 0
    }

    func body(_ wsi: OpaquePointer, input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let input else { return 0 }
        switch bodies.arrived(wsi, UnsafeRawBufferPointer(start: input, count: length)) {
        case .kept, .dropped: return 0
        case .tooMuch, .late:
            bodies.closed(wsi)
            return -1
        }
    }

    func bodyComplete(_ wsi: OpaquePointer) -> Int32 {
        if bodies.isLate(wsi) { return -1 }  // expired: its drop is under way
        let request: HTTPRequest
        switch bodies.complete(wsi) {
        case .request(let complete)?: request = complete
        case .refused?: return -1  // its answer went out, and the client has sent everything
        case nil: return 0
        }
        if let answered = routeOperators(request, on: wsi) { return answered }
        return respond(wsi, rest.respond(request, now: WallClock.nowMilliseconds()))
    }

    /// Bodies past their deadline: their connections are dropped (a refused one has its answer).
    private func expireBodies() {
        for (wsi, refused) in bodies.expire(now: WallClock.nowMilliseconds()) {
            if !refused, let line = lateBodies.note("a request body was not received in time: connection dropped", now: WallClock.nowMilliseconds()) {
                logger.notice("\(line)")
            }
            LWSWrite.drop(wsi)
        }
        if !bodies.isEmpty { deadlineTimer.schedule(afterMicroseconds: 1_000_000) }
    }

    /// A streaming read: the engine checks it (a refusal is answered with its status from the error
    /// table: 401, 429 with `Retry-After`, 400, …) and queues the first `put`.
    private func open(_ request: StreamRequest, on wsi: OpaquePointer) -> Int32 {
        let id = table.nextID()
        let opened = engine.submitStream(ConnectionID(id), path: request.path, namespace: request.namespace,
                                         credentials: request.credentials, query: request.query, now: WallClock.nowMilliseconds())
        switch opened {
        case .later(let ticket):
            // Replicated: it opens once the namespace is loaded here (and a limited read's use committed).
            wait(for: ticket, .stream(wsi, id: id, request: request))
            return 0
        case .now(.stream(.failure(let error))):
            return responder.respond(wsi, .refusal(for: error), after: steps.run())
        case .now:
            begin(id: id, wsi: wsi, request)
            steps.run()
            return 0
        }
    }

    /// The stream takes its engine messages; its head goes out at its first WRITEABLE.
    private func begin(id: UInt64, wsi: OpaquePointer, _ request: StreamRequest) {
        streams.begin(id: id, wsi: wsi, location: request.path)
        logger.info("stream opened", metadata: ["stream": "\(id)", "path": "\(request.path)", "ns": "\(request.namespace)"])
    }

    /// A stream whose first event came out over `--max-read-bytes`: answered with the refusal
    /// (413) instead, before its head; the engine counts it and forgets the stream.
    private func refuseStream(_ id: UInt64, wsi: OpaquePointer, read: DeferredRead, _ error: EngineError) {
        var refusal = error
        if case .tooBig(let message) = error {
            refusal = engine.refusedDeferredListen(ConnectionID(id), read: read, tag: nil, message: message)
        }
        engine.disconnect(ConnectionID(id), now: WallClock.nowMilliseconds())
        _ = responder.respond(wsi, .refusal(for: refusal))
        logger.info("stream refused", metadata: ["stream": "\(id)", "path": "\(read.path)"])
        steps.run()
    }

    func writeable(_ wsi: OpaquePointer) -> Int32 {
        slicedReads.writeable(wsi) ?? streams.writeable(wsi) ?? responder.writeable(wsi)
    }

    /// `CLOSED_HTTP`: a response connection or a stream went away.
    func closed(_ wsi: OpaquePointer) {
        MaskTap.closed(wsi)
        responder.closed(wsi)
        slicedReads.closed(wsi)
        bodies.closed(wsi)
        operatorWaits[wsi] = nil
        if case .stream(_, let waiting, _)? = pending.closed(wsi) {
            engine.disconnect(ConnectionID(waiting), now: WallClock.nowMilliseconds())
            steps.run()
        }
        guard let id = streams.closed(wsi) else { return }
        engine.disconnect(ConnectionID(id), now: WallClock.nowMilliseconds())
        logger.info("stream closed", metadata: ["stream": "\(id)"])
        steps.run()
    }
}
