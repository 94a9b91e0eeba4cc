/// Applying writes and pushing them to listeners (§4.2).
extension Engine {
    /// A filtered query at one location: the unit a write computes once, however many
    /// connections (and tags) listen to it.
    struct QueryKey: Hashable {
        let path: Path
        let spec: QuerySpec
    }

    /// What the writes do to one filtered query: whether any covers its location, and for each
    /// child they change below it, whether that child was in the query's range before.
    struct QueryChange {
        var covered = false
        var children: [(key: String, wasInRange: Bool)] = []
    }

    /// Applies writes in order and pushes the changes to every listener that can see them (§4.2).
    /// Pushes are queued before the caller's ack, so every writer sees its echo first.
    ///
    /// A filtered query is computed once per write for all its listeners, and not at all when
    /// every child the write changes was out of its range before and after (nothing it shows can
    /// have changed); each tag then gets one message for all its recipients. When the write changes
    /// one child of a location that many distinct queries watch, each window's change is worked
    /// out from one order of the children and pushed as a merge of the children that entered,
    /// left or changed (`ChildOrder`, `Engine+QueryChanges`).
    ///
    /// `recordingWritten` (replicated apply): also returns each write's `WrittenPath`, computed on
    /// the tree just before that write, for the version window.
    @discardableResult
    func commit(_ writes: [(Path, Node)], in ns: Namespace, recordingWritten: Bool = false) -> [WrittenPath] {
        let writePaths = writes.map(\.0)
        // The listeners do not depend on the data: find them first, so that filtered queries can
        // note what they showed before the tree changes.
        var affected: [Listener]
        if writePaths.count == 1 {
            // One path: the listeners above it and below it are disjoint and each is listed once,
            // so there is nothing to deduplicate (hashing every listener cost ~2.6k instructions).
            affected = ns.listeners.listeners(containing: writePaths[0])
            affected.append(contentsOf: ns.listeners.listeners(below: writePaths[0]))
        } else {
            affected = []
            var seen: Set<Listener> = []
            for path in writePaths {
                for listener in ns.listeners.listeners(containing: path) + ns.listeners.listeners(below: path)
                where seen.insert(listener).inserted {
                    affected.append(listener)
                }
            }
        }
        var queryChanges: [QueryKey: QueryChange] = [:]
        var lastQuery: QueryKey?
        for listener in affected {
            guard let spec = listener.query else { continue }
            // Listeners of one query come together from the trie: skip the hashing for repeats.
            if let lastQuery, lastQuery.spec == spec, lastQuery.path == listener.path { continue }
            let key = QueryKey(path: listener.path, spec: spec)
            lastQuery = key
            if queryChanges[key] == nil { queryChanges[key] = Self.change(of: key, by: writePaths, root: ns.root) }
        }
        let pendingOrders = queryChanges.count > 1 ? Self.ordersForChanges(queryChanges, root: ns.root) : [:]

        var written: [WrittenPath] = []
        for (path, node) in writes {
            if recordingWritten { written.append(WrittenPath(writing: node, at: path, over: ns.root)) }
            ns.root.set(node, at: path)
            record(.write(namespace: ns.name, path: path, value: node))
            if let online = configuration.onlineIndex { ns.onlineIndex.update(after: path, root: ns.root, configuration: online) }
        }
        noteHoldsData(ns)
        guard !affected.isEmpty else { return written }
        let moves = pendingOrders.isEmpty ? [:] : Self.moves(of: pendingOrders, root: ns.root)

        // One message per distinct content; each encoded once by the shell.
        var messages: [(Outbound, [ConnectionID])] = []
        var plainIndex: [String: Int] = [:]
        var keyByListenPath: [Path: String] = [:]
        // Per filtered query: its push (nil: nothing it shows changed), its whole result once an
        // untagged listener needs it, and its message per tag.
        typealias QueryMessages = (push: QueryPush?, whole: Node?, messageByTag: [Int?: Int])
        var queryPushes: [QueryKey: QueryMessages] = [:]
        var current: (key: QueryKey, messages: QueryMessages)?
        // Listeners of one path come together from the trie: look at the previous one first.
        var previous: (path: Path, key: String)?
        for listener in affected {
            if let spec = listener.query {
                if current == nil || current!.key.spec != spec || current!.key.path != listener.path {
                    if let done = current { queryPushes[done.key] = done.messages }
                    let key = QueryKey(path: listener.path, spec: spec)
                    if let known = queryPushes[key] {
                        current = (key, known)
                    } else {
                        let push = queryPush(for: key, change: queryChanges[key]!, move: moves[OrderKey(path: key.path, index: spec.index)],
                                             location: ns.root.node(at: listener.path))
                        current = (key, (push, nil, [:]))
                    }
                }
                guard let push = current!.messages.push else { continue }
                if let at = current!.messages.messageByTag[listener.tag] {
                    messages[at].1.append(listener.connection)
                    continue
                }
                current!.messages.messageByTag[listener.tag] = messages.count
                switch push {
                case .whole(let result):
                    messages.append((.data(path: listener.path, value: result, tag: listener.tag), [listener.connection]))
                case .changes(let changes) where listener.tag != nil:
                    messages.append((.merge(path: listener.path, changes: changes, tag: listener.tag), [listener.connection]))
                case .changes:
                    // An untagged listener (a REST stream) takes what it gets as the location's
                    // whole value: it needs the whole window.
                    let whole = current!.messages.whole ?? QueryWindow.result(of: spec, at: ns.root.node(at: listener.path))
                    current!.messages.whole = whole
                    messages.append((.data(path: listener.path, value: whole, tag: nil), [listener.connection]))
                }
                continue
            }
            if let key = previous.flatMap({ $0.path == listener.path ? $0.key : nil }) ?? keyByListenPath[listener.path] {
                messages[plainIndex[key]!].1.append(listener.connection)
                previous = (listener.path, key)
                continue
            }
            let (key, message) = pushMessage(at: listener.path, writePaths: writePaths, in: ns)
            keyByListenPath[listener.path] = key
            previous = (listener.path, key)
            if let at = plainIndex[key] {
                messages[at].1.append(listener.connection)
            } else {
                plainIndex[key] = messages.count
                messages.append((message, [listener.connection]))
            }
        }
        for (message, recipients) in messages { effects.append(.send(recipients, message)) }
        return written
    }

