import ArgumentParser
import Dispatch
import CEpoll
import Foundation
import Glibc
import PresenceClient
import Synchronization

/// `presence-bench epoll-ceiling`: how many messages/s the epoll transport can read on one core.
/// An in-process flood server (raw sockets, no lws, pinned to `--server-cpu`) writes push-sized
/// text frames round robin over every connection at `--rate` messages/s, one frame per `send` by
/// default; the client's loop thread (pinned to `--client-cpu`) reads them and scans each like a
/// push. The client's own CPU comes from its thread's clock, so the server thread is not counted.
struct EpollCeilingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "epoll-ceiling",
        abstract: "Ceiling of the epoll transport: an in-process flood server writes push-sized frames to N connections at a set rate; reports messages/s read and the client thread's CPU per message."
    )

    @Option(help: "Connections.") var connections = 2000
    @Option(help: "Messages/s the flood server offers in total (0: as fast as the sockets take them).") var rate: Double = 250_000
    @Option(help: "Frames per send on the server (1: each connection gets its pushes one by one, as from a server under fan-out).")
    var framesPerSend = 1
    @Option(help: "Measured seconds.") var duration: Double = 5
    @Option(help: "CPU for the flood server thread (-1: not pinned).") var serverCpu = 0
    @Option(help: "CPU for the client's loop thread (-1: not pinned).") var clientCpu = 1

    func run() throws {
        guard connections > 0, connections < 20_000, duration > 0, duration <= 600, rate >= 0, framesPerSend >= 1, framesPerSend <= 1000
        else { throw ValidationError("bad --connections/--duration/--rate/--frames-per-send") }
        let flood = try FloodServer(connections: connections, rate: rate, framesPerSend: framesPerSend)
        flood.start(cpu: serverCpu)
        defer { flood.stop() }
        let received = Atomic<Int>(0)
        let connected = Atomic<Int>(0)
        let checksum = Box(0)
        let client = EpollWebSocketClient(configuration: .init()) { _, event in
            switch event {
            case .connected: connected.add(1, ordering: .relaxed)
            case .message(_, let bytes):
                // What a fan-out watcher does with a push: find the user and the value's fields.
                let scan = FrameScan(bytes: bytes)
                if let u = scan.find("users/user") { checksum.value &+= scan.int(at: u) ?? 0 }
                for key in pushKeys {
                    if let i = scan.find(key) { checksum.value &+= scan.int(at: i) ?? 0 }
                }
                received.add(1, ordering: .relaxed)
            default: break
            }
        }
        try client.start()
        defer { client.shutdown() }
        let sem = DispatchSemaphore(value: 0)
        let url = WebSocketURL(host: "127.0.0.1", port: flood.port, pathAndQuery: "/flood")
        let cpu = clientCpu
        client.perform {
            if cpu >= 0 { pinCurrentThread(to: cpu) }
            for _ in 0..<connections { _ = client.connect(to: url, sourceAddress: nil) }
            sem.signal()
        }
        sem.wait()
        let deadline = monotonicMicros() + 60_000_000
        while connected.load(ordering: .relaxed) < connections, monotonicMicros() < deadline { usleep(10_000) }
        guard connected.load(ordering: .relaxed) == connections else {
            throw ValidationError("only \(connected.load(ordering: .relaxed)) of \(connections) connected")
        }
        sleepSeconds(1)  // the flood starts once all are accepted; let it reach its pace
        let start = Box((cpu: 0.0, count: 0, turns: 0, t: UInt64(0)))
        client.perform {
            start.value = (threadCPUSeconds(), received.load(ordering: .relaxed), client.counters.loopTurns, monotonicMicros())
            sem.signal()
        }
        sem.wait()
        sleepSeconds(duration)
        let end = Box((cpu: 0.0, count: 0, turns: 0, t: UInt64(0)))
        client.perform {
            end.value = (threadCPUSeconds(), received.load(ordering: .relaxed), client.counters.loopTurns, monotonicMicros())
            sem.signal()
        }
        sem.wait()
        let seconds = Double(end.value.t - start.value.t) / 1e6
        let messages = end.value.count - start.value.count
        let cpuSeconds = end.value.cpu - start.value.cpu
        printResult([
            ("scenario", .string("epoll-ceiling")),
            ("connections", .int(connections)),
            ("message_bytes", .int(FloodServer.payload.utf8.count)),
            ("offered_per_s", .double(rate)), ("frames_per_send", .int(framesPerSend)),
            ("measured_s", .double(seconds)),
            ("messages", .int(messages)),
            ("messages_per_s", .double(Double(messages) / seconds)),
            ("client_thread_cpu_s", .double(cpuSeconds)),
            ("client_thread_cpu_fraction_of_one_core", .double(cpuSeconds / seconds)),
            ("client_cpu_us_per_message", .double(messages > 0 ? cpuSeconds * 1e6 / Double(messages) : 0)),
            ("messages_per_s_per_client_core", .double(cpuSeconds > 0 ? Double(messages) / cpuSeconds : 0)),
            ("messages_per_loop_turn", .double(Double(messages) / Double(max(1, end.value.turns - start.value.turns)))),
            ("server_cpu", .int(serverCpu)), ("client_cpu", .int(clientCpu)),
        ])
    }
}

