/// `RuleSet` is the engine's real `AccessPolicy` (see Engine/AccessPolicy.swift).
extension RuleSet: AccessPolicy {
    public func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64) -> Bool {
        canRead(path, root: root, auth: auth, now: now).allowed
    }

    public func allowsRead(_ path: Path, root: Node, auth: JSON?, now: Int64, query: QuerySpec) -> Bool {
        canRead(path, root: root, auth: auth, now: now, query: query.isDefault ? nil : RuleQuery(query)).allowed
    }

    public func allowsWrite(_ writes: [(Path, Node)], root: Node, auth: JSON?, now: Int64) -> Bool {
        canWrite(writes, root: root, auth: auth, now: now).allowed
    }
}

extension RuleQuery {
    /// The `query` rule variable for a read with this query.
    init(_ spec: QuerySpec) {
        self.init()
        switch spec.index {
        case .key: orderBy = .key
        case .value: orderBy = .value
        case .priority: orderBy = .priority
        case .child(let path): orderBy = .child(path.wireString)
        }
        if let start = spec.start, let end = spec.end, start.inclusive, end.inclusive, start.value == end.value {
            equalTo = start.value.json
        } else {
            startAt = spec.start?.value.json
            endAt = spec.end?.value.json
        }
        switch spec.limit?.direction {
        case .first?: limitToFirst = spec.limit?.count
        case .last?: limitToLast = spec.limit?.count
        case nil: break
        }
    }
}
