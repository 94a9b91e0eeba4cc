import ArgumentParser
import PresenceCore

struct AdminNodesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nodes",
        abstract: "List the cluster's nodes (--storage redis): address, connections, lag, last heartbeat, refused namespaces.",
        discussion: """
            The list is the one the asked node read from Redis at its last beat (at most --node-beat old). \
            A node that stopped beating shows `silent` once its beat is older than the lease, and leaves the list \
            after 5 minutes; a node stopped with SIGTERM leaves it at once. On a single node: this node alone.

            Examples:
              presence-client admin nodes
              presence-client admin nodes --server http://10.0.0.5:9001 --json
            """)

    @OptionGroup var options: AdminOptions

    func run() throws {
        let reply = try options.call("GET", "/.admin/nodes")
        let console = Console()
        if options.json {
            console.line(JSONWriter.string(reply))
            return
        }
        guard case .array(let nodes)? = reply["nodes"] else {
            console.error("the server's answer has no nodes list")
            throw ExitCode(Exit.refused)
        }
        if reply["cluster"] != .bool(true) {
            console.line("single node (not a cluster): \(nodes.first?["connections"]?.numberValue.map { AdminFormat.integer($0) } ?? "?") connections")
            return
        }
        let rows = nodes.map { n -> [String] in
            let id = (n["id"]?.stringValue ?? "?") + (n["self"] == .bool(true) ? " *" : "")
            let age = n["beatAgeMs"]?.numberValue.map { AdminFormat.duration($0) + " ago" } ?? "–"
            return [id, n["state"]?.stringValue ?? "?", n["address"]?.stringValue ?? "–",
                    n["connections"]?.numberValue.map { AdminFormat.integer($0) } ?? "–",
                    n["lag"]?.numberValue.map { AdminFormat.integer($0) } ?? "–", age]
        }
        for line in AdminFormat.table(["NODE", "STATE", "ADDRESS", "CONNECTIONS", "LAG", "LAST BEAT"], rows, right: [3, 4, 5]) {
            console.line(line)
        }
        // Namespaces a node refuses because Redis lost their history (docs/scaling.md, "Redis back empty").
        for n in nodes {
            guard case .object(let refused)? = n["refused"] else { continue }
            for (ns, reason) in refused {
                console.line("\(n["id"]?.stringValue ?? "?") refuses namespace \(ns): \(reason.stringValue ?? "?")")
            }
        }
        console.line("")
        console.line("\(nodes.count) node\(nodes.count == 1 ? "" : "s") on Redis \(reply["redis"]?.stringValue ?? "?") (* = the node asked)")
    }
}