private let pushKeys: [StaticString] = [#""online":"#, #""lastSeen":"#, #""sentAt":"#, #""seq":"#]

/// CPU seconds of the calling thread.
func threadCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Pins the calling thread to one CPU.
func pinCurrentThread(to cpu: Int) {
    var mask = [UInt8](repeating: 0, count: 128)  // sizeof(cpu_set_t): 1024 CPUs
    guard cpu >= 0, cpu / 8 < mask.count else { return }
    mask[cpu / 8] |= UInt8(1 << (cpu % 8))
    if sched_setaffinity(0, mask.count, mask) != 0 { log("could not pin a thread to CPU \(cpu)") }
}

/// A WebSocket server that only floods: accepts `connections` upgrades (blocking, one thread),
/// then writes the same text frame to every socket as fast as each takes it.
private final class FloodServer: @unchecked Sendable {
    static let payload = #"{"t":"d","d":{"b":{"p":"users/user123/presence","d":{"lastSeen":1763812345678,"online":true,"sentAt":123456789012,"seq":42}},"a":"d"}}"#
    let connections: Int
    let rate: Double
    let framesPerSend: Int
    let port: Int
    private let listener: Int32
    private let stopRequested = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init(connections: Int, rate: Double, framesPerSend: Int) throws {
        self.connections = connections
        self.rate = rate
        self.framesPerSend = framesPerSend
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, len) == 0 && listen(listener, 4096) == 0 && getsockname(listener, $0, &len) == 0
            }
        }
        guard ok else { throw ValidationError("flood server: \(String(cString: strerror(errno)))") }
        port = Int(UInt16(bigEndian: a.sin_port))
    }

    func start(cpu: Int) {
        let t = Thread { [self] in
            if cpu >= 0 { pinCurrentThread(to: cpu) }
            run()
            done.signal()
        }
        t.start()
    }

    func stop() {
        stopRequested.store(true, ordering: .relaxed)
        shutdown(listener, Int32(SHUT_RDWR))
        done.wait()
        close(listener)
    }

    private func run() {
        var fds: [Int32] = []
        while fds.count < connections, !stopRequested.load(ordering: .relaxed) {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { if errno == EINTR { continue } else { break } }
            if upgrade(fd) { fds.append(fd) } else { close(fd) }
        }
        // Round robin, `framesPerSend` frames per send, paced to `rate` messages/s in total (0: as
        // fast as the sockets take them). A partial send resumes where it stopped, so frames stay whole.
        var frame: [UInt8] = [0x81, 126, UInt8(Self.payload.utf8.count >> 8), UInt8(Self.payload.utf8.count & 0xFF)]
        if Self.payload.utf8.count < 126 { frame = [0x81, UInt8(Self.payload.utf8.count)] }
        frame += Array(Self.payload.utf8)
        let batch = Array((0..<framesPerSend).map { _ in frame }.joined())
        let frameBytes = frame.count
        var offset = [Int](repeating: 0, count: fds.count)
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        let t0 = monotonicMicros()
        var sentBytes = 0
        var k = 0
        batch.withUnsafeBytes { b in
            while !stopRequested.load(ordering: .relaxed) {
                if rate > 0 {
                    let due = Int(rate * Double(monotonicMicros() - t0) / 1e6)
                    if sentBytes / frameBytes >= due { usleep(100); continue }
                }
                var wrote = false
                for _ in 0..<fds.count {
                    let n = send(fds[k], b.baseAddress! + offset[k], b.count - offset[k], Int32(MSG_NOSIGNAL))
                    if n > 0 {
                        offset[k] = (offset[k] + n) % b.count
                        sentBytes += n
                        wrote = true
                    }
                    k = (k + 1) % fds.count
                    if n > 0 { break }
                }
                if !wrote { usleep(50) }
            }
        }
        for fd in fds { close(fd) }
    }

    /// Reads the upgrade request and answers 101 with the right accept value.
    private func upgrade(_ fd: Int32) -> Bool {
        var request: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while request.count < 16_384 {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return false }
            request += chunk[0..<n]
            if request.withUnsafeBytes({ WebSocketHandshake.headLength($0) }) != nil { break }
        }
        let text = String(decoding: request, as: UTF8.self)
        guard let line = text.components(separatedBy: "\r\n").first(where: { $0.lowercased().hasPrefix("sec-websocket-key:") }) else {
            return false
        }
        let key = line.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces)
        let response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(WebSocketHandshake.accept(forKey: key))\r\n\r\n"
        return Array(response.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == response.utf8.count
    }
}
