import Logging
import PresenceCore
import PresenceLoop
import PresenceWire

/// Big REST `GET`s (over `--slice-reads-over`) built by `SlicedReplies`, the slicer WebSocket reads
/// use, under an id of their own: the text is made in slices between other clients' messages, then
/// `HTTPResponder` writes it a piece per WRITEABLE; a text past `--max-read-bytes` is answered 413
/// with what to do instead. While the text is being made the connection is not polled (lws reads
/// nothing more from it anyway); a timer looks every `peerCheckMicroseconds` whether its client
/// left, and then drops the read and its slices at once. Loop thread only.
final class SlicedHTTPReads {
    private let engine: Engine
    private let slices: SlicedReplies
    private let responder: HTTPResponder
    private let table: ConnectionTable
    private let steps: EngineSteps
    /// Connections whose answer is being made, with the read's id in `SlicedReplies`.
    private var building: [OpaquePointer: UInt64] = [:]
    /// Connections whose client left while their answer was being made: closed at their WRITEABLE.
    private var abandoned: Set<OpaquePointer> = []
    private var peerTimer: LoopTimer!
    private let logger: Logger

    static let peerCheckMicroseconds: Int64 = 100_000

    init(engine: Engine, slices: SlicedReplies, responder: HTTPResponder, table: ConnectionTable, steps: EngineSteps, logger: Logger,
         runtime: LoopRuntime) {
        self.engine = engine
        self.steps = steps
        self.logger = logger
        self.slices = slices
        self.responder = responder
        self.table = table
        peerTimer = runtime.makeTimer { [unowned self] in checkPeers() }
    }

    var count: Int { building.count }

    /// Starts making `response` for `wsi`; its response waits for step `sequence` to be durable.
    func start(_ response: SlicedResponse, on wsi: OpaquePointer, after sequence: UInt64?) {
        let id = table.nextID()
        building[wsi] = id
        LWSWrite.keepOpen(wsi)
        LWSWrite.pauseHTTP(wsi)
        slices.enqueue(response.read, for: id) { [unowned self] outcome in
            building.removeValue(forKey: wsi)
            switch outcome {
            case .success(let text):
                // At a location a limit guards, the use counts now that the answer is known to fit.
                if response.read.limitUse != nil, let refusal = engine.useDeferredReadLimit(response.read, now: WallClock.nowMilliseconds()) {
                    _ = responder.respond(wsi, .refusal(for: refusal), after: steps.run())
                } else {
                    responder.respond(wsi, json: text, pretty: response.pretty, after: response.read.limitUse != nil ? steps.run() : sequence)
                }
            case .failure(let error):
                var refusal = error
                if case .tooBig(let message) = error { refusal = engine.refusedDeferredRead(ConnectionID(id), message: message) }
                _ = responder.respond(wsi, .refusal(for: refusal), after: sequence)
            }
        }
        if !peerTimer.isScheduled { peerTimer.schedule(afterMicroseconds: Self.peerCheckMicroseconds) }
    }

    /// `HTTP_WRITEABLE` for a connection whose client left mid-read: close it. Nil for others.
    func writeable(_ wsi: OpaquePointer) -> Int32? {
        abandoned.remove(wsi) != nil ? -1 : nil
    }

    /// The connection closed: its read, if still in slices, is dropped with them.
    func closed(_ wsi: OpaquePointer) {
        abandoned.remove(wsi)
        if let id = building.removeValue(forKey: wsi) { slices.forget(id) }
    }

    /// Clients that left (or sent more) while their answer was being made: their reads are
    /// dropped now, and their connections closed at the next WRITEABLE.
    private func checkPeers() {
        for (wsi, id) in building where LWSRead.peerLeftOrSpoke(wsi) {
            building.removeValue(forKey: wsi)
            slices.forget(id)
            abandoned.insert(wsi)
            logger.info("a REST client left during a big read: its read dropped", metadata: ["read": "\(id)"])
            LWSWrite.requestHTTPWriteable(wsi)
        }
        if !building.isEmpty { peerTimer.schedule(afterMicroseconds: Self.peerCheckMicroseconds) }
    }
}
