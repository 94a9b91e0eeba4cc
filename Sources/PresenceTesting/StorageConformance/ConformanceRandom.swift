import PresenceCore

/// Random paths and values for the differential check: few distinct keys so that writes overlap,
/// keys chosen to sort around one another.
enum ConformanceRandomWrites {
    /// "é" twice: precomposed and decomposed, which Swift (and so `Node`) treats as one key.
    static let keys = ["a", "ab", "a b", "a!", "b", "0", "1", "10", "-1", "\u{E9}", "e\u{301}", "日本", "z~"]

    static func write(_ random: inout SeededRandom) -> (Path, Node) {
        let depth = random.chance(0.03) ? 0 : random.int(1...4)
        var segments: [String] = []
        for _ in 0..<depth { segments.append(keys[random.int(0...keys.count - 1)]) }
        if random.chance(0.15) {
            segments.append(".priority")
            let value: Node = switch random.int(0...3) {
            case 0: .null
            case 1: Node(.number(Double(random.int(-5...5))))
            case 2: Node(.string(keys[random.int(0...keys.count - 1)]))
            default: Node(.bool(true))
            }
            return (Path(validated: segments), value)
        }
        let value: Node = random.chance(0.3) ? .null : node(&random, depth: random.int(0...2))
        return (Path(validated: segments), value)
    }

    static func node(_ random: inout SeededRandom, depth: Int) -> Node {
        let priority: Priority? = switch random.int(0...5) {
        case 0: .number(Double(random.int(0...3)))
        case 1: .string("p\(random.int(0...3))")
        default: nil
        }
        if depth == 0 || random.chance(0.4) {
            let leaf: Leaf = switch random.int(0...5) {
            case 0: .bool(random.chance(0.5))
            case 1: .number(Double(random.int(-100...100)))
            case 2: .number(Double(random.int(-100...100)) / 8 + 0.1)
            case 3: .string("")
            case 4: .string("v\u{0}\(random.int(0...9))")
            default: .string("value \(random.int(0...99))")
            }
            return .leaf(leaf, priority: priority)
        }
        var children: [String: Node] = [:]
        for _ in 0..<random.int(1...3) {
            children[keys[random.int(0...keys.count - 1)]] = node(&random, depth: depth - 1)
        }
        return .branch(children, priority: priority)
    }
}
