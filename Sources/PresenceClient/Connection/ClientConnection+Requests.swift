import PresenceCore

/// What the app asks of the connection, and how it goes on the wire. Everything asked offline is
/// kept and sent after the next hello (see ``ClientConnection``).
extension ClientConnection {
    /// A write kept until acknowledged.
    public struct PendingWrite: Equatable, Sendable {
        public enum Action: String, Sendable { case set = "p", update = "m" }
        public var id: WriteID
        public var action: Action
        public var path: Path
        public var data: JSON
        /// The request number on the current connection, nil when not sent on it yet.
        public var request: Int?
    }

    /// An onDisconnect registration kept for re-registration after a reconnect (the client's copy
    /// of what it asked; the server keeps its own `OnDisconnectOp`s).
    public struct OnDisconnectRegistration: Equatable, Sendable {
        public enum Action: String, Sendable { case set = "o", update = "om", cancel = "oc" }
        public var id: OnDisconnectID
        public var action: Action
        public var path: Path
        public var data: JSON
    }

    // MARK: app requests

    /// Starts listening at `path`. Listeners on the same path share one server listen; the first
    /// value is delivered as soon as known. Works offline (sent after the next hello).
    public mutating func listen(_ path: Path, now: Int64) -> ListenerID {
        let id = takeID()
        listenerPaths[id] = path
        if var view = views[path] {
            view.listeners.append(id)
            views[path] = view
            if view.hasValue { deliver(.value(listener: id, path: path, value: view.value)) }
        } else {
            views[path] = View(listeners: [id])
            viewOrder.append(path)
            if phase == .connected { sendListen(path) }
        }
        return id
    }

    /// Stops a listener; the server listen ends with the last listener of its path.
    public mutating func unlisten(_ id: ListenerID, now: Int64) {
        guard let path = listenerPaths.removeValue(forKey: id), var view = views[path] else { return }
        view.listeners.removeAll { $0 == id }
        if view.listeners.isEmpty {
            views[path] = nil
            viewOrder.removeAll { $0 == path }
            if phase == .connected { send(action: "n", body: .object([("p", .string(path.description))]), outstanding: .unlisten) }
        } else {
            views[path] = view
        }
    }

    /// `set`: overwrites the value at `path` (`null` deletes). Server values such as
    /// `{".sv":"timestamp"}` may appear anywhere in `value`.
    public mutating func set(_ path: Path, _ value: JSON, now: Int64) -> WriteID {
        write(.set, path, value)
    }

    /// `update`: each key (a relative path) replaces the value below `path`.
    public mutating func update(_ path: Path, _ children: [(String, JSON)], now: Int64) -> WriteID {
        write(.update, path, .object(children))
    }

    /// `remove`: deletes the value at `path`.
    public mutating func remove(_ path: Path, now: Int64) -> WriteID {
        write(.set, path, .null)
    }

    /// `onDisconnect().set(value)` at `path`; kept and re-registered after every reconnect.
    public mutating func onDisconnectSet(_ path: Path, _ value: JSON, now: Int64) -> OnDisconnectID {
        registerOnDisconnect(.set, path, value)
    }

    /// `onDisconnect().update(children)` at `path`.
    public mutating func onDisconnectUpdate(_ path: Path, _ children: [(String, JSON)], now: Int64) -> OnDisconnectID {
        registerOnDisconnect(.update, path, .object(children))
    }

    /// `onDisconnect().cancel()` at `path`: forgets the registrations at and below it.
    public mutating func onDisconnectCancel(_ path: Path, now: Int64) -> OnDisconnectID {
        onDisconnectRegistrations.removeAll { path.contains($0.path) }
        // Only a registration above `path` still has a part to cancel on a new session.
        let keep = onDisconnectRegistrations.contains { $0.path.contains(path) }
        let id = takeID()
        let registration = OnDisconnectRegistration(id: id, action: .cancel, path: path, data: .null)
        if keep { onDisconnectRegistrations.append(registration) }
        if phase == .connected { sendOnDisconnect(registration) }
        return id
    }

    /// A one-shot read of `path`.
    public mutating func get(_ path: Path, now: Int64) -> GetID {
        let id = takeID()
        pendingGets.append((id, path, nil))
        if phase == .connected { sendGet(index: pendingGets.count - 1) }
        return id
    }

    // MARK: on the wire

    @discardableResult
    mutating func send(action: String, body: JSON, outstanding kind: Outstanding) -> Int {
        let r = nextRequest
        nextRequest += 1
        outstanding[r] = kind
        effects.append(.send(ClientCodec.request(r, action: action, body: body)))
        return r
    }

    mutating func sendListen(_ path: Path) {
        send(action: "q", body: .object([("p", .string(path.description)), ("h", "")]), outstanding: .listen(path))
    }

    mutating func sendOnDisconnect(_ registration: OnDisconnectRegistration) {
        send(action: registration.action.rawValue,
             body: .object([("p", .string(registration.path.description)), ("d", registration.data)]),
             outstanding: .onDisconnect(registration.id))
    }

    mutating func sendWrite(index: Int) {
        let w = pendingWrites[index]
        let r = send(action: w.action.rawValue, body: .object([("p", .string(w.path.description)), ("d", w.data)]),
                     outstanding: .write(w.id))
        pendingWrites[index].request = r
        deliver(.writeSent(w.id, request: r))
    }

    mutating func sendGet(index: Int) {
        let g = pendingGets[index]
        let r = send(action: "g", body: .object([("p", .string(g.path.description)), ("q", .object([]))]),
                     outstanding: .get(g.id))
        pendingGets[index].request = r
    }

    private mutating func write(_ action: PendingWrite.Action, _ path: Path, _ data: JSON) -> WriteID {
        let id = takeID()
        if let refusal = oversized(action: action.rawValue, path: path, data: data) {
            localRefusals.append(.writeCompleted(id, refusal))
            return id
        }
        pendingWrites.append(PendingWrite(id: id, action: action, path: path, data: data, request: nil))
        if phase == .connected { sendWrite(index: pendingWrites.count - 1) }
        return id
    }

    private mutating func registerOnDisconnect(_ action: OnDisconnectRegistration.Action, _ path: Path,
                                               _ data: JSON) -> OnDisconnectID {
        let id = takeID()
        if let refusal = oversized(action: action.rawValue, path: path, data: data) {
            localRefusals.append(.onDisconnectCompleted(id, refusal))
            return id
        }
        // A set at `path` replaces what is registered at and below it (the server does the same).
        if action == .set { onDisconnectRegistrations.removeAll { path.contains($0.path) } }
        let registration = OnDisconnectRegistration(id: id, action: action, path: path, data: data)
        onDisconnectRegistrations.append(registration)
        if phase == .connected { sendOnDisconnect(registration) }
        return id
    }
}
