/// REST `shallow=true` (§9.1): the location's children with every object child replaced by `true`
/// and primitive children as they are; a primitive location is returned as it is, null as null.
/// Priorities are not included.
public enum Shallow {
    public static func shallow(_ node: Node) -> JSON {
        switch node {
        case .leaf(let leaf, _):
            return leaf.json
        case .branch(let children, _):
            if children.isEmpty { return .null }
            return .object(KeyOrder.sortedKeys(children.keys).map { key in
                let child = children[key]!
                return (key, child.leafValue?.json ?? .bool(true))
            })
        }
    }
}
