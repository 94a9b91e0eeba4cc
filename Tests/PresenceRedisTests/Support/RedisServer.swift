import CHiredis
import Foundation
@testable import PresenceRedis

#if canImport(Glibc)
import Glibc
#endif

/// A real `redis-server` for one test: a free loopback port, a temporary directory, AOF with
/// `appendfsync always` (as the design runs it), killed when the test ends (`stop()`, or with
/// the test process: it runs under `setpriv --pdeathsig KILL`).
final class RedisServer {
    struct Missing: Error, CustomStringConvertible {
        var description: String {
            "redis-server is not installed (PATH=\(ProcessInfo.processInfo.environment["PATH"] ?? "")). "
                + "Install it with scripts/install-deps.sh (Debian: apt-get install redis-server), "
                + "or run the other tests with `swift test --skip RedisLive` "
                + "(or PRESENCE_SKIP_REDIS_TESTS=1, ignored when CI=true)."
        }
    }

    struct StartFailed: Error, CustomStringConvertible {
        let log: String
        var description: String { "redis-server did not become ready; its log:\n\(log)" }
    }

    /// The live suites run unless PRESENCE_SKIP_REDIS_TESTS=1 outside CI. A missing redis-server
    /// fails them with `Missing`, never skips them silently.
    static let liveTestsEnabled: Bool = {
        let environment = ProcessInfo.processInfo.environment
        return environment["PRESENCE_SKIP_REDIS_TESTS"] != "1" || environment["CI"] == "true"
    }()

    let port: Int
    let directory: String
    let extraArguments: [String]
    /// From `--requirepass` among the extra arguments.
    let password: String?
    private var process: Process?

    var endpoint: RedisEndpoint { try! RedisEndpoint(host: "127.0.0.1", port: port) }
    var pid: pid_t? { process.map { $0.processIdentifier } }

    init(port: Int? = nil, arguments: [String] = []) throws {
        self.port = port ?? RedisServer.freePort()
        directory = try RedisServer.makeDirectory()
        extraArguments = arguments
        password = arguments.firstIndex(of: "--requirepass").flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
        try launch()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    static func executable() throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") + ["/usr/bin", "/usr/sbin"] {
            let candidate = "\(dir)/redis-server"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw Missing()
    }

    /// Starts (or restarts, on the same port and directory: the AOF survives) and waits until
    /// Redis answers PING.
    func launch() throws {
        stop()
        let redis = try RedisServer.executable()
        let process = Process()
        var arguments = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                         "--appendfsync", "always", "--dir", directory, "--logfile", "redis.log", "--daemonize", "no"]
        arguments += extraArguments
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--pdeathsig", "KILL", "--", redis] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: redis)
            process.arguments = arguments
        }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if case .status("PONG")? = try? command(["PING"], password: password) { return }
            if !process.isRunning { break }
            usleep(20_000)
        }
        let log = (try? String(contentsOfFile: directory + "/redis.log", encoding: .utf8)) ?? "(no log)"
        stop()
        throw StartFailed(log: String(log.suffix(2000)))
    }

    /// SIGKILL, and wait until it is gone.
    func stop() {
        guard let process else { return }
        self.process = nil
        if process.isRunning {
            kill(process.processIdentifier, SIGCONT)
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
    }

    func signal(_ signal: Int32) {
        guard let pid else { return }
        kill(pid, signal)
    }

    /// One blocking command on a fresh connection (setup and inspection; never on the loop).
    /// Passes AUTH first when the server was started with `--requirepass`.
    func command(_ arguments: [String], password: String? = nil) throws -> RedisReply {
        guard let context = redisConnectWithTimeout("127.0.0.1", Int32(port), timeval(tv_sec: 2, tv_usec: 0)) else {
            throw RedisError.notSent("no context")
        }
        defer { redisFree(context) }
        if context.pointee.err != 0 {
            let text = withUnsafeBytes(of: &context.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            throw RedisError.notSent(text)
        }
        redisSetTimeout(context, timeval(tv_sec: 5, tv_usec: 0))
        if let password { _ = try run(context, ["AUTH", password]) }
        return try run(context, arguments)
    }

    private func run(_ context: UnsafeMutablePointer<redisContext>, _ arguments: [String]) throws -> RedisReply {
        let command = RedisCommand(arguments: arguments.map { Array($0.utf8) })
        let raw = command.withArgv { argc, argv, lengths in redisCommandArgv(context, argc, argv, lengths) }
        guard let raw else { throw RedisError.connectionLost("no reply") }
        defer { freeReplyObject(raw) }
        return RedisReply(raw.assumingMemoryBound(to: redisReply.self))
    }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = bind(fd, $0, length) }
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func makeDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "presence-redis-XXXXXX").utf8CString)
        guard let path = mkdtemp(&template) else { throw RedisError.notSent("mkdtemp failed") }
        return String(cString: path)
    }
}
