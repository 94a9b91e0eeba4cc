import Dispatch
import Foundation
import Glibc
import PresenceClient

/// What both fan-out generators (RTDB and MQTT over WebSockets) keep on the client's service
/// thread, so one routine drives their phases the same way: connect, warm up, measure, settle.
protocol FanoutRunState: AnyObject {
    var writing: Bool { get set }
    var measuring: Bool { get set }
    var startMicros: UInt64 { get set }
    var writesSent: Int { get set }
    var writerInflight: [[UInt64]] { get }
    var measuredWrites: Int { get }
    var writesAcked: Int { get }
    var ackLatency: LatencySamples { get set }
    var expectedEvents: Int { get }
    var eventsMeasured: Int { get }
    var perSecond: [Int] { get }
    var latency: LatencySamples { get set }
    var eventsLate: Int { get }
    var eventsUnmatched: Int { get }
    var failures: [String: Int] { get }
    var closedUnexpectedly: Int { get }
    /// Auths and listens (or CONNACKs and SUBACKs) answered so far, and failed connects.
    var readyCount: Int { get }
    var failedConnectCount: Int { get }
    func verify() -> (checked: Int, wrong: Int, lastSeenDisagree: Int, examples: [String])
    /// Fields only this protocol reports, and how its latency is measured.
    var extraFields: [(String, JSON)] { get }
    var latencySource: String { get }
}

/// The measured phases of a fan-out run, ready to print.
struct FanoutMeasurement {
    var setupSeconds: Double
    var readyCount: Int
    var writeSeconds: Double
    var settleSeconds: Double
    var verdict: (checked: Int, wrong: Int, lastSeenDisagree: Int, examples: [String])
    var allAcked: Bool
    var stateFields: [(String, JSON)]
    var generatorCPU: Double
    var serverCPU: Double?
    var serverRSS: Int?

    /// The final-state check: every watcher saw its user's last write, and every write was acked.
    /// The command exits with 2 when it fails.
    var ok: Bool { verdict.wrong == 0 && verdict.lastSeenDisagree == 0 && allAcked }

    var finalStateFields: [(String, JSON)] {
        [
            ("settle_s", .double(settleSeconds)),
            ("final_state", .object([
                ("checked", .int(verdict.checked)), ("wrong", .int(verdict.wrong)),
                ("lastSeen_disagreements", .int(verdict.lastSeenDisagree)),
                ("all_acked", .bool(allAcked)),
                ("ok", .bool(ok)),
                ("examples", .array(verdict.examples.map { .string($0) })),
            ])),
        ] + resourceFields(generatorCPU: generatorCPU, serverCPU: serverCPU, serverRSS: serverRSS,
                           seconds: writeSeconds + settleSeconds)
    }
}

/// Generator and server CPU over `seconds`, and the server's RSS.
func resourceFields(generatorCPU: Double, serverCPU: Double?, serverRSS: Int?, seconds: Double) -> [(String, JSON)] {
    var fields: [(String, JSON)] = [
        ("generator_cpu_s", .double(generatorCPU)),
        ("generator_cpu_fraction_of_one_core", .double(generatorCPU / seconds)),
    ]
    if let serverCPU {
        fields.append(("server_cpu_s", .double(serverCPU)))
        fields.append(("server_cpu_fraction_of_one_core", .double(serverCPU / seconds)))
    }
    if let serverRSS { fields.append(("server_rss", .int(serverRSS))) }
    return fields
}

