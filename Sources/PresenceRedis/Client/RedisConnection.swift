import CHiredis
import PresenceCore

/// One Redis connection on a libuv loop the caller owns (the server's loop, shared with lws).
///
/// Everything runs on the loop's thread: create, send, close and every callback. Commands are
/// pipelined (hiredis writes all commands of one loop iteration together). The connection
/// reconnects by itself with jittered backoff and never stalls the loop: a connect that does not
/// complete in time fails, a command that gets no reply by its deadline fails with `.timedOut`,
/// and a socket that holds a written command longer than the connection's command timeout (or
/// that command's own, if longer) is considered dead and replaced.
///
/// Commands sent while not connected wait for the connection until their own deadline, then fail
/// with `.notSent`. A blocking command (`XREAD BLOCK`) holds up every later command of its
/// connection, so give it a connection of its own and a timeout longer than the block.
///
/// Lifetime: the connection keeps itself alive (through its libuv handles) until `close()`, which
/// fails what is pending; the loop must then run once more for libuv to release the handles.
public final class RedisConnection {
    public struct Options: Sendable {
        /// TCP connect plus the handshake (AUTH, CLIENT SETNAME, PING).
        public var connectTimeoutMilliseconds: Int64
        /// Default per-command timeout (`--redis-timeout`), also how long a command waits for a
        /// connection, and how long Redis may hold a written command before the socket counts as dead.
        public var commandTimeoutMilliseconds: Int64
        public var backoff: Backoff.Policy
        /// Commands waiting for a connection beyond this fail at once (`.notSent`).
        public var maxQueuedCommands: Int
        /// `CLIENT SETNAME`, so operators see who is who in `CLIENT LIST`.
        public var clientName: String?
        public var password: String?

        public init(connectTimeoutMilliseconds: Int64 = 2000, commandTimeoutMilliseconds: Int64 = 2000,
                    backoff: Backoff.Policy = .redis(), maxQueuedCommands: Int = 100_000,
                    clientName: String? = nil, password: String? = nil) {
            self.connectTimeoutMilliseconds = max(1, connectTimeoutMilliseconds)
            self.commandTimeoutMilliseconds = max(1, commandTimeoutMilliseconds)
            self.backoff = backoff
            self.maxQueuedCommands = max(0, maxQueuedCommands)
            self.clientName = clientName
            self.password = password
        }
    }

    public enum Event: Sendable, Equatable {
        /// Connected and Redis answered PING (it is not loading its dataset); queued commands are sent.
        case connected
        /// A connect attempt failed (refused, timed out, Redis loading, AUTH refused).
        case failed(reason: String, retryInMilliseconds: Int64)
        /// A ready connection ended; commands in flight failed with `.connectionLost` or `.timedOut`.
        case lost(reason: String, retryInMilliseconds: Int64)
    }

    public enum State: Sendable, Equatable {
        case idle, connecting, ready, waiting, closed
    }

    public struct Statistics: Sendable, Equatable {
        public var commandsSent = 0
        public var replies = 0
        public var failedCommands = 0
        public var connects = 0
        public var failedAttempts = 0
        public var lostConnections = 0
        /// EVALSHA answered NOSCRIPT and the script was re-sent with EVAL.
        public var scriptReloads = 0
    }

    public let endpoint: RedisEndpoint
    public let options: Options
    public var onEvent: ((Event) -> Void)?
    public private(set) var state: State = .idle
    public private(set) var statistics = Statistics()
    /// On the connection's clock, while ready.
    public private(set) var readySince: Int64?
    /// Why the last attempt or connection ended (for operators and `.notSent` messages).
    public private(set) var lastFailure = "not connected yet"

    let loop: UnsafeMutablePointer<uv_loop_t>
    let clock: any RedisClock
    private let random: () -> Double
    var socket: RedisSocket?
    private var queue = CommandQueue()
    private var backoff: Backoff
    private var attemptDeadline: Int64 = 0
    private var retryAt: Int64 = 0
    private(set) var scripts: [RedisScript] = []
    private var lastID: UInt64 = 0
    private var timer: RedisTimer?
    private var timerDue: Int64?
    private var deferred: [() -> Void] = []

