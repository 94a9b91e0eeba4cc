import PresenceCore

#if canImport(Glibc)
import Glibc
#endif

/// How the admin subcommands print the server's JSON: tables, durations, byte counts.
enum AdminFormat {
    static func nowMs() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) * 1000 + Double(now.tv_nsec / 1_000_000)
    }

    static func connectionTable(_ connections: [JSON], now: Double) -> [String] {
        let rows = connections.map { c -> [String] in
            var user = c["uid"]?.stringValue ?? "(anonymous)"
            if c["auth"]?.stringValue == "admin" { user += " [admin]" }
            return [
                c["session"]?.stringValue ?? "?", user, c["namespace"]?.stringValue ?? "?",
                (c["remote"]?.stringValue).map { $0.hasPrefix("::ffff:") ? String($0.dropFirst(7)) : $0 } ?? "–", c["sdk"]?.stringValue ?? "–",
                duration(now - (c["connectedAt"]?.numberValue ?? now)), ago(c["lastFrameAt"], now: now),
                c["listeners"]?.numberValue.map { integer($0) } ?? "–",
                c["onDisconnectOps"]?.numberValue.map { integer($0) } ?? "–",
                c["bytesIn"]?.numberValue.map { bytes($0) } ?? "–",
                c["bytesOut"]?.numberValue.map { bytes($0) } ?? "–",
            ]
        }
        let headers = ["SESSION", "UID", "NS", "REMOTE", "SDK", "CONNECTED", "LAST FRAME", "LISTENERS", "ONDISC", "IN", "OUT"]
        // On a cluster (`--storage redis`) each connection names its node.
        guard connections.contains(where: { $0["node"]?.stringValue != nil }) else {
            return table(headers, rows, right: [5, 6, 7, 8, 9, 10])
        }
        let withNodes = zip(rows, connections).map { row, c in row + [c["node"]?.stringValue ?? "–"] }
        return table(headers + ["NODE"], withNodes, right: [5, 6, 7, 8, 9, 10])
    }

    /// Columns padded to their widest cell, two spaces apart; `right` holds right-aligned column indexes.
    static func table(_ headers: [String], _ rows: [[String]], right: Set<Int> = []) -> [String] {
        var widths = headers.map { $0.count }
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            var parts: [String] = []
            for (i, cell) in cells.enumerated() {
                let last = i == cells.count - 1
                if right.contains(i) {
                    parts.append(String(repeating: " ", count: widths[i] - cell.count) + cell)
                } else {
                    parts.append(last ? cell : pad(cell, widths[i]))
                }
            }
            return parts.joined(separator: "  ")
        }
        return [line(headers)] + rows.map(line)
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    static func integer(_ value: Double) -> String {
        value.isFinite && abs(value) < 1e18 ? String(Int64(value)) : String(value)
    }

    static func bytes(_ value: Double) -> String {
        if value < 1024 { return "\(integer(value)) B" }
        var v = value
        var unit = ""
        for u in ["KB", "MB", "GB", "TB"] {
            v /= 1024
            unit = u
            if v < 1024 { break }
        }
        return (v >= 100 ? integer(v.rounded()) : oneDecimal(v)) + " " + unit
    }

    static func oneDecimal(_ v: Double) -> String {
        let tenths = Int64((v * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    static func duration(_ ms: Double) -> String {
        var s = Int64(max(0, ms) / 1000)
        if s < 60 { return "\(s)s" }
        var m = s / 60
        s %= 60
        if m < 60 { return "\(m)m\(s)s" }
        var h = m / 60
        m %= 60
        if h < 24 { return "\(h)h\(m)m" }
        let d = h / 24
        h %= 24
        return "\(d)d\(h)h"
    }

    static func ago(_ value: JSON?, now: Double) -> String {
        guard let t = value?.numberValue else { return "–" }
        return now - t < 1000 ? "now" : duration(now - t) + " ago"
    }

    static func until(_ value: JSON?, now: Double) -> String {
        guard let t = value?.numberValue else { return "–" }
        return t <= now ? "due" : "in " + duration(t - now)
    }
}
