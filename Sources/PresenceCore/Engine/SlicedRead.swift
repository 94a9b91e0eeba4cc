/// A read whose answer is too big to compute and serialize in one go without holding the loop
/// (issue 16: a 6 MB `g` held every other client for 0.2 s). The engine checks the rules at once
/// and hands the shell this: the stored value as it was when the request arrived (a snapshot:
/// `Node` is a value), the query, and the read budget. The shell runs it in slices
/// (`SlicedRead.step`) between other clients' messages, and answers in order on its connection.
public struct DeferredRead: Sendable, Equatable {
    public let path: Path
    /// The stored value at `path` when the read was made (unfiltered).
    public let value: Node
    public let spec: QuerySpec
    /// The answer is the query's result (`g`), not the whole location.
    public let filtered: Bool
    /// `EngineLimits.maxReadBytes`: an answer whose JSON passes it is refused with `tooBig`.
    public let budget: Int
    /// The refusal, for an answer over the budget.
    public let refusal: String
    /// How the answer is written.
    public let form: Form
    /// At a location a limit guards (the limits file): whose use to count once the text is known
    /// to be within the budget (`Engine.useDeferredReadLimit`); nil elsewhere.
    public let limitUse: LimitUse?

    /// The reader a guarded read's use is counted for.
    public struct LimitUse: Sendable, Equatable {
        public let namespace: String
        public let credentials: Credentials
    }

    /// The JSON an answer is written as.
    public enum Form: Sendable, Equatable {
        /// With priorities (`.priority`, `.value`): the wire's data, REST `format=export`.
        case export
        /// Values only: REST, a stream's events.
        case plain
        /// REST `shallow=true`: the children's keys, each with its primitive value or `true`.
        case shallow
    }

    public init(path: Path, value: Node, spec: QuerySpec, filtered: Bool, budget: Int, refusal: String, form: Form = .export,
                limitUse: LimitUse? = nil) {
        self.limitUse = limitUse
        self.path = path
        self.value = value
        self.spec = spec
        self.filtered = filtered
        self.budget = budget
        self.refusal = refusal
        self.form = form
    }

    /// The whole answer at once (for callers without a loop to slice on: tests, fuzzing).
    public func resolved() -> Result<[UInt8], EngineError> {
        var read = SlicedRead(self)
        while true {
            if let outcome = read.step(work: .max) { return outcome }
        }
    }
}

/// A `DeferredRead` computed a slice at a time: first the query's window (one child per unit of
/// work, `QueryWindow.Selector`), then the JSON text (one node per unit, with an explicit stack
/// instead of recursion), stopping as soon as the text passes the budget. Each `step(work:)` does
/// at most `work` units, so a caller bounds what one turn of its loop spends. The text is the
/// export format of `Node.writeJSON`, except that children of a branch with more than
/// `sortedBranchLimit` children come in the order of their dictionary, not in key order (sorting
/// 300,000 keys alone held the loop for about 0.1 s; JSON objects are unordered for every client).
public struct SlicedRead {
    public let read: DeferredRead
    /// `prefix`, then the JSON so far (the answer's `d`).
    public private(set) var text: [UInt8] = []
    /// Bytes of `text` before the answer (its envelope), not counted against the budget.
    private let prefixCount: Int
    private let suffix: [UInt8]
    private var phase: Phase
    private var stack: [Frame] = []
    /// Units of work done in all (children offered, nodes written): tests check the slicing with it.
    public private(set) var workDone = 0
    /// Steps taken that did some work.
    public private(set) var steps = 0

    public static let sortedBranchLimit = 1_024
    /// Branches of at most this many leaves are written in one unit of work.
    static let wholeBranchLimit = 16

    private enum Phase {
        case selecting(QueryWindow.Selector, [String: Node], Dictionary<String, Node>.Index)
        case ranging([String: Node], [String: Node], Dictionary<String, Node>.Index)
        case writing
        case done
    }

    /// A branch being written: its children in order (sorted) or its dictionary and a position.
    private enum Frame {
        case sorted([(key: String, value: Node)], Int, Priority?)
        case unsorted([String: Node], Dictionary<String, Node>.Index, Priority?)
    }

    /// The outcome is `prefix` + the answer's JSON + `suffix` (a reply's envelope around its `d`,
    /// written in place so that the answer is never copied whole).
    public init(_ read: DeferredRead, prefix: [UInt8] = [], suffix: [UInt8] = []) {
        self.read = read
        text = prefix
        prefixCount = prefix.count
        self.suffix = suffix
        if read.filtered, read.spec.isFiltered, case .branch(let children, _) = read.value, !children.isEmpty {
            if let limit = read.spec.limit {
                if limit.count > 0 {
                    let selector = QueryWindow.Selector(limit.count, spec: read.spec, largest: limit.direction == .last,
                                                        expected: children.count)
                    phase = .selecting(selector, children, children.startIndex)
                } else {
                    phase = .writing
                    pendingRoot = .null
                }
            } else {
                phase = .ranging([:], children, children.startIndex)
            }
        } else if read.filtered, read.spec.isFiltered {
            phase = .writing
            pendingRoot = .null
        } else {
            phase = .writing
            pendingRoot = read.value
        }
    }

