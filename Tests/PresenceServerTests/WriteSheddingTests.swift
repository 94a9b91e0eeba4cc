@testable import PresenceServer
import Testing

/// Load shedding past saturation: when it starts, how the share adapts, when it stops, and who is
/// refused (the heaviest writers, never a quiet one).
@Suite struct WriteSheddingTests {
    typealias Window = WriteShedding.Window

    static let settings = WriteShedding.Settings(busyPercent: 90, maxPendingWrites: 100, maxReadDelayMilliseconds: 100, startAfterWindows: 3)
    static let saturated = Window(busy: 1, pendingWrites: 0, readDelayMilliseconds: 500)
    static let holding = Window(busy: 0.95, pendingWrites: 0, readDelayMilliseconds: 80)  // busy, reads late but not too late
    static let calm = Window(busy: 0.7, pendingWrites: 0)
    static let idle = Window(busy: 0.05, pendingWrites: 0)

    /// `closeWindow` and `admit` outside `#expect` (the macro cannot take a mutating call).
    func close(_ shedding: inout WriteShedding, _ window: Window) -> WriteShedding.Change? {
        shedding.closeWindow(window)
    }

    /// Connection `key` sends `count` writes; how many were accepted.
    func send(_ shedding: inout WriteShedding, _ key: UInt64, _ count: Int) -> Int {
        (0..<count).filter { _ in shedding.admit(key) }.count
    }

    func startShedding() -> WriteShedding {
        var shedding = WriteShedding(Self.settings)
        for _ in 0..<3 { _ = shedding.closeWindow(Self.saturated) }
        return shedding
    }

    @Test func oneOrTwoSlowWindowsDoNotStartIt() {
        var shedding = WriteShedding(Self.settings)
        for window in [Self.saturated, Self.saturated, Self.calm, Self.saturated, Self.saturated, Self.holding] {
            let change = close(&shedding, window)
            #expect(change == nil)
        }
        #expect(!shedding.isShedding && shedding.fraction == 0)
        #expect(send(&shedding, 1, 1_000) == 1_000, "nothing is refused while not shedding")
    }

    @Test func threeOverloadedWindowsInARowStartIt() {
        var shedding = WriteShedding(Self.settings)
        _ = close(&shedding, Self.saturated)
        _ = close(&shedding, Self.saturated)
        let change = close(&shedding, Self.saturated)
        #expect(change == .started)
        #expect(shedding.isShedding && shedding.fraction > 0 && shedding.fraction < 1)
    }

    @Test func aBusyLoopThatKeepsReadingIsNotOverloaded() {
        var shedding = WriteShedding(Self.settings)
        for _ in 0..<10 { _ = close(&shedding, Window(busy: 1, pendingWrites: 0, readDelayMilliseconds: 20)) }
        #expect(!shedding.isShedding, "100 % busy, batching, input read within 20 ms: keeping up")
        let lateButIdle = shedding.isOverloaded(Window(busy: 0.5, pendingWrites: 0, readDelayMilliseconds: 1_000))
        #expect(!lateButIdle, "a loop with idle time reads what is there")
        let starved = shedding.isOverloaded(Window(busy: 1, pendingWrites: 0, readDelayMilliseconds: .infinity))
        #expect(starved, "input waiting while nothing was read")
    }

    @Test func writesNotYetDurableOverTheBoundAreASignalToo() {
        var shedding = WriteShedding(Self.settings)
        for _ in 0..<2 { _ = close(&shedding, Window(busy: 0.1, pendingWrites: 101)) }
        let change = close(&shedding, Window(busy: 0.1, pendingWrites: 101))
        #expect(change == .started)
        let atTheBound = WriteShedding(Self.settings).isOverloaded(Window(busy: 0.1, pendingWrites: 100))
        #expect(!atTheBound, "at the bound is not over it")
    }

    @Test func theShareRisesWhileOverloadedHoldsInTheBandAndFallsWhenCalm() {
        var shedding = startShedding()
        var last = shedding.fraction
        for _ in 0..<5 {
            _ = close(&shedding, Self.saturated)
            #expect(shedding.fraction > last, "overloaded: shed more")
            last = shedding.fraction
        }
        #expect(last < 1)
        _ = close(&shedding, Self.holding)
        #expect(shedding.fraction == last, "between calm and overloaded the share holds")
        _ = close(&shedding, Self.calm)
        #expect(shedding.fraction < last && shedding.isShedding, "calm: shed a little less, not all at once")
        // At 70 % busy (target 85 %) the accepted share grows by 85/70.
        #expect(abs((1 - shedding.fraction) - (1 - last) * 0.85 / 0.7) < 1e-9)
    }