/// Runs the phases of a fan-out: `connectAll` opens every connection (on the service thread), then
/// the writers run `warmup` seconds unmeasured and `duration` seconds measured, then the run
/// settles until every write is acknowledged and every watcher holds each user's final state (or
/// `settle` seconds pass). `beforeClose` runs on the service thread just before the sockets close.
func runFanoutPhases<State: FanoutRunState & Sendable>(
    client: WebSocketClient, state st: State, serverPid: Int32?, readyTarget: Int, readyName: String,
    timeout: Double, warmup: Double, duration: Double, settle: Double,
    connectAll: @escaping @Sendable () -> Void, beforeClose: @escaping @Sendable () -> Void = {}
) -> FanoutMeasurement {
    let sem = DispatchSemaphore(value: 0)
    let t0 = monotonicMicros()
    client.perform { connectAll(); sem.signal() }
    sem.wait()
    let deadline = t0 + UInt64(timeout * 1e6)
    while st.readyCount < readyTarget, st.failedConnectCount == 0, monotonicMicros() < deadline {
        usleep(10_000)
    }
    let setupSeconds = Double(monotonicMicros() - t0) / 1e6
    let readyCount = st.readyCount
    if readyCount < readyTarget { log("only \(readyCount)/\(readyTarget) \(readyName) ok after \(setupSeconds) s; measuring anyway") }

    // Warm-up, then measure.
    client.perform { st.startMicros = monotonicMicros(); st.writing = true; sem.signal() }
    sem.wait()
    sleepSeconds(warmup)
    let cpu0 = selfCPU()
    let srv0 = serverPid.flatMap(processCPU)
    client.perform { st.measuring = true; st.startMicros = monotonicMicros(); st.writesSent = 0; sem.signal() }
    sem.wait()
    let m0 = monotonicMicros()
    sleepSeconds(duration)
    client.perform { st.writing = false; sem.signal() }
    sem.wait()
    let writeSeconds = Double(monotonicMicros() - m0) / 1e6
    // Settle: all acks in and every watcher at its user's final state (or timeout).
    let settleEnd = monotonicMicros() + UInt64(settle * 1e6)
    let verdict = Box<(checked: Int, wrong: Int, lastSeenDisagree: Int, examples: [String])>((0, 0, 0, []))
    let acksDone = Box(false)
    repeat {
        usleep(50_000)
        client.perform {
            acksDone.value = st.writerInflight.allSatisfy(\.isEmpty)
            verdict.value = st.verify()
            sem.signal()
        }
        sem.wait()
    } while (!acksDone.value || verdict.value.wrong > 0) && monotonicMicros() < settleEnd
    let settleSeconds = Double(monotonicMicros() - m0) / 1e6 - writeSeconds
    let cpu1 = selfCPU()
    let srv1 = serverPid.flatMap(processCPU)
    let rss = serverPid.flatMap(processRSS)
    let result = Box<[(String, JSON)]>([])
    client.perform {
        st.measuring = false
        let measured = st.eventsMeasured
        result.value = [
            ("writes_measured", .int(st.measuredWrites)),
            ("write_rate_achieved", .double(Double(st.measuredWrites) / writeSeconds)),
            ("writes_acked_total", .int(st.writesAcked)),
        ] + st.extraFields + [
            ("ack_latency", st.ackLatency.summary()),
            ("events_expected", .int(st.expectedEvents)),
            ("events_delivered", .int(measured)),
            ("events_per_s", .double(Double(measured) / writeSeconds)),
            ("events_per_s_by_second", .array(st.perSecond.map { .int($0) })),
            ("latency_source", .string(st.latencySource)),
            ("latency", st.latency.summary()),
            ("events_matched_to_previous_write", .int(st.eventsLate)),
            ("events_unmatched", .int(st.eventsUnmatched)),
            ("failures", .object(st.failures.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
            ("closed_by_server", .int(st.closedUnexpectedly)),
        ]
        beforeClose()
        sem.signal()
    }
    sem.wait()
    client.closeAll()
    let closeEnd = monotonicMicros() + 10_000_000
    while client.statistics.open > 0, monotonicMicros() < closeEnd { usleep(10_000) }
    client.shutdown()
    let serverCPU: Double? = if let s0 = srv0, let s1 = srv1 { s1 - s0 } else { nil }
    return FanoutMeasurement(
        setupSeconds: setupSeconds, readyCount: readyCount, writeSeconds: writeSeconds, settleSeconds: settleSeconds,
        verdict: verdict.value, allAcked: acksDone.value, stateFields: result.value,
        generatorCPU: cpu1.user + cpu1.system - cpu0.user - cpu0.system, serverCPU: serverCPU, serverRSS: rss)
}