    /// The value to write once the window is known.
    private var pendingRoot: Node?

    /// Does at most `work` units; returns the outcome once there is one (the JSON text, or the
    /// refusal when it passed the budget), nil while there is more to do.
    public mutating func step(work: Int) -> Result<[UInt8], EngineError>? {
        var left = work
        if left > 0 { steps += 1 }
        while left > 0 {
            switch phase {
            case .selecting(var selector, let children, var index):
                phase = .done  // the selector is unique while it works
                while left > 0, index != children.endIndex {
                    let (key, child) = children[index]
                    selector.offer(key, child)
                    children.formIndex(after: &index)
                    left -= 1
                    workDone += 1
                }
                if index == children.endIndex {
                    pendingRoot = selector.result
                    phase = .writing
                } else {
                    phase = .selecting(selector, children, index)
                }
            case .ranging(var kept, let children, var index):
                phase = .done
                while left > 0, index != children.endIndex {
                    let (key, child) = children[index]
                    if read.spec.contains(key, child) { kept[key] = child }
                    children.formIndex(after: &index)
                    left -= 1
                    workDone += 1
                }
                if index == children.endIndex {
                    pendingRoot = kept.isEmpty ? .null : .branch(kept, priority: nil)
                    phase = .writing
                } else {
                    phase = .ranging(kept, children, index)
                }
            case .writing:
                if let root = pendingRoot {
                    pendingRoot = nil
                    write(root)
                    left -= 1
                    workDone += 1
                }
                while left > 0, !stack.isEmpty {
                    writeNext()
                    left -= 1
                    workDone += 1
                    if text.count - prefixCount > read.budget { break }
                }
                if text.count - prefixCount > read.budget {
                    phase = .done
                    text = []
                    return .failure(.tooBig(read.refusal))
                }
                if stack.isEmpty {
                    phase = .done
                    text.append(contentsOf: suffix)
                    defer { text = [] }
                    return .success(text)
                }
            case .done:
                return nil
            }
        }
        return nil
    }

    private var exportFormat: Bool { read.form == .export }

    /// Writes a leaf whole, or a branch's opening and pushes it.
    private mutating func write(_ node: Node) {
        // Shallow: the root's children are written as their primitive value or `true`.
        if read.form == .shallow, stack.count == 1 {
            if case .leaf(let leaf, _) = node { return Node.writeLeaf(leaf, into: &text) }
            return text.append(contentsOf: "true".utf8)
        }
        switch node {
        case .leaf:
            node.writeJSON(into: &text, exportFormat: exportFormat)
        case let .branch(children, priority):
            if children.isEmpty { return text.append(contentsOf: "null".utf8) }
            // A small branch of leaves (a presence entry, a record) is written whole: a frame on the
            // stack for each would cost more than writing it (shallow or not, it reads the same).
            if children.count <= Self.wholeBranchLimit, children.values.allSatisfy({ !$0.hasChildren }) {
                return node.writeJSON(into: &text, exportFormat: exportFormat)
            }
            text.append(UInt8(ascii: "{"))
            if children.count > Self.sortedBranchLimit {
                stack.append(.unsorted(children, children.startIndex, priority))
            } else {
                stack.append(.sorted(KeyOrder.sorted(children), 0, priority))
            }
        }
    }

    /// The next child of the innermost open branch, or its closing.
    private mutating func writeNext() {
        let top = stack.count - 1
        switch stack[top] {
        case .sorted(let entries, let position, let priority):
            guard position < entries.count else { return close(priority) }
            stack[top] = .sorted(entries, position + 1, priority)
            writeMember(entries[position].key, entries[position].value, first: position == 0)
        case .unsorted(let children, let index, let priority):
            guard index != children.endIndex else { return close(priority) }
            stack[top] = .unsorted(children, children.index(after: index), priority)
            writeMember(children[index].key, children[index].value, first: index == children.startIndex)
        }
    }

    private mutating func writeMember(_ key: String, _ value: Node, first: Bool) {
        if !first { text.append(UInt8(ascii: ",")) }
        Node.writeString(key, into: &text)
        text.append(UInt8(ascii: ":"))
        write(value)
    }

    private mutating func close(_ priority: Priority?) {
        stack.removeLast()
        if exportFormat, let priority {
            text.append(contentsOf: #",".priority":"#.utf8)
            Node.writeLeaf(priority.leaf, into: &text)
        }
        text.append(UInt8(ascii: "}"))
    }
}