    public init(loop: UnsafeMutablePointer<uv_loop_t>, endpoint: RedisEndpoint, options: Options = .init(),
                clock: any RedisClock = RedisMonotonicClock(),
                random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        self.loop = loop
        self.endpoint = endpoint
        self.options = options
        self.clock = clock
        self.random = random
        backoff = Backoff(policy: options.backoff)
        // The timer holds the connection until close(): a running connection needs no other owner.
        timer = RedisTimer.make(loop: loop) { self.timerFired() }
    }

    /// Starts connecting (from the loop, not inside this call).
    public func start() {
        guard state == .idle else { return }
        state = .waiting
        retryAt = clock.milliseconds()
        arm(at: retryAt)
    }

    /// Sends `command`; `completion` runs on the loop, never inside this call.
    public func send(_ command: RedisCommand, timeoutMilliseconds: Int64? = nil,
                     completion: @escaping (Result<RedisReply, RedisError>) -> Void) {
        let now = clock.milliseconds()
        send(command, deadline: now + max(1, timeoutMilliseconds ?? options.commandTimeoutMilliseconds),
             completion: completion)
    }

    /// Sends the commands as one pipeline; `completion` gets their results in order.
    public func sendAll(_ commands: [RedisCommand], timeoutMilliseconds: Int64? = nil,
                        completion: @escaping ([Result<RedisReply, RedisError>]) -> Void) {
        guard !commands.isEmpty else {
            later { completion([]) }
            return
        }
        var results = [Result<RedisReply, RedisError>?](repeating: nil, count: commands.count)
        var remaining = commands.count
        for (index, command) in commands.enumerated() {
            send(command, timeoutMilliseconds: timeoutMilliseconds) { result in
                results[index] = result
                remaining -= 1
                if remaining == 0 { completion(results.map { $0! }) }
            }
        }
    }

    /// Scripts to load (`SCRIPT LOAD`) on every new connection, before queued commands are sent.
    public func register(_ script: RedisScript) {
        guard !scripts.contains(script) else { return }
        scripts.append(script)
        if state == .ready, let socket {
            write(internal: script.loadCommand, on: socket, deadline: clock.milliseconds() + options.commandTimeoutMilliseconds) { _ in }
        }
    }

    /// Fails what is pending (queued commands with `.notSent`, commands in flight with
    /// `.connectionLost`) and closes the socket. Completions of commands that were not in flight
    /// run inside this call; the others too, unless `close()` is called from a reply, in which
    /// case hiredis runs them as soon as that reply's callback returns.
    public func close() {
        guard state != .closed else { return }
        state = .closed
        onEvent = nil // no events after close; a handler that captured the connection lets go
        readySince = nil
        lastFailure = "the connection was closed"
        let socket = self.socket
        self.socket = nil
        for command in queue.removeAll() { fail(command, .notSent(lastFailure)) }
        if let socket { end(socket, reason: lastFailure) }
        runDeferred()
        timer?.close()
        timer = nil
    }

    func send(_ command: RedisCommand, deadline: Int64, completion: @escaping (Result<RedisReply, RedisError>) -> Void) {
        lastID += 1
        let patience = max(deadline - clock.milliseconds(), options.commandTimeoutMilliseconds)
        let pending = PendingCommand(id: lastID, command: command, deadline: deadline, patience: patience, completion: completion)
        if RedisConnection.unsupported.contains(command.name) {
            later { self.fail(pending, .notSent("\(command.name) is not supported (replies would not match commands)")) }
            return
        }
        switch state {
        case .closed:
            later { self.fail(pending, .notSent("the connection is closed")) }
        case .ready where socket != nil:
            write(pending, on: socket!)
        case .idle, .connecting, .waiting, .ready:
            guard queue.count < options.maxQueuedCommands else {
                later { self.fail(pending, .notSent("too many commands waiting for Redis (\(self.lastFailure))")) }
                return
            }
            queue.append(pending)
            arm(at: deadline)
        }
    }

