import ArgumentParser

@main
struct PresenceBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presence-bench",
        abstract: "Load generator for presence-server (Firebase RTDB wire protocol v5 over WebSockets).",
        subcommands: [ConnectionsCommand.self, FanoutCommand.self, MQTTFanoutCommand.self, ChurnCommand.self, EchoServerCommand.self, EchoCeilingCommand.self, EpollCeilingCommand.self, SelfTestCommand.self, RulesBenchCommand.self, StorageBenchCommand.self, AbuseBenchCommand.self, EngineMemoryCommand.self, SnapshotBenchCommand.self]
    )
}
