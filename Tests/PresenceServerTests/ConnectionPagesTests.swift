import PresenceCore
import Testing
@testable import PresenceServer

/// The cluster-wide listing's pages: every node answers its page after the cursor, the node asked
/// merges them; paging through the merged pages lists every connection once, in node order, and
/// whatever another node wrote into an answer or an ask is range-checked.
@Suite struct ConnectionPagesTests {
    /// Connections per node (ids ascending), as the nodes hold them.
    let cluster: [String: [UInt64]] = ["a#1": [3, 9], "b#1": [1, 2, 5, 8, 13], "c#1": [], "d#1": [4]]

    func answer(_ node: String, _ query: ConnectionPages.Query) -> JSON {
        let ids = cluster[node]!
        let start = ConnectionPages.start(of: ids, node: node, after: query.after)
        let end = min(start + query.limit, ids.count)
        let rows = ids[start..<end].map { (id: $0, row: JSON.object([("session", .string("\(node)-\($0)"))])) }
        return ConnectionPages.answer(node: node, total: ids.count, more: end < ids.count, rows: Array(rows))
    }

    func page(limit: Int, after: ConnectionPages.Cursor?) -> ConnectionPages.Merged {
        // Through the ask's JSON, as it travels.
        let query = ConnectionPages.Query(ask: ConnectionPages.Query(uid: nil, namespace: nil, limit: limit, after: after).json)!
        var answers: [String: JSON] = [:]
        for node in cluster.keys { answers[node] = answer(node, query) }
        return ConnectionPages.merge(answers, limit: limit)
    }

    @Test(arguments: [1, 2, 3, 7, 8, 100])
    func pagingListsEveryConnectionOnceInNodeOrder(limit: Int) {
        var sessions: [String] = []
        var after: ConnectionPages.Cursor?
        var pages = 0
        repeat {
            let merged = page(limit: limit, after: after)
            #expect(merged.rows.count <= limit)
            #expect(merged.total == 8 && merged.nodes.map(\.id) == ["a#1", "b#1", "c#1", "d#1"])
            sessions += merged.rows.compactMap { $0["session"]?.stringValue }
            after = merged.nextCursor.flatMap(ConnectionPages.cursor)
            #expect(merged.nextCursor == nil || after != nil)
            pages += 1
        } while after != nil && pages < 20
        #expect(sessions == ["a#1-3", "a#1-9", "b#1-1", "b#1-2", "b#1-5", "b#1-8", "b#1-13", "d#1-4"])
        #expect(pages == (8 + limit - 1) / limit)
    }

    @Test func nodesBeforeTheCursorAnswerOnlyTheirCount() {
        let query = ConnectionPages.Query(uid: nil, namespace: nil, limit: 10, after: ("b#1", 5))
        #expect(answer("a#1", query)["ids"] == .array([]) && answer("a#1", query)["total"] == .number(2))
        #expect(answer("b#1", query)["ids"] == .array([.number(8), .number(13)]))
        #expect(answer("d#1", query)["ids"] == .array([.number(4)]))
    }

    @Test func cursorsAndAsksFromOutsideAreRangeChecked() {
        #expect(ConnectionPages.cursor("a#1/17").map { "\($0.node) \($0.id)" } == "a#1 17")
        #expect(ConnectionPages.cursor("host:9001#x/y/3").map(\.node) == "host:9001#x/y")
        for bad in ["", "17", "/17", "a#1/", "a#1/-1", "a#1/1.5", "a#1/99999999999999999999999"] {
            #expect(ConnectionPages.cursor(bad) == nil, "\(bad)")
        }
        #expect(ConnectionPages.Query(ask: .object([("limit", .number(1e300))]))?.limit == 1000)
        #expect(ConnectionPages.Query(ask: .object([("limit", .number(-5))]))?.limit == 1)
        #expect(ConnectionPages.Query(ask: .object([("limit", .number(.nan))])) == nil)
        #expect(ConnectionPages.Query(ask: .object([])) == nil)
        for id in [-1, 1.5, 1e300, .infinity] {
            #expect(ConnectionPages.Query(ask: .object([("limit", .number(5)), ("afterNode", .string("a")), ("afterId", .number(id))])) == nil)
        }
    }

    @Test func malformedAnswersAreSkipped() {
        let good = ConnectionPages.answer(node: "a#1", total: 1, more: false, rows: [(7, .object([("session", .string("s7"))]))])
        let merged = ConnectionPages.merge([
            "a#1": good,
            "b#1": .object([("connections", .array([.null])), ("ids", .array([])), ("total", .number(1))]),
            "c#1": .string("nonsense"),
            "d#1": .object([("connections", .array([.null])), ("ids", .array([.number(-3)])), ("total", .number(.infinity))]),
        ], limit: 10)
        #expect(merged.rows == [.object([("session", .string("s7"))])] && merged.total == 1 && merged.nextCursor == nil)
        #expect(merged.nodes.map(\.id) == ["a#1"])
    }
}
