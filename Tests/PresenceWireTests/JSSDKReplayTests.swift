import Foundation
import PresenceCore
import PresenceTesting
import PresenceWire
import Testing

/// Replays what the official JS SDK (8.10.1 and 9.23.0 compat) sent in recorded presence sessions
/// (`Fixtures/*.jsonl`, protocol doc section 17) through the engine with the shipped presence
/// rules, and checks that every connection gets replies of the same shapes in the same order as
/// recorded (session ids and timestamps aside).
@Suite struct JSSDKReplayTests {
    static let recordings = ["v8-presence", "v9compat-presence", "close-crash-v8", "reconnect-v8", "ping-v8"]

    @Test(arguments: recordings)
    func replayMatchesTheRecording(_ name: String) throws {
        let url = try #require(Bundle.module.url(forResource: name, withExtension: "jsonl", subdirectory: "Fixtures"))
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
        let harness = EngineHarness(policy: try Self.presenceRules())

        var ours: [Int: ConnectionID] = [:]
        var recordedSessions: [String: String] = [:]  // recorded session id -> ours
        var expected: [Int: [String]] = [:]
        var pendingHello: Set<Int> = []
        for line in lines {
            let event = try JSONParser.parse(String(line))
            guard let conn = event["conn"]?.numberValue.map(Int.init), let direction = event["dir"]?.stringValue else { continue }
            switch direction {
            case "event":
                switch event["event"]?.stringValue {
                case "open":
                    let path = event["path"]?.stringValue ?? ""
                    let query = Self.queryItems(path)
                    let lastSession = query["ls"].flatMap { recordedSessions[$0] }
                    let host = event["headers"]?["Host"]?.stringValue ?? "localhost"
                    ours[conn] = harness.connect(namespace: query["ns"], lastSession: lastSession, host: host)
                    pendingHello.insert(conn)
                case "close":
                    if let id = ours[conn] { harness.disconnect(id) }
                default:
                    break
                }
            case "in":
                let frame = try #require(event["frame"]?.stringValue)
                harness.send(frame, from: try #require(ours[conn]))
            case "out":
                let frame = try #require(event["frame"]?.stringValue)
                if pendingHello.remove(conn) != nil, let recorded = try JSONParser.parse(frame)["d"]?["d"]?["s"]?.stringValue,
                   let id = ours[conn], let session = harness.sessionIDs[id] {
                    recordedSessions[recorded] = session
                }
                expected[conn, default: []].append(frame)
            default:
                break
            }
        }
        #expect(!expected.isEmpty)
        for (conn, frames) in expected.sorted(by: { $0.key < $1.key }) {
            let id = try #require(ours[conn])
            let actual = harness.take(id)
            // Data and control messages are compared as two ordered streams: the recording's
            // responder held data replies back to provoke pings, so pongs overtook them there.
            for layer in ["d", "c"] {
                let want = try frames.map(Self.shape).filter { $0.hasPrefix("{\"t\":\"\(layer)\"") }
                let got = try actual.map(Self.shape).filter { $0.hasPrefix("{\"t\":\"\(layer)\"") }
                #expect(got == want, "connection \(conn) of \(name), layer \(layer)")
            }
        }
    }

    static func presenceRules() throws -> RuleSet {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("rules/presence.rules.json"), encoding: .utf8)
        return try RuleSet.load(text: text, source: "rules/presence.rules.json")
    }

    static func queryItems(_ path: String) -> [String: String] {
        guard let query = path.split(separator: "?", maxSplits: 1).dropFirst().first else { return [:] }
        var items: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            items[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return items
    }

    /// The message with what legitimately differs between runs blanked: hello times and session
    /// ids, and server timestamps (any number of 10^12 or more).
    static func shape(_ frame: String) throws -> String {
        var json = try JSONParser.parse(frame)
        if json["t"] == "c", json["d"]?["t"] == "h" {
            json = .object([("t", "c"), ("d", .object([("t", "h"), ("d", .object([("ts", 0), ("v", "5"), ("s", "S")]))]))])
        }
        return JSONWriter.string(blankTimestamps(json))
    }

    static func blankTimestamps(_ json: JSON) -> JSON {
        switch json {
        case .number(let n) where n >= 1e12: return .number(0)
        case .array(let items): return .array(items.map(blankTimestamps))
        case .object(let members): return .object(members.map { ($0.0, blankTimestamps($0.1)) })
        default: return json
        }
    }
}