    /// Pub/sub and MONITOR change how hiredis matches replies to callbacks.
    private static let unsupported: Set<String> = ["SUBSCRIBE", "PSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "MONITOR"]

    // MARK: - Connecting

    private func attempt() {
        let now = clock.milliseconds()
        guard let context = redisAsyncConnect(endpoint.host, Int32(endpoint.port)) else {
            return attemptFailed("hiredis could not allocate a context")
        }
        if context.pointee.err != 0 {
            let reason = RedisSocket.errorText(context) ?? "connect failed"
            redisAsyncFree(context)
            return attemptFailed(reason)
        }
        let socket = RedisSocket(connection: self)
        guard socket.attach(context, loop: loop) else {
            return attemptFailed("libuv could not watch the socket")
        }
        self.socket = socket
        state = .connecting
        attemptDeadline = now + options.connectTimeoutMilliseconds
        arm(at: attemptDeadline)
    }

    /// TCP is up: the handshake, then `ready`. Its commands go before anything queued.
    func tcpConnected(_ socket: RedisSocket) {
        guard self.socket === socket, state == .connecting else { return }
        if let password = options.password {
            write(internal: RedisCommand("AUTH", password), on: socket, deadline: attemptDeadline) { result in
                if case .success(.error(let message)) = result { self.end(socket, reason: "AUTH refused: \(message)") }
            }
        }
        if let name = options.clientName {
            write(internal: RedisCommand("CLIENT", "SETNAME", name), on: socket, deadline: attemptDeadline) { _ in }
        }
        write(internal: RedisCommand("PING"), on: socket, deadline: attemptDeadline) { result in
            switch result {
            case .success(.error(let message)): self.end(socket, reason: "Redis is not ready: \(message)")
            case .success: self.becameReady(socket)
            case .failure: break // the socket is ending; that path reports it
            }
        }
    }

    private func becameReady(_ socket: RedisSocket) {
        guard self.socket === socket, state == .connecting else { return }
        let now = clock.milliseconds()
        state = .ready
        readySince = now
        backoff.reset()
        statistics.connects += 1
        for script in scripts {
            write(internal: script.loadCommand, on: socket, deadline: now + options.commandTimeoutMilliseconds) { _ in }
        }
        while let command = queue.popFirst() { write(command, on: socket) }
        onEvent?(.connected)
    }

    private func attemptFailed(_ reason: String) {
        enterWaiting(reason: reason, wasReady: false)
    }

    /// The socket is gone (hiredis reported an error, or we ended it): wait, then try again.
    func socketEnded(_ socket: RedisSocket, reason: String) {
        guard !socket.ended else { return }
        socket.ended = true
        guard self.socket === socket else { return }
        self.socket = nil
        enterWaiting(reason: reason, wasReady: state == .ready)
    }

    private func enterWaiting(reason: String, wasReady: Bool) {
        guard state != .closed else { return }
        let delay = backoff.nextDelay(unit: random())
        lastFailure = reason
        readySince = nil
        state = .waiting
        retryAt = clock.milliseconds() + delay
        if wasReady { statistics.lostConnections += 1 } else { statistics.failedAttempts += 1 }
        arm(at: retryAt)
        onEvent?(wasReady ? .lost(reason: reason, retryInMilliseconds: delay)
                          : .failed(reason: reason, retryInMilliseconds: delay))
    }

    /// Ends `socket` ourselves (timeout, handshake refused, close). hiredis fails its commands in
    /// flight: now, or right after the reply callback we may be inside of.
    func end(_ socket: RedisSocket, reason: String) {
        guard !socket.ended, let context = socket.context else { return }
        socket.dropReason = reason
        socketEnded(socket, reason: reason)
        socket.ended = true
        redisAsyncFree(context)
    }

    // MARK: - Commands and replies

    private func write(_ pending: PendingCommand, on socket: RedisSocket) {
        guard !socket.ended, let context = socket.context else {
            return later { self.fail(pending, .notSent("the connection ended")) }
        }
        var command = pending
        let now = clock.milliseconds()
        guard command.deadline > now else {
            return later { self.fail(command, .notSent("no connection to Redis at \(self.endpoint) within the timeout")) }
        }
        command.stuckAt = now + command.patience
        let status = command.command.withArgv { argc, argv, lengths in
            redisAsyncCommandArgv(context, redisReplyArrived, UnsafeMutableRawPointer(bitPattern: UInt(command.id)),
                                  argc, argv, lengths)
        }
        guard status == REDIS_OK else {
            return later { self.fail(command, .notSent("hiredis refused the command")) }
        }
        statistics.commandsSent += 1
        socket.inflight.append(command)
        arm(at: command.deadline)
    }

    private func write(internal command: RedisCommand, on socket: RedisSocket, deadline: Int64,
                       completion: @escaping (Result<RedisReply, RedisError>) -> Void) {
        lastID += 1
        let patience = max(deadline - clock.milliseconds(), options.commandTimeoutMilliseconds)
        write(PendingCommand(id: lastID, command: command, deadline: deadline, patience: patience, completion: completion), on: socket)
    }

    func replyArrived(on socket: RedisSocket, id: UInt64, reply: RedisReply?, contextError: String?) {
        guard let command = socket.inflight.pop(id: id) else { return }
        if let reply {
            statistics.replies += 1
            if !command.answered { command.completion(.success(reply)) }
            return
        }
        // No reply: hiredis is failing everything in flight because the socket is going away.
        let reason = socket.dropReason ?? contextError ?? "Redis closed the connection"
        socketEnded(socket, reason: reason)
        if !command.answered { fail(command, .connectionLost(reason)) }
    }

    func countScriptReload() { statistics.scriptReloads += 1 }

    private func fail(_ command: PendingCommand, _ error: RedisError) {
        statistics.failedCommands += 1
        command.completion(.failure(error))
    }

    // MARK: - Time

    /// Runs `work` from the loop soon (completions never run inside the call that was given them).
    /// After `close()` there is no timer left: then it runs at once.
    func later(_ work: @escaping () -> Void) {
        guard timer != nil else { return work() }
        deferred.append(work)
        arm(at: clock.milliseconds())
    }

    private func runDeferred() {
        while !deferred.isEmpty {
            let work = deferred
            deferred.removeAll()
            for item in work { item() }
        }
    }

    /// Arms the timer for `due` unless it is already due earlier.
    private func arm(at due: Int64) {
        guard let timer else { return }
        if let current = timerDue, current <= due { return }
        timerDue = due
        timer.arm(afterMilliseconds: due - clock.milliseconds())
    }

    private func timerFired() {
        timerDue = nil
        runDeferred()
        let now = clock.milliseconds()
        for command in queue.removeExpired(now: now) {
            fail(command, .notSent("no connection to Redis at \(endpoint) within the timeout (\(lastFailure))"))
        }
        switch state {
        case .connecting where now >= attemptDeadline:
            if let socket { end(socket, reason: "connect to \(endpoint) timed out after \(options.connectTimeoutMilliseconds) ms") }
        case .ready:
            guard let socket else { break }
            for command in socket.inflight.answerExpired(now: now) { fail(command, .timedOut) }
            if socket.inflight.isStuck(now: now) {
                end(socket, reason: "no reply from Redis within the command timeout")
            }
        case .waiting where now >= retryAt:
            attempt()
        default:
            break
        }
        rearm()
    }

    private func rearm() {
        var due = queue.earliestDeadline
        func consider(_ time: Int64?) { if let time { due = min(due ?? time, time) } }
        switch state {
        case .connecting: consider(attemptDeadline)
        case .waiting: consider(retryAt)
        case .ready: consider(socket?.inflight.nextInFlightEvent)
        case .idle, .closed: break
        }
        if !deferred.isEmpty { consider(clock.milliseconds()) }
        if let due { arm(at: due) }
    }
}
