@testable import PresenceCore

/// Shared fixtures and helpers of the query tests (namespaced to stay clear of other test files).
enum QueryFixture {
    /// Builds a node from JSON text in export format (`.priority`/`.value` honoured).
    static func node(_ text: String) -> Node {
        do {
            return try Node(json: JSONParser.parse(text))
        } catch {
            fatalError("bad test fixture \(text): \(error)")
        }
    }

    /// The keys of the query's window, in index order.
    static func keys(_ spec: QuerySpec, _ node: Node) -> [String] {
        spec.window(of: node).map(\.0)
    }

    /// The children of `node` sorted by `index`.
    static func ordered(_ node: Node, by index: QueryIndex) -> [String] {
        QueryOrder.sortedChildren(of: node, by: index).map(\.0)
    }

    static func child(_ text: String) -> QueryIndex {
        do {
            return .child(try Path(text))
        } catch {
            fatalError("bad test path \(text): \(error)")
        }
    }

    static func wire(_ text: String) throws(QueryError) -> QuerySpec {
        do {
            return try QuerySpec(wire: try JSONParser.parse(text))
        } catch let error as QueryError {
            throw error
        } catch {
            fatalError("bad test JSON \(text): \(error)")
        }
    }

    /// The Python Admin SDK's integration fixture (`tests/data/dinosaurs.json`).
    static let dinosaurs = node("""
        {
          "bruhathkayosaurus": {"appeared": -70000000, "height": 25, "length": 44, "order": "saurischia",
                                "vanished": -70000000, "weight": 135000, "ratings": {"pos": 1}},
          "lambeosaurus": {"appeared": -76000000, "height": 2.1, "length": 12.5, "order": "ornithischia",
                           "vanished": -75000000, "weight": 5000, "ratings": {"pos": 2}},
          "linhenykus": {"appeared": -85000000, "height": 0.6, "length": 1, "order": "theropoda",
                         "vanished": -75000000, "weight": 3, "ratings": {"pos": 3}},
          "pterodactyl": {"appeared": -150000000, "height": 0.6, "length": 0.8, "order": "pterosauria",
                          "vanished": -148500000, "weight": 2, "ratings": {"pos": 4}},
          "stegosaurus": {"appeared": -155000000, "height": 4, "length": 9, "order": "ornithischia",
                          "vanished": -150000000, "weight": 2500, "ratings": {"pos": 5}},
          "triceratops": {"appeared": -68000000, "height": 3, "length": 8, "order": "ornithischia",
                          "vanished": -66000000, "weight": 11000, "ratings": {"pos": 6}}
        }
        """)

    static let scores = node("""
        {"bruhathkayosaurus": 55, "lambeosaurus": 21, "linhenykus": 80, "pterodactyl": 93, "stegosaurus": 5,
         "triceratops": 22}
        """)

    /// The dinosaurs by height; linhenykus and pterodactyl tie at 0.6 and go by key.
    static let heightSorted = ["linhenykus", "pterodactyl", "lambeosaurus", "triceratops", "stegosaurus", "bruhathkayosaurus"]
}
