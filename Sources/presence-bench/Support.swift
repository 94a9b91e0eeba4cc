import CEpoll
import Foundation
import Glibc
import PresenceClient
import PresenceCore

// MARK: JSON output (ordered keys, no Foundation encoder so the field order is stable)

/// A JSON value for result reports.
enum ReportJSON: Sendable {
    case int(Int)
    case double(Double)
    case string(String)
    case bool(Bool)
    case null
    case array([ReportJSON])
    case object([(String, ReportJSON)])

    var text: String {
        switch self {
        case .int(let v): return String(v)
        case .double(let v):
            guard v.isFinite else { return "null" }
            return String(format: "%.3f", v)
        case .bool(let v): return v ? "true" : "false"
        case .null: return "null"
        case .string(let s): return ReportJSON.quote(s)
        case .array(let a): return "[" + a.map(\.text).joined(separator: ",") + "]"
        case .object(let o): return "{" + o.map { ReportJSON.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        }
    }

    static func quote(_ s: String) -> String {
        var out = ""
        JSONWriter.writeString(s, into: &out)
        return out
    }
}

/// Prints one JSON object on stdout and flushes.
func printResult(_ fields: [(String, ReportJSON)]) {
    print(ReportJSON.object(fields).text)
    fflush(nil)
}

/// Progress and diagnostics go to stderr so stdout stays one JSON object.
func log(_ message: String) {
    FileHandle.standardError.write(Data(("[presence-bench] " + message + "\n").utf8))
}

// MARK: latency statistics

/// Collects latency samples (µs) and reports percentiles.
struct LatencySamples {
    private(set) var values: [UInt32] = []
    private var sorted = true
    var cap: Int

    init(reserve: Int = 1 << 16, cap: Int = 50_000_000) {
        values.reserveCapacity(reserve)
        self.cap = cap
    }

    mutating func add(_ micros: UInt64) {
        guard values.count < cap else { return }
        values.append(UInt32(clamping: micros))
        sorted = false
    }

    var count: Int { values.count }

    mutating func percentile(_ p: Double) -> Double? {
        guard !values.isEmpty else { return nil }
        if !sorted { values.sort(); sorted = true }
        let idx = min(values.count - 1, max(0, Int((p * Double(values.count)).rounded(.up)) - 1))
        return Double(values[idx])
    }

    /// `{count, p50_us, p99_us, p999_us, max_us, mean_us}`.
    mutating func summary() -> ReportJSON {
        guard !values.isEmpty else { return .object([("count", .int(0))]) }
        let mean = Double(values.reduce(0) { $0 + UInt64($1) }) / Double(values.count)
        return .object([
            ("count", .int(values.count)),
            ("p50_us", .double(percentile(0.50)!)),
            ("p90_us", .double(percentile(0.90)!)),
            ("p99_us", .double(percentile(0.99)!)),
            ("p999_us", .double(percentile(0.999)!)),
            ("max_us", .double(percentile(1.0)!)),
            ("mean_us", .double(mean)),
        ])
    }
}

// MARK: process measurements

/// This process's user and system CPU seconds (getrusage).
func selfCPU() -> (user: Double, system: Double) {
    var ru = rusage()
    getrusage(RUSAGE_SELF.rawValue, &ru)
    let u = Double(ru.ru_utime.tv_sec) + Double(ru.ru_utime.tv_usec) / 1e6
    let s = Double(ru.ru_stime.tv_sec) + Double(ru.ru_stime.tv_usec) / 1e6
    return (u, s)
}

/// `VmRSS` of a process in bytes, from /proc/PID/status.
func processRSS(pid: Int32) -> Int? {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in s.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let parts = line.split(separator: " ", omittingEmptySubsequences: true)
        if parts.count >= 2, let kb = Int(parts[1]) { return kb * 1024 }
    }
    return nil
}

/// User + system CPU seconds of a process, from /proc/PID/stat.
func processCPU(pid: Int32) -> Double? {
    processCPUSplit(pid: pid).map { $0.user + $0.system }
}

/// User and system CPU seconds of a process (all its threads), from /proc/PID/stat.
func processCPUSplit(pid: Int32) -> (user: Double, system: Double)? {
    guard let s = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = s.lastIndex(of: ")") else { return nil }
    let fields = s[s.index(after: close)...].split(separator: " ")
    // After ")": state(0) ppid(1) ... utime is field 14 overall → index 11 here, stime index 12.
    guard fields.count > 12, let ut = Double(fields[11]), let st = Double(fields[12]) else { return nil }
    let hz = Double(sysconf(Int32(_SC_CLK_TCK)))
    return (ut / hz, st / hz)
}

