import Dispatch
import Foundation
import Glibc
import PresenceClient

/// The measured phases of a fan-out run, ready to print.
struct FanoutMeasurement {
    var setupSeconds: Double
    var readyCount: Int
    var writeSeconds: Double
    var settleSeconds: Double
    var verdict: FanoutVerdict
    var allAcked: Bool
    var stateFields: [(String, ReportJSON)]
    var resourceFields: [(String, ReportJSON)]

    /// The final-state check: every watcher saw its user's last acknowledged write, and every write
    /// was answered (acknowledged, or refused with `unavailable`).
    /// The command exits with 2 when it fails.
    var ok: Bool { verdict.wrong == 0 && verdict.lastSeenDisagree == 0 && allAcked }

    var finalStateFields: [(String, ReportJSON)] {
        [
            ("settle_s", .double(settleSeconds)),
            ("final_state", .object([
                ("checked", .int(verdict.checked)), ("wrong", .int(verdict.wrong)),
                ("lastSeen_disagreements", .int(verdict.lastSeenDisagree)),
                ("all_acked", .bool(allAcked)),
                ("ok", .bool(ok)),
                ("examples", .array(verdict.examples.map { .string($0) })),
            ])),
        ] + resourceFields
    }
}

/// Generator and server CPU over `seconds`, and the server's RSS.
func resourceFields(generatorCPU: Double, serverCPU: Double?, serverRSS: Int?, seconds: Double) -> [(String, ReportJSON)] {
    var fields: [(String, ReportJSON)] = [
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

/// CPU per delivered event for the generator and the server, and the transport's counters over
/// the measured window (from measuring to the end of settling).
private func costFields(
    events: Int, seconds: Double, generatorCPU: (user: Double, system: Double),
    serverCPU: (user: Double, system: Double)?, transport: TransportChoice, counters c: TransportCounters
) -> [(String, ReportJSON)] {
    let perEvent = { (s: Double) -> ReportJSON in events > 0 ? .double(s * 1e6 / Double(events)) : .null }
    var fields: [(String, ReportJSON)] = [
        ("generator_cpu_us_per_event", .object([
            ("user", perEvent(generatorCPU.user)), ("system", perEvent(generatorCPU.system)),
            ("total", perEvent(generatorCPU.user + generatorCPU.system)),
        ])),
        ("generator_transport", .object([
            ("name", .string(transport.rawValue)),
            ("messages_received", .int(c.messagesReceived)),
            ("messages_received_per_s", .double(Double(c.messagesReceived) / seconds)),
            ("cpu_us_per_message_received", c.messagesReceived > 0
                ? .double((generatorCPU.user + generatorCPU.system) * 1e6 / Double(c.messagesReceived)) : .null),
            ("messages_sent", .int(c.messagesSent)),
            ("send_calls", .int(c.sendCalls)),
            ("blocked_sends", .int(c.blockedSends)),
            ("max_queued_bytes_per_connection", .int(c.maxQueuedBytes)),
            ("loop_turns", .int(c.loopTurns)),
            ("longest_turn_us", .int(c.longestTurnMicros)),
            ("longest_wait_us", .int(c.longestWaitMicros)),
        ])),
    ]
    if let serverCPU {
        fields.append(("server_cpu_user_s", .double(serverCPU.user)))
        fields.append(("server_cpu_system_s", .double(serverCPU.system)))
        fields.append(("server_cpu_us_per_event", .object([
            ("user", perEvent(serverCPU.user)), ("system", perEvent(serverCPU.system)),
            ("total", perEvent(serverCPU.user + serverCPU.system)),
        ])))
    }
    return fields
}

/// Runs the phases of a fan-out: `connectAll` opens every connection (on the transport's thread),
/// then the writers run `warmup` seconds unmeasured and `duration` seconds measured, then the run
/// settles until every write is acknowledged and every watcher holds each user's final state (or
/// `settle` seconds pass). `beforeClose` runs on the transport's thread just before the sockets
/// close. `lastSeenIsWriters`: the protocol has no server timestamp (MQTT).
func runFanoutPhases(
    client: any FanoutClient, load st: FanoutLoad, serverPid: Int32?, readyName: String,
    timeout: Double, warmup: Double, duration: Double, settle: Double, lastSeenIsWriters: Bool,
    connectAll: @escaping @Sendable () -> Void, beforeClose: @escaping @Sendable () -> Void = {}
) -> FanoutMeasurement {
    let readyTarget = st.users + st.watchers * st.subs
    let sem = DispatchSemaphore(value: 0)
    let t0 = monotonicMicros()
    client.perform { connectAll(); sem.signal() }
    sem.wait()
    let deadline = t0 + UInt64(timeout * 1e6)
    while st.ready.load(ordering: .relaxed) < readyTarget, st.failedConnects.load(ordering: .relaxed) == 0, monotonicMicros() < deadline {
        usleep(10_000)
    }
    let setupSeconds = Double(monotonicMicros() - t0) / 1e6
    let readyCount = st.ready.load(ordering: .relaxed)
    if readyCount < readyTarget { log("only \(readyCount)/\(readyTarget) \(readyName) ok after \(setupSeconds) s; measuring anyway") }

    // Warm-up, then measure.
    client.perform { st.startMicros = monotonicMicros(); st.writing = true; sem.signal() }
    sem.wait()
    sleepSeconds(warmup)
    let cpu0 = selfCPU()
    let srv0 = serverPid.flatMap(processCPUSplit)
    let counters0 = Box(TransportCounters())
    client.perform {
        st.measuring = true
        st.startMicros = monotonicMicros()
        st.writesSent = 0
        client.resetPeaks()
        counters0.value = client.counters
        sem.signal()
    }
    sem.wait()
    let m0 = monotonicMicros()
    log("measuring \(duration) s")  // bench/profile.sh starts perf on this line
    sleepSeconds(duration)
    client.perform { st.writing = false; sem.signal() }
    sem.wait()
    let writeSeconds = Double(monotonicMicros() - m0) / 1e6
    // Settle: all acks in and every watcher at its user's final state (or timeout).
    let settleEnd = monotonicMicros() + UInt64(settle * 1e6)
    let verdict = Box(FanoutVerdict())
    let acksDone = Box(false)
    repeat {
        usleep(50_000)
        client.perform {
            acksDone.value = st.allAcked
            verdict.value = st.verify(lastSeenIsWriters: lastSeenIsWriters)
            sem.signal()
        }
        sem.wait()
    } while (!acksDone.value || verdict.value.wrong > 0) && monotonicMicros() < settleEnd
    let settleSeconds = Double(monotonicMicros() - m0) / 1e6 - writeSeconds
    let cpu1 = selfCPU()
    let srv1 = serverPid.flatMap(processCPUSplit)
    let rss = serverPid.flatMap(processRSS)
    let result = Box<[(String, ReportJSON)]>([])
    let events = Box(0)
    let counters = Box(TransportCounters())
    client.perform {
        st.measuring = false
        counters.value = client.counters - counters0.value
        events.value = st.eventsMeasured
        result.value = st.reportFields(writeSeconds: writeSeconds)
        beforeClose()
        sem.signal()
    }
    sem.wait()
    client.closeAll()
    let closeEnd = monotonicMicros() + 10_000_000
    while client.openConnections > 0, monotonicMicros() < closeEnd { usleep(10_000) }
    client.shutdown()
    let generatorCPU = (user: cpu1.user - cpu0.user, system: cpu1.system - cpu0.system)
    let serverCPU: (user: Double, system: Double)? = if let s0 = srv0, let s1 = srv1 { (s1.user - s0.user, s1.system - s0.system) } else { nil }
    let seconds = writeSeconds + settleSeconds
    return FanoutMeasurement(
        setupSeconds: setupSeconds, readyCount: readyCount, writeSeconds: writeSeconds, settleSeconds: settleSeconds,
        verdict: verdict.value, allAcked: acksDone.value, stateFields: result.value,
        resourceFields: resourceFields(generatorCPU: generatorCPU.user + generatorCPU.system,
                                       serverCPU: serverCPU.map { $0.user + $0.system }, serverRSS: rss, seconds: seconds)
            + costFields(events: events.value, seconds: seconds, generatorCPU: generatorCPU, serverCPU: serverCPU,
                         transport: client.transport, counters: counters.value))
}

extension FanoutMeasurement {
    /// The fields every fan-out report starts with.
    static func headerFields(scenario: String, url: WebSocketURL, load st: FanoutLoad, transport: TransportChoice,
                             m: FanoutMeasurement) -> [(String, ReportJSON)] {
        [
            ("scenario", .string(scenario)),
            ("url", .string(url.description)),
            ("transport", .string(transport.rawValue)),
            ("users", .int(st.users)), ("watchers", .int(st.watchers)), ("subscriptions", .int(st.subs)),
            ("rate", .double(st.rate)), ("duration_s", .double(m.writeSeconds)),
            ("setup_s", .double(m.setupSeconds)), ("ready", .int(m.readyCount)),
            ("ready_target", .int(st.users + st.watchers * st.subs)),
        ]
    }
}
