// swift-tools-version:6.0
import PackageDescription

/// One set of Swift settings for every target: Swift 6 language mode (complete strict concurrency).
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "presence",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "presence-server", targets: ["presence-server"]),
        .executable(name: "presence-client", targets: ["presence-client"]),
        .executable(name: "presence-bench", targets: ["presence-bench"]),
        .executable(name: "presence-redis-bench", targets: ["presence-redis-bench"]),
        // Fuzz targets (Sources/PresenceFuzzing). `make fuzz` builds it with libFuzzer and ASan;
        // a plain build replays inputs: `swift run presence-fuzz json FILE…`.
        .executable(name: "presence-fuzz", targets: ["presence-fuzz"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibWebSockets",
            path: "Sources/CLibWebSockets",
            pkgConfig: "libwebsockets",
            providers: [.apt(["libwebsockets-dev"])]
        ),
        .systemLibrary(
            name: "CLibUV",
            path: "Sources/CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]
        ),
        // hiredis 0.14.1 and libuv, with our own hiredis-on-libuv adapter (shim.h says why). No
        // pkgConfig: hiredis.pc only adds -D_FILE_OFFSET_BITS=64, which SwiftPM refuses with a warning.
        .systemLibrary(
            name: "CHiredis",
            path: "Sources/CHiredis",
            providers: [.apt(["libhiredis-dev", "libuv1-dev"])]
        ),
        // sys/epoll.h and sys/eventfd.h, which Swift's Glibc module does not export: presence-bench's
        // epoll WebSocket client (a load generator lean enough for 200k messages/s on one core).
        .systemLibrary(name: "CEpoll", path: "Sources/CEpoll"),
        // The pure engine: data tree, paths, server values, rules, listeners, onDisconnect.
        // No sockets, threads, clock reads or lws.
        .target(name: "PresenceCore", swiftSettings: strict),
        // Token verification for deployments: HS256 shared secrets and Firebase ID tokens (RS256).
        .target(
            name: "PresenceAuth",
            dependencies: [
                "PresenceCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: strict
        ),
        // The storage thread's cooperative yield inside SQLite's reads and writes (the header says why).
        .target(name: "CStorageYield", path: "Sources/CStorageYield", linkerSettings: [.linkedLibrary("sqlite3")]),
        // The embedded durable storage engine: SQLite through GRDB.
        .target(
            name: "PresenceStorage",
            dependencies: [
                "PresenceCore", "CStorageYield",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        // Redis for scale-out (docs/scaling.md): a client on the server's libuv loop (reconnects,
        // timeouts, scripts) and the design's Lua scripts behind a Swift API (log, leases, sessions,
        // snapshots).
        .target(
            name: "PresenceRedis",
            dependencies: ["CHiredis", "PresenceCore", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict
        ),
        // The v5 wire codec: frames, requests, pushes; core errors mapped to wire statuses.
        .target(name: "PresenceWire", dependencies: ["PresenceCore"], swiftSettings: strict),
        // A tap on what lws reads, for the one thing lws 4.1.6 does not expose: whether a client's
        // frame was masked (RFC 6455 §5.1). It defines recv and SSL_read for the process.
        .target(
            name: "CPresenceTap", path: "Sources/CPresenceTap",
            linkerSettings: [
                .linkedLibrary("dl"),
                // lws references them from its shared library: export them from the executable.
                .unsafeFlags(["-Xlinker", "--export-dynamic-symbol=recv", "-Xlinker", "--export-dynamic-symbol=SSL_read"]),
            ]
        ),
        // One event loop: a libuv loop the runtime owns, lws on it, timers, a cross-thread inbox,
        // signals, shutdown, on the caller's thread or one of its own. Shared by the server (and
        // any other event source on its thread), the client transport and the bench's echo server.
        .target(name: "PresenceLoop", dependencies: ["CLibWebSockets", "CLibUV"], swiftSettings: strict),
        // The thin I/O shell around libwebsockets.
        .target(
            name: "PresenceServer",
            dependencies: [
                "PresenceCore", "PresenceWire", "PresenceLoop", "PresenceRedis", "CLibWebSockets", "CLibUV", "CPresenceTap",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            // The operator dashboard, embedded at build time (AdminDashboard.swift says why).
            resources: [
                .embedInCode("Dashboard/index.html"), .embedInCode("Dashboard/dashboard.css"),
                .embedInCode("Dashboard/chart.js"), .embedInCode("Dashboard/dashboard.js"),
                .embedInCode("Dashboard/nodes.js"),
            ],
            swiftSettings: strict
        ),
        // Client library: an lws client transport and the connection state machine.
        .target(
            name: "PresenceClient",
            dependencies: ["PresenceCore", "PresenceWire", "PresenceLoop", "CLibWebSockets"],
            swiftSettings: strict
        ),
        .target(name: "PresenceTesting", dependencies: ["PresenceCore", "PresenceWire"], swiftSettings: strict),
        // What each fuzz target feeds and which invariants it checks; replayed by swift test.
        .target(
            name: "PresenceFuzzing",
            dependencies: [
                "PresenceCore", "PresenceWire", "PresenceAuth",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(name: "presence-fuzz", dependencies: ["PresenceFuzzing"], swiftSettings: strict),
        .executableTarget(
            name: "presence-server",
            dependencies: [
                "PresenceServer", "PresenceCore", "PresenceAuth", "PresenceStorage", "PresenceLoop",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "presence-client",
            dependencies: [
                "PresenceClient", "PresenceCore", "PresenceAuth", "PresenceLoop",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "presence-bench",
            dependencies: [
                "PresenceClient", "PresenceCore", "PresenceStorage", "PresenceLoop", "CLibWebSockets", "CEpoll",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // SEQ round trip and Redis CPU per write through PresenceRedis (bench/redis-seq.sh).
        .executableTarget(
            name: "presence-redis-bench",
            dependencies: [
                "PresenceRedis", "CHiredis",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "PresenceCoreTests", dependencies: ["PresenceCore", "PresenceTesting", "PresenceWire"],
                    resources: [.copy("Fixtures")], swiftSettings: strict),
        .testTarget(
            name: "PresenceAuthTests",
            dependencies: [
                "PresenceAuth", "PresenceCore", "PresenceTesting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "PresenceClientTests", dependencies: ["PresenceClient", "PresenceCore", "PresenceWire", "PresenceTesting"],
                    swiftSettings: strict),
        .testTarget(name: "PresenceStorageTests",
                    dependencies: ["PresenceStorage", "PresenceCore", "PresenceTesting",
                                   .product(name: "GRDBSQLite", package: "GRDB.swift")],
                    swiftSettings: strict),
        .testTarget(name: "PresenceFuzzingTests", dependencies: ["PresenceFuzzing"], swiftSettings: strict),
        .testTarget(name: "PresenceServerTests", dependencies: ["PresenceServer", "PresenceCore", "PresenceWire", "PresenceTesting", "CPresenceTap"],
                    swiftSettings: strict),
        .testTarget(name: "PresenceLoopTests", dependencies: ["PresenceLoop", "CLibWebSockets", "CLibUV", "CHiredis"], swiftSettings: strict),
        // Starts its own redis-server on free ports (docs/scaling.md, "Tests").
        .testTarget(name: "PresenceRedisTests", dependencies: ["PresenceRedis", "CHiredis"], swiftSettings: strict),
        .testTarget(name: "PresenceWireTests", dependencies: ["PresenceWire", "PresenceCore", "PresenceTesting"],
                    resources: [.copy("Fixtures")], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
