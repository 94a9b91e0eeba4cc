import PresenceCore
import PresenceWire

/// What comes from the server: WebSocket frames joined into messages by `PresenceWire`'s
/// `FrameAssembler` (the server's own, with the same limit), then hellos, replies and pushes.
extension ClientConnection {
    /// One WebSocket text frame from the transport: a whole message, the count or a piece of a
    /// count-prefixed one (§2.2), or the `"0"` keepalive. A message larger than
    /// ``maxMessageBytes`` is refused before it is buffered, and ends the connection for good
    /// (see ``messageTooLarge(now:)``).
    public mutating func received(_ frame: [UInt8], now: Int64) {
        guard phase == .handshaking || phase == .connected || phase == .stopping else { return }
        lastActivity = now
        probeDeadline = nil
        let output: FrameAssembler.Output
        do {
            output = try assembler.accept(frame)
        } catch {
            messageTooLarge(now: now)
            return
        }
        guard case .message(let bytes) = output else { return }
        handle(String(decoding: bytes, as: UTF8.self), now: now)
    }

    /// One WebSocket text frame (see ``received(_:now:)-([UInt8],_)``).
    public mutating func received(_ text: String, now: Int64) {
        received(Array(text.utf8), now: now)
    }

    /// The server sent a message larger than ``maxMessageBytes`` (found here or by the transport
    /// while joining fragments). The client cannot keep a true view without it, and the same
    /// message would come again after a reconnect, so it gives up with the reason.
    public mutating func messageTooLarge(now: Int64) {
        guard phase != .stopped else { return }
        giveUp("the server sent a message larger than this client's limit of \(maxMessageBytes) bytes (max message size)")
    }

    private mutating func handle(_ text: String, now: Int64) {
        guard let message = ClientCodec.decode(text) else {
            deliver(.serverMessage("undecodable message from the server: \(text.prefix(200))"))
            return
        }
        switch message {
        case .hello(let ts, _, _, let session):
            guard phase == .handshaking else { return }
            hello(session: session, serverTime: ts, now: now)
        case .pong:
            break
        case .shutdown(let reason):
            giveUp("the server shut this client down: \(reason)")
        case .reset:
            // Only one host here: treat as a loss and reconnect through the backoff.
            if phase == .connected || phase == .handshaking {
                effects.append(.abort)
                lost(reason: "server asked to reconnect", now: now)
            }
        case .error(let text):
            deliver(.serverMessage("server error: \(text)"))
        case .reply(let request, let status, let data):
            reply(request, status: status, data: data, now: now)
        case .push(let action, let body):
            push(action, body: body, now: now)
        }
    }

    private mutating func reply(_ request: Int, status: String, data: JSON, now: Int64) {
        guard let kind = outstanding.removeValue(forKey: request) else { return }
        let failure: RequestFailure? = status == "ok" ? nil : RequestFailure(status: status, message: data.stringValue ?? JSONWriter.string(data))
        switch kind {
        case .auth:
            if let failure {
                deliver(.authFailed(failure))
                if configuration.stopOnAuthFailure {
                    deliver(.fatal("the server refused the credential: \(failure)"))
                    outstanding.removeAll()  // what follows was processed without the credential
                    phase = .stopping
                    effects.append(.close)
                }
            } else {
                deliver(.authenticated(data))
            }
        case .listen(let path):
            guard var view = views[path] else { return }
            if let failure {
                views[path] = nil
                viewOrder.removeAll { $0 == path }
                for id in view.listeners {
                    listenerPaths[id] = nil
                    deliver(.listenFailed(listener: id, path: path, failure))
                }
            } else {
                view.complete = true
                let first = !view.hasValue
                view.hasValue = true
                views[path] = view
                if first { for id in view.listeners { deliver(.value(listener: id, path: path, value: view.value)) } }
            }
        case .unlisten:
            break
        case .write(let id):
            pendingWrites.removeAll { $0.id == id }
            deliver(.writeCompleted(id, failure))
        case .onDisconnect(let id):
            if failure != nil { onDisconnectRegistrations.removeAll { $0.id == id } }
            deliver(.onDisconnectCompleted(id, failure))
        case .get(let id):
            pendingGets.removeAll { $0.id == id }
            deliver(.getCompleted(id, failure == nil ? data : nil, failure))
        }
    }

    private mutating func push(_ action: String, body: JSON, now: Int64) {
        switch action {
        case "d", "m":
            guard body["t"] == nil || body["t"] == .null else { return }  // tagged queries: not used here
            let at = JSONTree.pathSegments(body["p"]?.stringValue ?? "")
            let data = body["d"] ?? .null
            var pieces: [([String], JSON)] = []
            if action == "d" {
                pieces = [(at, data)]
            } else {
                for (key, value) in data.objectMembers ?? [] { pieces.append((at + JSONTree.segments(key), value)) }
            }
            apply(pieces)
        case "c":
            let path = Path(validated: JSONTree.pathSegments(body["p"]?.stringValue ?? ""))
            guard let view = views.removeValue(forKey: path) else { return }
            viewOrder.removeAll { $0 == path }
            let failure = RequestFailure(.permissionDenied, message: "listen revoked by the server")
            for id in view.listeners {
                listenerPaths[id] = nil
                deliver(.listenFailed(listener: id, path: path, failure))
            }
        case "ac":
            let failure = RequestFailure(status: body["s"]?.stringValue ?? "revoked", message: body["d"]?.stringValue ?? "")
            deliver(.authRevoked(failure))
            if configuration.stopOnAuthFailure {
                deliver(.fatal("the server revoked the credential: \(failure)"))
                phase = .stopping
                effects.append(.close)
            } else {
                effects.append(.abort)
                lost(reason: "credential revoked", now: now)
            }
        case "sd":
            deliver(.serverMessage("FIREBASE: " + (body["msg"]?.stringValue ?? "")))
        default:
            break
        }
    }

    /// Applies overwrites (absolute segments, value) to every view they touch; one event per changed view.
    private mutating func apply(_ pieces: [([String], JSON)]) {
        for path in viewOrder {
            guard var view = views[path] else { continue }
            let listen = path.segments
            var value = view.value
            var touched = false
            for (at, data) in pieces {
                if at.count >= listen.count, Array(at.prefix(listen.count)) == listen {
                    value = JSONTree.setting(data, at: at[listen.count...], in: value)
                    touched = true
                } else if at.count < listen.count, Array(listen.prefix(at.count)) == at {
                    value = JSONTree.normalized(JSONTree.value(at: listen[at.count...], in: data))
                    touched = true
                }
            }
            guard touched else { continue }
            let changed = !view.hasValue || value != view.value
            view.value = value
            view.hasValue = true
            views[path] = view
            if changed { for id in view.listeners { deliver(.value(listener: id, path: path, value: value)) } }
        }
    }
}