    @Test func theShareNeverReachesEveryWrite() {
        var shedding = startShedding()
        for _ in 0..<200 { _ = close(&shedding, Self.saturated) }
        #expect(abs(shedding.fraction - Self.settings.maxFraction) < 1e-9)
    }

    @Test func itStopsOnceTheShareIsBackToZeroAndStartsAgainOnlyAfterThreeMoreWindows() {
        var shedding = startShedding()
        for _ in 0..<4 { _ = close(&shedding, Self.saturated) }
        var changes: [WriteShedding.Change?] = []
        for _ in 0..<20 where shedding.isShedding { changes.append(close(&shedding, Self.idle)) }
        #expect(changes.last == .stopped && changes.dropLast().allSatisfy { $0 == nil })
        #expect(changes.count > 1 && changes.count < 10, "mostly idle: back to normal within a second, in steps")
        #expect(changes.count == 2, "0.75 × 0.8⁴ of the writes accepted, doubled twice")
        #expect(!shedding.isShedding && shedding.fraction == 0)
        #expect(send(&shedding, 1, 100) == 100)
        _ = close(&shedding, Self.saturated)
        #expect(!shedding.isShedding, "stopping resets the streak")
    }

    @Test func theAcceptedShareFollowsTheTarget() {
        var shedding = startShedding()
        for _ in 0..<3 { _ = close(&shedding, Self.saturated) }
        let target = shedding.fraction
        // 50 equal writers, 8 writes each per window, over many windows at a steady share.
        var sent = 0, accepted = 0
        for _ in 0..<50 {
            for key in UInt64(1)...50 {
                sent += 8
                accepted += send(&shedding, key, 8)
            }
            _ = close(&shedding, Self.holding)
        }
        let refused = Double(sent - accepted) / Double(sent)
        #expect(abs(refused - target) < 0.05, "refused \(refused), target \(target)")
    }

    @Test func aFloodIsCutDownAndQuietWritersAreNeverRefused() {
        var shedding = startShedding()
        for _ in 0..<3 { _ = close(&shedding, Self.saturated) }
        var quietRefused = 0, floodSent = 0, floodAccepted = 0
        for window in 0..<100 {
            floodSent += 200
            floodAccepted += send(&shedding, 1, 200)
            // Nineteen writers at 2 writes a window, and one that writes once a second.
            for key in UInt64(2)...20 { quietRefused += 2 - send(&shedding, key, 2) }
            if window % 10 == 0 { quietRefused += 1 - send(&shedding, 99, 1) }
            _ = close(&shedding, Self.holding)
        }
        #expect(quietRefused == 0)
        #expect(floodAccepted < floodSent / 2, "the flood bears the shedding (\(floodAccepted) of \(floodSent) accepted)")
        #expect(shedding.shedTotal == floodSent - floodAccepted, "only the flood was refused")
    }

    @Test func theLevelIsMaxMinFair() {
        // 100 writes: keeping 60 caps the flood at 60 - 2 - 3 = 55, the others keep all of theirs.
        #expect(WriteShedding.level(keeping: 0.6, of: [2, 3, 95]) == 55)
        // Equal writers share the cut equally.
        #expect(WriteShedding.level(keeping: 0.5, of: [10, 10, 10, 10]) == 5)
        #expect(WriteShedding.level(keeping: 1, of: [10, 10]) == .infinity)
        #expect(WriteShedding.level(keeping: 0.5, of: []) == .infinity)
    }

    @Test func aConnectionThatLeftIsForgotten() {
        var shedding = startShedding()
        for _ in 0..<5 {
            _ = send(&shedding, 7, 100)
            _ = close(&shedding, Self.saturated)
        }
        shedding.forget(7)
        _ = send(&shedding, 8, 100)
        _ = close(&shedding, Self.saturated)
        #expect(send(&shedding, 7, 1) == 1, "a new connection with the same id starts with a full bucket")
    }

    @Test func offByDefaultSettingsRefusesNothing() {
        var shedding = WriteShedding(WriteShedding.Settings(busyPercent: 0, maxPendingWrites: 0))
        for _ in 0..<10 { _ = close(&shedding, Window(busy: 1, pendingWrites: 1_000_000)) }
        #expect(!shedding.isShedding)
        #expect(send(&shedding, 1, 1_000) == 1_000)
    }
}
