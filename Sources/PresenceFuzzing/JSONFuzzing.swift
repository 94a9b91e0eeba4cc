import PresenceCore

/// The JSON parser: bytes in; when they parse, writing and parsing again gives the same value,
/// both parse modes agree, and a value stored as a node reads back as the same node.
enum JSONFuzzing {
    static let target = FuzzTarget(
        name: "json",
        summary: "JSONParser on raw bytes; parse→write→parse round trip, strict vs overflow-reporting parse agree, Node(json:) round trip, a node's JSON text parses back",
        run: run)

    static func run(_ bytes: [UInt8]) {
        let strict = try? JSONParser.parse(bytes: bytes)
        let lenient = try? JSONParser.parseReportingOverflow(bytes: bytes)
        invariant((strict == nil) == (lenient == nil || lenient!.overflowed), "strict and overflow-reporting parses disagree")
        guard let json = strict else { return }
        invariant(lenient!.json == json, "the two parse modes give different values")
        let text = JSONWriter.string(json)
        guard let again = try? JSONParser.parse(text) else { return invariant(false, "writer output does not parse: \(text.prefix(200))") }
        invariant(again == json, "parse→write→parse changed the value")
        // As data: a value that stores reads back (export format) as the same node.
        guard let node = try? Node(json: json) else { return }
        FuzzWorld.checkTree(node)
        let exported = node.json(exportFormat: true)
        guard let reread = try? Node(json: exported) else { return invariant(false, "an exported node does not store again") }
        invariant(reread == node, "Node(json:) → json(exportFormat:) → Node(json:) changed the node")
        // The node's own byte writer (pushes, REST, storage) says the same as JSONWriter.
        let written = node.jsonString(exportFormat: true)
        guard let parsedBack = try? JSONParser.parse(written) else { return invariant(false, "a node's JSON text does not parse: \(written.prefix(200))") }
        invariant(parsedBack == exported, "a node's JSON text reads back as another value")
    }
}
