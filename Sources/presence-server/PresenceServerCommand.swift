import ArgumentParser
import Crypto
import Logging
import Metrics
import Prometheus
import PresenceAuth
import PresenceCore
import PresenceLoop
import PresenceServer
import PresenceStorage

#if canImport(Glibc)
import Glibc
#endif

struct PresenceServerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presence-server",
        abstract: "A real-time presence server speaking the Firebase Realtime Database wire protocol (v5).",
        discussion: """
            Point a Firebase app at it the way you point it at the database emulator:
              connectDatabaseEmulator(db, "127.0.0.1", 9000)
            WebSocket clients connect to ws://HOST:PORT/.ws?v=5&ns=NAMESPACE.

            Examples:
              presence-server                                   # 127.0.0.1:9000, shipped presence rules
              presence-server --port 9100 --rules rules/presence.rules.json
              presence-server --host 0.0.0.0 --insecure         # emulator auth on all interfaces (development only)
              presence-server rules check rules/presence.rules.json
              kill -HUP <pid>                                   # reload the rules file
            """,
        subcommands: [RulesCommand.self, LimitsCommand.self, ExportCommand.self, ImportCommand.self, RedisSeedCommand.self]
    )

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0 picks a free port and prints it).")
    var port = 9000

    @Option(help: "Security rules file ({\"rules\": {...}}), reloaded on SIGHUP. 'open' allows everything (tests only).")
    var rules = "rules/presence.rules.json"

    @Option(help: "Authentication mode: 'emulator' (owner is admin; unsigned JWTs are accepted), 'hs256' (tokens signed with --secret-file), or 'firebase' (Firebase ID tokens checked against --firebase-keys).")
    var auth = "emulator"

    @Option(help: "hs256: file holding the shared secret (at least 32 bytes). presence-client token mints tokens with it.")
    var secretFile: String?

    @Option(help: "firebase: the Firebase project id (tokens must have iss https://securetoken.google.com/<id> and aud <id>).")
    var projectID: String?

    @Option(help: "firebase: public keys, as Google's {kid: PEM certificate} JSON map or a JWKS file; SIGHUP reloads it (and --secret-file and --admin-token-file).")
    var firebaseKeys: String?

    @Option(help: "File holding the admin credential (at least 16 characters) for operators and the REST API in hs256 and firebase modes; in emulator mode the admin credential is 'owner'.")
    var adminTokenFile: String?

    @Flag(help: "Allow emulator auth on a non-loopback address. Anyone could then act as any user.")
    var insecure = false

    @Option(help: "Database used when a client sends no ns parameter.")
    var defaultNamespace = "default"

    @Option(help: "Largest client message in bytes (after joining fragments); larger ones close the connection with 1009.")
    var maxMessageBytes = ServerConfiguration().maxMessageBytes

    @Option(help: "Messages one WebSocket connection may send per second on average (a message counts one, plus one per 16 KiB, plus one per 100 µs the server spent handling it); over it (and --message-burst), the server stops reading from that connection until its budget refills, slowing the client without closing it. 0 = unlimited.")
    var maxMessagesPerSecond = 1_000

    @Option(help: "Messages one WebSocket connection may send at once before --max-messages-per-second applies (an SDK's burst on reconnect is a few hundred).")
    var messageBurst = 2_000

    @Option(help: "Bytes queued for one WebSocket connection or REST stream that does not read fast enough; over it, it is closed (1008).")
    var maxQueuedBytes = 16 * 1_048_576

    @Option(help: "Past saturation: writes read but not yet durable (acks waiting for a commit) over which the server stops reading from WebSocket connections that write, until half of them are durable; writers are slowed by TCP, never closed, and lose nothing. 0 = off.")
    var pushbackPendingWrites = ServerConfiguration().pushbackPendingWrites

    @Option(help: "Past saturation: bytes queued for sockets, all connections together, over which the server stops reading from WebSocket connections that write, until half have gone out; while storage keeps up, only from those whose writes queue at least half of an average write. 0 = off.")
    var pushbackQueuedBytes = ServerConfiguration().pushbackQueuedBytes

    @Option(help: "A connection whose queued frames have not moved for this many seconds is a reader that does not read: its bytes no longer count toward --pushback-queued-bytes (they are bounded by --max-queued-bytes), and push-back that has not drained after ten times as long closes the connections holding the most, so readers cannot hold writers paused.")
    var pushbackStallSeconds = Double(ServerConfiguration().pushbackStallMilliseconds) / 1000

    @OptionGroup var shedding: SheddingOptions

    @Option(help: "REST request bodies the server reads at once, in bytes, all connections together (reserved from Content-Length when a request's head arrives); a request that would go over is answered 503 with Retry-After.")
    var maxPendingBodyBytes = 32 * 1_048_576

    @Option(help: "Seconds a client has to send an HTTP request's head, then its body (plus 1 s per 64 KiB of it); later ones are dropped.")
    var httpTimeout = 10

    @Option(help: "Descriptors the server may hold (each connection is one): its soft `ulimit -n` is set to this, or to the hard limit when lower. libwebsockets 4.1 walks a table of this many entries for every connection it accepts or closes (about 10 µs at 20,000), so a limit far above the connections you serve costs CPU on every handshake.")
    var maxFds: UInt64 = 65_536

    @Option(help: "Seconds of silence before the server pings a connection.")
    var pingInterval = 20

    @Option(help: "Seconds with no frame and no pong before a connection is dropped and its onDisconnect ops run.")
    var idleTimeout = 60

    @Option(help: "Per-connection libwebsockets receive buffer in bytes (memory per idle connection).")
    var rxBuffer = 1024

    @Option(help: "Seconds a dropped connection's onDisconnect ops are held before they run; a client that comes back in time (ls=<session>, or a write to the same location) cancels them, so nobody flaps offline. 0 runs them at once, as Firebase does.")
    var disconnectGrace = 3.0

    @Option(help: "Seconds between keep-alive events on REST streams (text/event-stream).")
    var streamKeepAlive = 30

    @Option(help: "Directory of the durable database (presence.sqlite), and with --storage redis of the node's --cluster-state file; created if missing.")
    var dataDir = "data"

    @Option(help: "Storage engine: 'sqlite' (durable, in --data-dir), 'memory' (nothing survives a restart; tests only), or 'redis' (one node of a cluster on --redis; docs/scaling.md).")
    var storage = "sqlite"

    @OptionGroup(title: "Cluster (--storage redis)")
    var cluster: ClusterOptions

    @Option(help: "When a write is acknowledged: 'full' (fsynced: survives power loss), 'normal' (survives a process crash; a power loss may take the last ~2 s), 'off' (survives a process crash; a power loss may lose more and corrupt).")
    var durability = "normal"

    @Option(help: "Where a user's presence node is, with one $uid segment: the online-users index watches it.")
    var onlinePattern = "users/$uid/presence"

    @Option(help: "The boolean field of the presence node that means online.")
    var onlineField = "online"

    @Option(help: "Where `g` and REST GET read who is online now ({uid: {online, lastSeen}}); rules apply there as to data. Empty turns the index off.")
    var onlineLocation = "online-users"

    @Option(help: "Limits file: limited operations (reads of a location, e.g. refreshing online-users) and their tiers; reloaded on SIGHUP. 'none' limits nothing. When the default file is missing, nothing is limited.")
    var limits = LimitsFile.defaultPath

    @Option(help: "Append every limit check as one JSON line to this file (analytics); reopened on SIGHUP.")
    var limitEvents: String?

    @Option(help: "PEM certificate (chain) for TLS: the port then serves wss:// and https://. SIGHUP reloads it.")
    var tlsCert: String?

    @Option(help: "PEM private key of --tls-cert.")
    var tlsKey: String?

    @Option(help: "WebSocket connections one remote address may hold (0 = unlimited). Default: unlimited on loopback, 1000 otherwise.")
    var maxConnectionsPerAddress: Int?

    @Option(help: "New WebSocket connections per second from one remote address (0 = unlimited). Default: unlimited on loopback, 50 otherwise.")
    var maxConnectionRate: Int?

    @Option(help: "New connections (from any address) the server accepts in one turn of its loop; the rest wait in the kernel's queue for the next turns, so a connection storm's handshakes go between other clients' messages (0 = as many as are waiting).")
    var maxAcceptsPerTurn = ServerConfiguration().maxAcceptsPerTurn

    @Option(help: "Comma-separated addresses of reverse proxies (e.g. 127.0.0.1): from them, X-Forwarded-For names the client for the per-address limits, logs and operators. With it, the per-address limits apply on loopback too.")
    var trustedProxies = ""

    var trustedProxySet: Set<String> {
        Set(trustedProxies.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            .map(LWSServer.plainAddress))
    }

    /// The per-address limits are off on loopback, unless clients arrive through a trusted proxy.
    var limitsExempt: Bool { Self.isLoopback(host) && trustedProxySet.isEmpty }

    @Option(help: "Listens one connection may hold at once; past it a listen is refused with too_big (logged once per connection).")
    var maxListensPerConnection = EngineLimits.default.maxListensPerConnection

    @Option(help: "Distinct queries (tagged listens with orderBy, limit, startAt, ...) one connection may hold at one location; past it such a listen is refused with too_big. A write there computes and sends each of them, so this bounds what one write costs per connection.")
    var maxQueriesPerLocation = EngineLimits.default.maxQueriesPerLocation

    @Option(help: "onDisconnect ops one connection may hold; past it an onDisconnect write is refused with too_big.")
    var maxOndisconnectOps = EngineLimits.default.maxOnDisconnectOps

    @Option(help: "Total size in bytes (as JSON) of the values of one connection's onDisconnect ops.")
    var maxOndisconnectBytes = EngineLimits.default.maxOnDisconnectBytes

    @Option(help: "Largest answer to one read (g, a listen's initial data, REST GET, a stream's first event), in bytes as JSON; a larger one is refused with too_big (REST 413) saying to read it in parts (a query with a limit, or REST shallow=true).")
    var maxReadBytes = EngineLimits.default.maxReadBytes

    @Option(help: "Most data, in bytes as JSON, one hash may cover: a transaction (p with h), a REST if-match write or an ETag (X-Firebase-ETag, If-None-Match) hashes the whole value at its location at once; past this it is refused with too_big (REST 413), and a REST write's answer carries no ETag.")
    var maxHashBytes = EngineLimits.default.maxHashBytes

    @Option(help: "Namespaces that may hold data at once; a write that would give data to one more is refused with too_big. Namespaces with no data, connection or held op are released from memory.")
    var maxNamespaces = EngineLimits.default.maxNamespaces

    @Option(help: "A g, a listen's initial data, a REST GET or a stream's first event, of a location whose data passes this many bytes (as JSON), is windowed and serialized in slices (--slice-microseconds) between other clients' messages, then sent a piece at a time, rather than at once (--max-read-bytes is checked on its text: too_big, REST 413); 0 answers every read at once.")
    var sliceReadsOver = EngineLimits.serverSliceReadsOver

    @Option(help: "Loop time, in microseconds, that one client may hold the loop at once: all reads in slices (--slice-reads-over) together in one turn of the loop, before the loop is left idle as long, and one WebSocket connection's messages in one turn (past it the connection is read again when the turn ends): about the most a big read or a batch of costly messages adds to another client's wait.")
    var sliceMicroseconds = ServerConfiguration().sliceMicroseconds

    var engineLimits: EngineLimits {
        EngineLimits(maxListensPerConnection: maxListensPerConnection, maxQueriesPerLocation: maxQueriesPerLocation,
                     maxOnDisconnectOps: maxOndisconnectOps,
                     maxOnDisconnectBytes: maxOndisconnectBytes, maxReadBytes: maxReadBytes, maxHashBytes: maxHashBytes,
                     maxNamespaces: maxNamespaces, sliceReadsOver: sliceReadsOver)
    }

    @Option(help: "A JSON configuration file whose keys are these flags' long names without the dashes (e.g. {\"port\": 9000, \"data-dir\": \"/var/lib/presence\"}); flags given on the command line override it.")
    var config: String?

    @Flag(help: "Print the effective configuration as JSON (secrets redacted) and exit.")
    var printConfig = false

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        switch auth {
        case "emulator": break
        case "hs256":
            guard secretFile != nil else { throw ValidationError("--auth hs256 needs --secret-file") }
        case "firebase":
            guard projectID != nil, firebaseKeys != nil else { throw ValidationError("--auth firebase needs --project-id and --firebase-keys") }
        default:
            throw ValidationError("--auth must be emulator, hs256 or firebase")
        }
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        guard pingInterval > 0, idleTimeout > pingInterval else {
            throw ValidationError("--idle-timeout must be greater than --ping-interval, both positive")
        }
        guard maxMessageBytes >= 16_384 else { throw ValidationError("--max-message-bytes must be at least 16384") }
        guard maxPendingBodyBytes >= maxMessageBytes else {
            throw ValidationError("--max-pending-body-bytes must be at least --max-message-bytes (one whole body)")
        }
        guard maxMessagesPerSecond >= 0, messageBurst >= 1 else {
            throw ValidationError("--max-messages-per-second must be 0 or more and --message-burst at least 1")
        }
        guard maxQueuedBytes >= maxMessageBytes else {
            throw ValidationError("--max-queued-bytes must be at least --max-message-bytes (one whole message)")
        }
        guard pushbackPendingWrites >= 0, pushbackQueuedBytes >= 0 else {
            throw ValidationError("--pushback-pending-writes and --pushback-queued-bytes must be 0 (off) or more")
        }
        guard (0.01...3600).contains(pushbackStallSeconds) else { throw ValidationError("--pushback-stall-seconds must be between 0.01 and 3600") }
        guard (1...3600).contains(httpTimeout) else { throw ValidationError("--http-timeout must be between 1 and 3600 seconds") }
        guard (Self.minimumFileDescriptors...(1 << 24)).contains(maxFds) else {
            throw ValidationError("--max-fds must be between \(Self.minimumFileDescriptors) and 16777216")
        }
        if !onlineLocation.isEmpty {
            do { _ = try OnlineIndexConfiguration(pattern: onlinePattern, field: onlineField, location: onlineLocation) } catch {
                throw ValidationError("--online-pattern/--online-field/--online-location: \(error)")
            }
        }
        guard ["sqlite", "memory", "redis"].contains(storage) else { throw ValidationError("--storage must be sqlite, memory or redis") }
        if storage == "redis" {
            do { _ = try clusterSettings() } catch { throw ValidationError(error.description) }
        }
        guard SQLiteStorage.Durability(rawValue: durability) != nil else { throw ValidationError("--durability must be full, normal or off") }
        guard streamKeepAlive > 0 else { throw ValidationError("--stream-keep-alive must be positive") }
        guard rxBuffer >= 128 else { throw ValidationError("--rx-buffer must be at least 128") }
        guard disconnectGrace >= 0, disconnectGrace <= 3600 else { throw ValidationError("--disconnect-grace must be between 0 and 3600 seconds") }
        if auth == "emulator" && !insecure && !Self.isLoopback(host) {
            throw ValidationError("refusing emulator auth on \(host): anyone could act as any user. Bind 127.0.0.1, or pass --insecure for development")
        }
        if auth != "emulator" && adminTokenFile == nil && !insecure && !Self.isLoopback(host) {
            throw ValidationError("--admin-token-file is required on \(host): without it nobody can operate the server or use REST as admin. Pass --insecure to run without one")
        }
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        for (flag, value, upper) in [("--max-listens-per-connection", maxListensPerConnection, 10_000_000),
                                     ("--max-queries-per-location", maxQueriesPerLocation, 10_000_000),
                                     ("--max-ondisconnect-ops", maxOndisconnectOps, 10_000_000),
                                     ("--max-ondisconnect-bytes", maxOndisconnectBytes, 1 << 30),
                                     ("--max-read-bytes", maxReadBytes, 1 << 30),
                                     ("--max-hash-bytes", maxHashBytes, 1 << 30),
                                     ("--max-namespaces", maxNamespaces, 10_000_000)] where value < 1 || value > upper {
            throw ValidationError("\(flag) must be between 1 and \(upper)")
        }
        guard (10...100_000).contains(sliceMicroseconds) else { throw ValidationError("--slice-microseconds must be between 10 and 100000") }
        if sliceReadsOver < 0 || sliceReadsOver > 1 << 30 { throw ValidationError("--slice-reads-over must be between 0 and \(1 << 30)") }
        if let value = maxConnectionsPerAddress, value < 0 { throw ValidationError("--max-connections-per-address must be 0 or more") }
        if let value = maxConnectionRate, value < 0 { throw ValidationError("--max-connection-rate must be 0 or more") }
        guard (0...10_000).contains(maxAcceptsPerTurn) else { throw ValidationError("--max-accepts-per-turn must be between 0 and 10000") }
    }

    func clusterSettings() throws(ClusterSettings.Invalid) -> ClusterSettings {
        try cluster.settings(port: port, disconnectGrace: disconnectGrace, dataDir: dataDir)
    }

    static func openStorage(dataDir: String, durability: String) throws -> SQLiteStorage {
        mkdir(dataDir, 0o700)
        return try SQLiteStorage(directory: dataDir, options: .init(durability: SQLiteStorage.Durability(rawValue: durability) ?? .normal))
    }

    /// The token verifier for `--auth`, with its keys and the admin credential loaded.
    func makeVerifier() throws -> any TokenVerifier {
        let admin = try adminTokenFile.map { try AdminToken.load(fromFile: $0) }
        switch auth {
        case "hs256":
            return HS256TokenVerifier(secret: try HS256Secret.load(fromFile: secretFile!), adminToken: admin)
        case "firebase":
            return try FirebaseTokenVerifier(projectID: projectID!, keys: try FirebaseKeys.load(fromFile: firebaseKeys!), adminToken: admin)
        default:
            return EmulatorTokenVerifier()
        }
    }

    /// The settings in force, as `--config` would take them (file paths only: no secret is inlined).
    func effectiveConfiguration() -> JSON {
        func optional(_ value: String?) -> JSON { value.map { .string($0) } ?? .null }
        return .object([
            ("host", .string(host)), ("port", .number(Double(port))), ("rules", .string(rules)), ("auth", .string(auth)),
            ("secret-file", optional(secretFile)), ("project-id", optional(projectID)), ("firebase-keys", optional(firebaseKeys)),
            ("admin-token-file", optional(adminTokenFile)), ("insecure", .bool(insecure)),
            ("default-namespace", .string(defaultNamespace)), ("max-message-bytes", .number(Double(maxMessageBytes))),
            ("max-pending-body-bytes", .number(Double(maxPendingBodyBytes))), ("http-timeout", .number(Double(httpTimeout))),
            ("max-fds", .number(Double(maxFds))),
            ("max-messages-per-second", .number(Double(maxMessagesPerSecond))), ("message-burst", .number(Double(messageBurst))),
            ("max-queued-bytes", .number(Double(maxQueuedBytes))),
            ("pushback-pending-writes", .number(Double(pushbackPendingWrites))),
            ("pushback-queued-bytes", .number(Double(pushbackQueuedBytes))), ("pushback-stall-seconds", .number(pushbackStallSeconds)),
            ("ping-interval", .number(Double(pingInterval))), ("idle-timeout", .number(Double(idleTimeout))),
            ("rx-buffer", .number(Double(rxBuffer))), ("disconnect-grace", .number(disconnectGrace)),
            ("stream-keep-alive", .number(Double(streamKeepAlive))), ("data-dir", .string(dataDir)),
            ("storage", .string(storage)), ("durability", .string(durability)),
            ("tls-cert", optional(tlsCert)), ("tls-key", optional(tlsKey)),
            ("max-connections-per-address", .number(Double(maxConnectionsPerAddress ?? (limitsExempt ? 0 : 1000)))),
            ("max-connection-rate", .number(Double(maxConnectionRate ?? (limitsExempt ? 0 : 50)))),
            ("max-accepts-per-turn", .number(Double(maxAcceptsPerTurn))),
            ("trusted-proxies", .string(trustedProxies)),
            ("online-pattern", .string(onlinePattern)), ("online-field", .string(onlineField)),
            ("online-location", .string(onlineLocation)),
            ("limits", .string(limits)), ("limit-events", optional(limitEvents)),
            ("max-listens-per-connection", .number(Double(maxListensPerConnection))),
            ("max-queries-per-location", .number(Double(maxQueriesPerLocation))),
            ("max-ondisconnect-ops", .number(Double(maxOndisconnectOps))),
            ("max-ondisconnect-bytes", .number(Double(maxOndisconnectBytes))),
            ("max-read-bytes", .number(Double(maxReadBytes))), ("max-hash-bytes", .number(Double(maxHashBytes))),
            ("max-namespaces", .number(Double(maxNamespaces))),
            ("slice-reads-over", .number(Double(sliceReadsOver))), ("slice-microseconds", .number(Double(sliceMicroseconds))),
            ("log-level", .string(logLevel)),
        ] + shedding.effectiveConfiguration + cluster.effectiveConfiguration(port: port, dataDir: dataDir))
    }

    /// Measured: the server starts with 16 (SQLite, no Redis) and aborts or cannot listen below;
    /// 32 leaves room for Redis's two connections and a few clients.
    static let minimumFileDescriptors: UInt64 = 32

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host.hasPrefix("127.") || host == "::1"
    }

    func run() throws {
        if printConfig {
            print(JSONWriter.pretty(effectiveConfiguration()))
            return
        }
        let level = Logger.Level(rawValue: logLevel)!
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "presence-server")
        // Each connection is a descriptor: take --max-fds (or what the hard limit allows), and
        // refuse to start below what the loop, storage and listening socket need (libuv and lws
        // abort there). lws sizes its fd table from this limit and walks it per connection.
        if let shortfall = FileDescriptorLimit.shortfall(
            minimum: Self.minimumFileDescriptors, program: "presence-server",
            needs: "its event loop, storage files, listening socket and a few connections; one more per connection",
            target: maxFds) {
            logger.critical("\(shortfall)")
            throw ExitCode(1)
        }
        FileDescriptorLimit.reserveTable()
        let metricsRegistry = PrometheusCollectorRegistry()
        var metricsFactory = PrometheusMetricsFactory(registry: metricsRegistry)
        // Latencies here are mostly well under a millisecond: buckets from 100 µs.
        metricsFactory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .seconds(1),
        ]
        MetricsSystem.bootstrap(metricsFactory)
        let policy: any AccessPolicy
        let limitSet: LimitSet?
        do {
            policy = try RulesFile.loadPolicy(rules, logger: logger)
            limitSet = try LimitsFile.load(limits, logger: logger)
        } catch {
            logger.critical("\(error)")
            throw ExitCode(1)
        }

        var configuration = ServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.maxMessageBytes = maxMessageBytes
        configuration.maxPendingBodyBytes = maxPendingBodyBytes
        configuration.httpTimeoutSeconds = httpTimeout
        configuration.maxMessagesPerSecond = maxMessagesPerSecond
        configuration.messageBurst = messageBurst
        configuration.maxQueuedBytes = maxQueuedBytes
        configuration.pushbackPendingWrites = pushbackPendingWrites
        configuration.pushbackQueuedBytes = pushbackQueuedBytes
        configuration.pushbackStallMilliseconds = Int64((pushbackStallSeconds * 1000).rounded())
        shedding.apply(to: &configuration)
        configuration.sliceMicroseconds = sliceMicroseconds
        configuration.pingIntervalSeconds = pingInterval
        configuration.idleTimeoutSeconds = idleTimeout
        configuration.rxBufferBytes = rxBuffer
        configuration.defaultNamespace = defaultNamespace
        configuration.streamKeepAliveSeconds = streamKeepAlive
        configuration.tlsCertificatePath = tlsCert
        configuration.tlsKeyPath = tlsKey
        configuration.limitEventLogPath = limitEvents
        configuration.maxConnectionsPerAddress = maxConnectionsPerAddress ?? (limitsExempt ? 0 : 1000)
        configuration.maxConnectionRatePerAddress = maxConnectionRate ?? (limitsExempt ? 0 : 50)
        configuration.maxAcceptsPerTurn = maxAcceptsPerTurn
        configuration.trustedProxies = trustedProxySet

        let verifier: any TokenVerifier
        do {
            verifier = try makeVerifier()
        } catch {
            logger.critical("\(error)")
            throw ExitCode(1)
        }
        var clusterSettings: ClusterSettings?
        if storage == "redis" {
            let settings: ClusterSettings
            do {
                settings = try self.clusterSettings()
            } catch {
                logger.critical("\(error)")
                throw ExitCode(1)
            }
            if let failure = settings.prepareClusterState() {
                logger.critical("\(failure): a cluster node must remember the histories it serves. Fix the directory, or give --data-dir or --cluster-state FILE (--cluster-state none is unsafe)")
                throw ExitCode(1)
            }
            clusterSettings = settings
        }
        let engine = Engine(
            configuration: Engine.Configuration(
                defaultNamespace: defaultNamespace,
                disconnectGraceMilliseconds: Int64((disconnectGrace * 1000).rounded()),
                hashDigest: { Array(Insecure.SHA1.hash(data: $0)) },
                onlineIndex: onlineLocation.isEmpty ? nil
                    : try? OnlineIndexConfiguration(pattern: onlinePattern, field: onlineField, location: onlineLocation),
                limits: engineLimits,
                replication: clusterSettings.map {
                    // --release-idle: an unused namespace with data is let go after it, then its lease.
                    ReplicationConfiguration(node: $0.nodeID, unfollowIdleMilliseconds: Int64((cluster.releaseIdle * 1000).rounded()))
                }),
            verifier: verifier,
            policy: policy,
            makeSessionID: PresenceServer.makeSessionID
        )
        engine.setLimits(limitSet)
        var store: (any StorageEngine)?
        if storage == "sqlite" {
            do {
                store = try Self.openStorage(dataDir: dataDir, durability: durability)
                let state = try store!.load()
                engine.enableJournal()
                let started = wallClockMilliseconds()
                for failure in engine.restore(state, now: started) {
                    logger.error("stored rules of namespace \(failure.namespace) do not load; the default rules apply: \(failure.error)")
                }
                logger.info("storage opened", metadata: [
                    "dir": "\(dataDir)", "durability": "\(durability)", "namespaces": "\(state.namespaces.count)",
                    "sessions_held": "\(engine.heldSessionCount)",
                    "last_heartbeat": "\(state.lastHeartbeat.map(String.init) ?? "none")",
                ])
            } catch {
                logger.critical("cannot open storage in \(dataDir): \(error)")
                throw ExitCode(1)
            }
        } else if let clusterSettings {
            logger.info("storage: redis at \(clusterSettings.redisAddress), node \(clusterSettings.nodeID)")
        } else {
            logger.warning("storage: memory — nothing survives a restart")
        }
        let rulesPath = rules
        let reload: (@Sendable () throws -> any AccessPolicy)? = rules == "open" ? nil : { @Sendable in
            try RulesFile.loadPolicy(rulesPath, logger: Logger(label: "presence-server"))
        }
        let limitsPath = limits
        let reloadLimits: (@Sendable () throws -> LimitSet?)? = limits == "none" ? nil : { @Sendable in
            try LimitsFile.load(limitsPath, logger: Logger(label: "presence-server"))
        }
        let command = self
        let server: LWSServer
        do {
            server = try LWSServer(configuration: configuration, engine: engine, logger: logger, reloadRules: reload,
                                   reloadLimits: reloadLimits, reloadVerifier: { @Sendable in try command.makeVerifier() },
                                   storage: store, cluster: clusterSettings, metricsRegistry: metricsRegistry)
            try server.start()
        } catch {
            logger.critical("\(error)")
            throw ExitCode(1)
        }
        // Tests and scripts read this line to learn the port.
        print("presence-server listening on \(host):\(server.boundPort)")
        fflush(nil)
        logger.info("listening", metadata: ["host": "\(host)", "port": "\(server.boundPort)", "rules": "\(rules)", "auth": "\(auth)"])
        server.run()
        // EX_TEMPFAIL: a supervisor with Restart=on-failure starts the node again.
        if server.stoppedFenced { throw ExitCode(75) }
    }
}
