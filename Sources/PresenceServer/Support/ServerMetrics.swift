import CoreMetrics
import PresenceCore
import Prometheus

/// The server's metrics, through swift-metrics (the process bootstraps the Prometheus factory) and
/// rendered by swift-prometheus at `/metrics`. Counters kept by the pure engine are carried over by
/// their growth at each scrape.
final class ServerMetrics {
    let registry: PrometheusCollectorRegistry?
    let connections = CoreMetrics.Gauge(label: "presence_connections")
    let connectionsOpened = CoreMetrics.Counter(label: "presence_connections_opened_total")
    let messagesIn = CoreMetrics.Counter(label: "presence_messages_received_total")
    let messagesOut = CoreMetrics.Counter(label: "presence_messages_sent_total")
    let bytesIn = CoreMetrics.Counter(label: "presence_bytes_received_total")
    let bytesOut = CoreMetrics.Counter(label: "presence_bytes_sent_total")
    /// Writes of WebSocket messages to sockets: a connection's messages of one turn go in one
    /// write, so under load this grows slower than `presence_messages_sent_total`.
    let socketWrites = CoreMetrics.Counter(label: "presence_websocket_writes_total")
    let pushes = CoreMetrics.Counter(label: "presence_pushes_total")
    let writeToAck = CoreMetrics.Timer(label: "presence_write_to_ack_seconds")
    let writeToPush = CoreMetrics.Timer(label: "presence_write_to_push_seconds")
    let heldSessions = CoreMetrics.Gauge(label: "presence_ondisconnect_sessions_held")
    /// 1 while storage commits fail (writes refused), else 0.
    let storageFailing = CoreMetrics.Gauge(label: "presence_storage_failing")
    /// Times a connection's reading was paused for going over its message budget.
    let throttled = CoreMetrics.Counter(label: "presence_connections_throttled_total")
    /// Times a writer's reading was paused because the server was past saturation
    /// (`WriterPushback`), and how many are paused now.
    let writersPaused = CoreMetrics.Counter(label: "presence_writers_paused_total")
    let writersPushedBack = CoreMetrics.Gauge(label: "presence_writers_pushed_back")
    /// Data writes refused with `unavailable` past saturation (`WriteShedding`), whether shedding
    /// is on now (1/0), and the share of writes it aims to refuse.
    let writesShed = CoreMetrics.Counter(label: "presence_writes_shed_total")
    let writeShedding = CoreMetrics.Gauge(label: "presence_write_shedding")
    let writeShedShare = CoreMetrics.Gauge(label: "presence_write_shed_share")
    /// New connections accepted a turn later than they could have been (`--max-accepts-per-turn`),
    /// and the most accepted in one turn since the start.
    let acceptsDeferred = CoreMetrics.Counter(label: "presence_accepts_deferred_total")
    let acceptsMostInOneTurn = CoreMetrics.Gauge(label: "presence_accepts_most_in_one_turn")
    private var closedByReason: [String: CoreMetrics.Counter] = [:]
    private var exported = Engine.Counters()
    private var exportedCounters: [String: CoreMetrics.Counter] = [:]

    init(registry: PrometheusCollectorRegistry?) {
        self.registry = registry
    }

    private var limitChecks: [String: CoreMetrics.Counter] = [:]

    /// `presence_limit_checks_total{limit, tier, outcome}`: every check of a limited operation.
    func limitChecked(_ event: LimitEvent) {
        let tier = event.tier ?? "none"
        let key = event.limit + "|" + tier + "|" + event.outcome.rawValue
        if limitChecks[key] == nil {
            limitChecks[key] = CoreMetrics.Counter(
                label: "presence_limit_checks_total",
                dimensions: [("limit", event.limit), ("tier", tier), ("outcome", event.outcome.rawValue)])
        }
        limitChecks[key]!.increment()
    }

    func closed(reason: String) {
        if closedByReason[reason] == nil {
            closedByReason[reason] = CoreMetrics.Counter(label: "presence_connections_closed_total", dimensions: [("reason", reason)])
        }
        closedByReason[reason]!.increment()
    }

    /// The Prometheus text of everything, after carrying the engine's counters over.
    func render(engine: Engine, liveConnections: Int) -> String {
        connections.record(liveConnections)
        heldSessions.record(engine.heldSessionCount)
        let now = engine.counters
        for (kind, total) in now.writes { carry("presence_writes_total", [("kind", kind)], total, exported.writes[kind] ?? 0) }
        for (kind, total) in now.ruleDenials { carry("presence_rule_denials_total", [("operation", kind)], total, exported.ruleDenials[kind] ?? 0) }
        carry("presence_auth_failures_total", [], now.authFailures, exported.authFailures)
        carry("presence_ondisconnect_ops_run_total", [], now.onDisconnectOpsRun, exported.onDisconnectOpsRun)
        carry("presence_ondisconnect_sessions_held_total", [], now.onDisconnectSessionsHeld, exported.onDisconnectSessionsHeld)
        exported = now
        return registry?.emitToString() ?? ""
    }

    private func carry(_ label: String, _ dimensions: [(String, String)], _ total: Int, _ before: Int) {
        let key = label + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        if exportedCounters[key] == nil { exportedCounters[key] = CoreMetrics.Counter(label: label, dimensions: dimensions) }
        if total > before { exportedCounters[key]!.increment(by: total - before) }
    }
}
