import Foundation

/// A script line that does not parse.
public struct LifecycleScriptError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// Parses `1.5s`, `500ms`, `2m`, `1h` or a bare number of seconds into milliseconds.
public func parseDuration(_ text: String) -> Int64? {
    let t = text.trimmingCharacters(in: .whitespaces)
    let units: [(String, Double)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)]
    for (suffix, factor) in units where t.hasSuffix(suffix) {
        guard let n = Double(t.dropLast(suffix.count)), n >= 0, n.isFinite else { return nil }
        return Int64((n * factor).rounded())
    }
    guard let n = Double(t), n >= 0, n.isFinite else { return nil }
    return Int64((n * 1000).rounded())
}

/// One app lifecycle command.
public enum LifecycleCommand: Equatable, Sendable {
    case foreground, background, inactive, terminate, kill, networkOff, networkOn, quit
    case sleep(milliseconds: Int64)

    public static let help = "foreground, background, inactive, terminate, kill, network-off, network-on, sleep <duration>, quit"

    /// Parses a command line (abbreviations: fg, bg, f, b, i, t, k, off, on, q).
    public static func parse(_ line: String) -> LifecycleCommand?? {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map { $0.lowercased() }
        guard let first = words.first else { return .some(nil) }  // blank line: nothing
        if first.hasPrefix("#") { return .some(nil) }
        switch first {
        case "foreground", "fg", "f", "active": return words.count == 1 ? .foreground : nil
        case "background", "bg", "b": return words.count == 1 ? .background : nil
        case "inactive", "i": return words.count == 1 ? .inactive : nil
        case "terminate", "t": return words.count == 1 ? .terminate : nil
        case "kill", "k": return words.count == 1 ? .kill : nil
        case "network-off", "off", "offline": return words.count == 1 ? .networkOff : nil
        case "network-on", "on", "online": return words.count == 1 ? .networkOn : nil
        case "quit", "q", "exit": return words.count == 1 ? .quit : nil
        case "sleep":
            guard words.count == 2, let ms = parseDuration(words[1]) else { return nil }
            return .sleep(milliseconds: ms)
        default: return nil
        }
    }

    public var name: String {
        switch self {
        case .foreground: "foreground"
        case .background: "background"
        case .inactive: "inactive"
        case .terminate: "terminate"
        case .kill: "kill"
        case .networkOff: "network-off"
        case .networkOn: "network-on"
        case .quit: "quit"
        case .sleep(let ms): "sleep \(LifecycleScript.seconds(ms))s"
        }
    }
}

/// A timed script: `+1.5s background` (after the previous line), `3s foreground` (from the start),
/// or a bare command (right after the previous line). `#` starts a comment.
public struct LifecycleScript: Equatable, Sendable {
    public init(steps: [(at: Int64, command: LifecycleCommand)]) { self.steps = steps }

    static func seconds(_ ms: Int64) -> String {
        let tenths = (ms + 50) / 100
        return "\(tenths / 10).\(tenths % 10)"
    }

    public var steps: [(at: Int64, command: LifecycleCommand)]

    public static func == (a: LifecycleScript, b: LifecycleScript) -> Bool {
        a.steps.count == b.steps.count && zip(a.steps, b.steps).allSatisfy { $0.at == $1.at && $0.command == $1.command }
    }

    public static func parse(_ text: String) throws(LifecycleScriptError) -> LifecycleScript {
        var steps: [(at: Int64, command: LifecycleCommand)] = []
        var clock: Int64 = 0
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = String(raw)
            if let hash = line.firstIndex(of: "#") { line = String(line[..<hash]) }
            line = line.trimmingCharacters(in: .whitespaces)
            if line.isEmpty { continue }
            var rest = line
            if let first = line.split(separator: " ").first, first.first == "+" || first.first?.isNumber == true {
                guard let ms = parseDuration(first.first == "+" ? String(first.dropFirst()) : String(first)) else {
                    throw LifecycleScriptError("script line \(number + 1): bad time \(first)")
                }
                clock = first.first == "+" ? clock + ms : ms
                rest = String(line.dropFirst(first.count))
            }
            guard let parsed = LifecycleCommand.parse(rest), let command = parsed else {
                throw LifecycleScriptError("script line \(number + 1): unknown command \(rest.trimmingCharacters(in: .whitespaces)) (use \(LifecycleCommand.help))")
            }
            if case .sleep(let ms) = command { clock += ms; continue }
            steps.append((at: clock, command: command))
        }
        return LifecycleScript(steps: steps)
    }
}