/// Sleeps on the calling thread.
func sleepSeconds(_ s: Double) {
    guard s > 0 else { return }
    usleep(UInt32(min(s, 4000) * 1_000_000))
}

func round3(_ v: Double) -> Double { (v * 1000).rounded() / 1000 }

// MARK: wire helpers

enum Wire {
    static func base64url(_ s: String) -> String {
        Data(s.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private static let jwtHeader = base64url(#"{"alg":"none","type":"JWT"}"#)

    /// An unsigned JWT (alg none, trailing dot) for `uid`, as the emulator-mode JS SDK sends.
    static func unsignedJWT(uid: String) -> String {
        let claims = #"{"sub":"\#(uid)","user_id":"\#(uid)","iat":0,"exp":9999999999,"firebase":{"sign_in_provider":"custom","identities":{}}}"#
        return jwtHeader + "." + base64url(claims) + "."
    }

    static func auth(r: Int, uid: String) -> String {
        #"{"t":"d","d":{"r":\#(r),"a":"auth","b":{"cred":"\#(unsignedJWT(uid: uid))"}}}"#
    }

    static func listen(r: Int, path: String) -> String {
        #"{"t":"d","d":{"r":\#(r),"a":"q","b":{"p":"\#(path)","h":""}}}"#
    }

    static func put(r: Int, path: String, valueJSON: String) -> String {
        #"{"t":"d","d":{"r":\#(r),"a":"p","b":{"p":"\#(path)","d":\#(valueJSON)}}}"#
    }

    static let ping = #"{"t":"c","d":{"t":"p","d":{}}}"#

    /// `ws://host:port` plus the SDK's `/.ws?v=5&ns=...` when the URL has no path of its own.
    static func endpoint(_ url: String, namespace: String) -> WebSocketURL? {
        guard var u = WebSocketURL(url) else { return nil }
        if u.pathAndQuery == "/" { u.pathAndQuery = "/.ws?v=5&ns=\(namespace)" }
        return u
    }
}

/// A minimal scanner for the server's replies: enough to find `r`, `s`, the push path and a few
/// flat fields without a full JSON parse on the hot path.
struct FrameScan {
    let bytes: UnsafeRawBufferPointer

    /// Position right after the first occurrence of `needle` at or after `from`, or nil.
    func find(_ needle: StaticString, from: Int = 0) -> Int? {
        find(UnsafeRawBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount), from: from)
    }

    func find(_ needle: [UInt8], from: Int = 0) -> Int? {
        needle.withUnsafeBytes { find($0, from: from) }
    }

    /// glibc's `memmem` (vectorised), so scanning a push for a few keys stays cheap at 200k pushes/s.
    func find(_ needle: UnsafeRawBufferPointer, from: Int = 0) -> Int? {
        guard let base = bytes.baseAddress, from >= 0, bytes.count - from >= needle.count, needle.count > 0 else { return nil }
        guard let hit = memmem(base + from, bytes.count - from, needle.baseAddress, needle.count) else { return nil }
        return UnsafeRawPointer(hit) - base + needle.count
    }

    /// Integer value starting at `i` (digits, optional minus).
    func int(at i: Int) -> Int? {
        var i = i
        var neg = false
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { neg = true; i += 1 }
        var v = 0
        var any = false
        while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 {
            v = v * 10 + Int(bytes[i] - 48)
            i += 1
            any = true
        }
        return any ? (neg ? -v : v) : nil
    }

    /// The string value starting at `i` (just after an opening quote), up to the next quote.
    func string(at i: Int) -> String? {
        var j = i
        while j < bytes.count, bytes[j] != UInt8(ascii: "\"") { j += 1 }
        guard j < bytes.count else { return nil }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[i..<j]), as: UTF8.self)
    }

    /// `"r":N` of a response, if the frame is a data response.
    var requestNumber: Int? {
        guard let i = find(#""r":"#) else { return nil }
        return int(at: i)
    }

    /// `"s":"..."` status of a response.
    var status: String? {
        guard let i = find(#""s":""#) else { return nil }
        return string(at: i)
    }

    /// True for a `{"t":"d","d":{"a":"d",...` push.
    var isDataPush: Bool { find(#""a":"d""#) != nil || find(#""a":"m""#) != nil }

    /// The push path `"p":"..."`.
    var pushPath: String? {
        guard let i = find(#""p":""#) else { return nil }
        return string(at: i)
    }
}

/// A mutable box handed to the service thread and read back after a semaphore hand-off.
final class Box<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

extension WebSocketClientConfiguration {
    /// The same configuration asking for a WebSocket subprotocol (`mqtt` for Mosquitto).
    func with(subprotocol: String?) -> WebSocketClientConfiguration {
        var copy = self
        copy.subprotocol = subprotocol
        return copy
    }
}