    /// What `writePaths` do to the query `key`, before they are applied.
    static func change(of key: QueryKey, by writePaths: [Path], root: Node) -> QueryChange {
        var change = QueryChange()
        let location = root.node(at: key.path)
        for path in writePaths {
            guard key.path.contains(path), path.count > key.path.count else {
                if path.contains(key.path) { change.covered = true }
                continue
            }
            let child = path.segments[key.path.count]
            // A priority of the location itself, or anything unusual: recompute.
            if child.hasPrefix(".") { change.covered = true }
            let before = location.child(child)
            change.children.append((child, before.exists && key.spec.contains(child, before)))
        }
        return change
    }

    /// What a listener at `listenPath` receives for these writes: the whole value at the listen path
    /// when a write covers it, else the changed value below it, never data outside it.
    private func pushMessage(at listenPath: Path, writePaths: [Path], in ns: Namespace) -> (String, Outbound) {
        if writePaths.contains(where: { $0.contains(listenPath) }) {
            return ("d" + listenPath.wireString, .data(path: listenPath, value: ns.root.node(at: listenPath), tag: nil))
        }
        var below: [Path] = []
        for path in writePaths where listenPath.contains(path) && !below.contains(path) { below.append(path) }
        if below.count == 1 {
            return ("d" + below[0].wireString, .data(path: below[0], value: ns.root.node(at: below[0]), tag: nil))
        }
        // One merge at the deepest location that holds every change (an update's own location).
        var common = below[0].parent ?? listenPath
        for path in below.dropFirst() {
            while !common.contains(path) { common = common.parent ?? .root }
        }
        if !listenPath.contains(common) { common = listenPath }
        let changes = below.map { Outbound.Change(path: common.relative($0)!, value: ns.root.node(at: $0)) }
        return ("m" + common.wireString, .merge(path: common, changes: changes, tag: nil))
    }
}

extension Engine.QueryChange {
    /// False only when provably nothing the query shows changed: no write covers its location and
    /// each changed child was out of its range before and is out of it now (`location` is after).
    func mayChange(_ spec: QuerySpec, at location: Node) -> Bool {
        if covered { return true }
        for (key, wasInRange) in children {
            if wasInRange { return true }
            let now = location.child(key)
            if now.exists && spec.contains(key, now) { return true }
        }
        return false
    }
}
