import GRDBSQLite
import PresenceCore

/// Rebuilds a tree from its rows in path order (a depth-first walk): a stack of open branches
/// along the previous row's path; only the keys that differ from the previous row are decoded.
struct TreeBuilder {
    private struct Frame {
        var key: String
        var children: [String: Node] = [:]
        var priority: Priority?
    }

    private var stack: [Frame] = [Frame(key: "")]
    private var rootLeaf: Node?
    private var previous: [UInt8] = []
    private var starts: [Int] = []

    /// Adds the current row of a `SELECT ns, path, kind, value, priority` statement.
    mutating func add(_ row: SQLiteStatement) throws {
        let path = row.blob(1)
        guard let kind = RowKind(rawValue: row.int64(2)) else {
            throw SQLiteStorageError.corrupt("unknown row kind \(row.int64(2))")
        }
        // Keys shared with the previous row: those whose closing separator lies inside the common
        // prefix, or that close where the previous row (an ancestor of this one) ends.
        var common = 0
        let limit = min(previous.count, path.count)
        while common < limit && previous[common] == path[common] { common += 1 }
        starts.removeAll(keepingCapacity: true)
        for index in 0..<path.count where path[index] == 0x01 { starts.append(index) }
        var shared = 0
        while shared + 1 < starts.count,
            starts[shared + 1] < common || (starts[shared + 1] == common && common == previous.count) {
            shared += 1
        }
        if common == path.count && common == previous.count { shared = starts.count }
        shared = min(shared, stack.count - 1)
        while stack.count - 1 > shared { pop() }

        let keyCount = starts.count
        let branchKeys = kind == .branch ? keyCount : keyCount - 1
        while stack.count - 1 < branchKeys {
            stack.append(Frame(key: key(path, stack.count - 1)))
        }
        let priority = Self.priority(row)
        if kind == .branch {
            if keyCount == 0 || stack.count - 1 == keyCount { stack[stack.count - 1].priority = priority }
        } else {
            let leaf: Leaf = switch kind {
            case .bool: .bool(row.int64(3) != 0)
            case .number: .number(row.double(3))
            default: .string(row.text(3))
            }
            let node = Node.leaf(leaf, priority: priority)
            if keyCount == 0 {
                rootLeaf = node
            } else {
                stack[stack.count - 1].children[key(path, keyCount - 1)] = node
            }
        }
        previous.removeAll(keepingCapacity: true)
        previous.append(contentsOf: path)
    }

    private func key(_ path: UnsafeRawBufferPointer, _ index: Int) -> String {
        let start = starts[index] + 1
        let end = index + 1 < starts.count ? starts[index + 1] : path.count
        return String(decoding: UnsafeRawBufferPointer(rebasing: path[start..<end]), as: UTF8.self)
    }

    private static func priority(_ row: SQLiteStatement) -> Priority? {
        switch row.type(4) {
        case SQLITE_INTEGER, SQLITE_FLOAT: return .number(row.double(4))
        case SQLITE_TEXT: return .string(row.text(4))
        default: return nil
        }
    }

    private mutating func pop() {
        let frame = stack.removeLast()
        guard !frame.children.isEmpty else { return }
        stack[stack.count - 1].children[frame.key] = .branch(frame.children, priority: frame.priority)
    }

    mutating func finish() -> Node {
        while stack.count > 1 { pop() }
        let root = stack.removeLast()
        stack = [Frame(key: "")]
        previous = []
        if root.children.isEmpty { return rootLeaf ?? .null }
        return .branch(root.children, priority: root.priority)
    }
}
