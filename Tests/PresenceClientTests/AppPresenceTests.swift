@testable import PresenceClient
import PresenceCore
import PresenceTesting
import Testing

@Suite struct AppPresenceTests {
    let online = AppPresence.presenceValue(online: true)
    let offline = AppPresence.presenceValue(online: false)
    let p = Path(validated: ["users", "alice", "presence"])

    @Test func foregroundIsWrittenOnlyAfterTheWindowWithOnDisconnectFirst() {
        let clock = ManualClock()
        var app = AppPresence(uid: "alice", debounceMilliseconds: 3000)
        #expect(app.lifecycle(.active, now: clock.now).isEmpty)
        #expect(app.nextDeadline == clock.now + 3000)
        clock.advance(byMilliseconds: 2999)
        #expect(app.timerFired(now: clock.now).isEmpty)
        clock.advance(byMilliseconds: 1)
        #expect(app.timerFired(now: clock.now) == [
            .registerOnDisconnect(path: p, value: offline),
            .write(path: p, value: online, online: true),
        ])
        #expect(app.nextDeadline == nil)
        #expect(app.timerFired(now: clock.now + 10_000).isEmpty)
    }

    @Test func backgroundThenForegroundWithinTheWindowWritesNothing() {
        let clock = ManualClock()
        var app = AppPresence(uid: "alice", debounceMilliseconds: 3000)
        _ = app.lifecycle(.active, now: clock.now)
        clock.advance(byMilliseconds: 3000)
        _ = app.timerFired(now: clock.now)
        clock.advance(byMilliseconds: 10_000)
        #expect(app.lifecycle(.background, now: clock.now).isEmpty)
        clock.advance(byMilliseconds: 2000)
        #expect(app.lifecycle(.active, now: clock.now).isEmpty)
        #expect(app.nextDeadline == nil)
        clock.advance(byMilliseconds: 5000)
        #expect(app.timerFired(now: clock.now).isEmpty)
    }

    @Test func onlyTheStateThatStandsIsWrittenAndEachFlipRestartsTheWindow() {
        let clock = ManualClock()
        var app = AppPresence(uid: "alice", debounceMilliseconds: 3000)
        _ = app.lifecycle(.active, now: clock.now)
        clock.advance(byMilliseconds: 1000)
        _ = app.lifecycle(.inactive, now: clock.now)  // nothing written yet: offline is a change from "nothing"
        clock.advance(byMilliseconds: 1000)
        _ = app.lifecycle(.background, now: clock.now)
        clock.advance(byMilliseconds: 2999)
        #expect(app.timerFired(now: clock.now).isEmpty)
        clock.advance(byMilliseconds: 1)
        #expect(app.timerFired(now: clock.now) == [.write(path: p, value: offline, online: false)])
        // inactive after background: already offline, nothing to write.
        #expect(app.lifecycle(.inactive, now: clock.now).isEmpty)
        #expect(app.nextDeadline == nil)
    }

    @Test func backgroundAndInactiveWriteOffline() {
        for state in [LifecycleState.background, .inactive] {
            let clock = ManualClock()
            var app = AppPresence(uid: "alice", debounceMilliseconds: 3000)
            _ = app.lifecycle(.active, now: clock.now)
            clock.advance(byMilliseconds: 3000)
            _ = app.timerFired(now: clock.now)
            _ = app.lifecycle(state, now: clock.now)
            clock.advance(byMilliseconds: 3000)
            #expect(app.timerFired(now: clock.now) == [.write(path: p, value: offline, online: false)])
        }
    }

    @Test func zeroWindowWritesAtOnce() {
        var app = AppPresence(uid: "alice", debounceMilliseconds: 0)
        #expect(app.lifecycle(.active, now: 1).count == 2)
        #expect(app.lifecycle(.background, now: 2) == [.write(path: p, value: offline, online: false)])
    }

    @Test func terminateWritesOfflineAtOnceAndCancelsThePendingState() {
        var app = AppPresence(uid: "alice", debounceMilliseconds: 3000)
        _ = app.lifecycle(.active, now: 0)
        #expect(app.terminate(now: 100) == [.write(path: p, value: offline, online: false)])
        #expect(app.nextDeadline == nil)
    }

    @Test func reconnectReassertsOnlineUnlessAWriteIsQueued() {
        var app = AppPresence(uid: "alice", debounceMilliseconds: 0)
        #expect(app.reconnected(alreadyQueued: false).isEmpty)  // nothing written yet
        _ = app.lifecycle(.active, now: 0)
        #expect(app.reconnected(alreadyQueued: false) == [.write(path: p, value: online, online: true)])
        #expect(app.reconnected(alreadyQueued: true).isEmpty)
        _ = app.lifecycle(.background, now: 1)
        #expect(app.reconnected(alreadyQueued: false).isEmpty)
    }

    @Test func lifecycleScriptsParse() throws {
        let script = try LifecycleScript.parse("""
            # a day in the life
            foreground
            +1.5s background
            +500ms fg        # back quickly
            sleep 2s
            10s network-off
            +1 network-on
            kill
            """)
        #expect(script.steps.map(\.at) == [0, 1500, 2000, 10_000, 11_000, 11_000])
        #expect(script.steps.map(\.command) == [.foreground, .background, .foreground, .networkOff, .networkOn, .kill])
        #expect(throws: LifecycleScriptError.self) { try LifecycleScript.parse("+1s dance") }
        #expect(throws: LifecycleScriptError.self) { try LifecycleScript.parse("+xs background") }
        #expect(LifecycleCommand.parse("sleep 250ms") == .some(.sleep(milliseconds: 250)))
        #expect(LifecycleCommand.parse("  ") == .some(nil))
        #expect(LifecycleCommand.parse("bogus") == nil)
        #expect(parseDuration("1.5s") == 1500 && parseDuration("2m") == 120_000 && parseDuration("3") == 3000)
    }
}
