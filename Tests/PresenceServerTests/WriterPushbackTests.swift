@testable import PresenceServer
import Testing

/// Push-back on writers past saturation: who is paused, and when everyone is read again.
@Suite struct WriterPushbackTests {
    typealias Backlog = WriterPushback.Backlog

    /// `wrote` and `backlogChanged` outside `#expect` (the macro cannot take a mutating call).
    func wrote(_ pushback: inout WriterPushback, _ id: UInt64, _ backlog: Backlog, queued: Int? = nil) -> Bool {
        pushback.wrote(id, backlog: backlog, queuedByWrite: queued)
    }

    func changed(_ pushback: inout WriterPushback, _ backlog: Backlog) -> Set<UInt64> {
        pushback.backlogChanged(backlog)
    }

    @Test func underTheLimitsNobodyIsPaused() {
        var pushback = WriterPushback(maxPendingWrites: 100, maxQueuedBytes: 1_000)
        let paused1 = wrote(&pushback, 1, Backlog(pendingWrites: 100, queuedBytes: 1_000))
        #expect(!paused1, "at the limit is not over it")
        #expect(pushback.paused.isEmpty && !pushback.isPushingBack)
    }

    @Test func overEitherLimitTheWriterIsPausedOnce() {
        var pushback = WriterPushback(maxPendingWrites: 100, maxQueuedBytes: 1_000)
        let paused2 = wrote(&pushback, 1, Backlog(pendingWrites: 101, queuedBytes: 0))
        #expect(paused2)
        let paused3 = wrote(&pushback, 1, Backlog(pendingWrites: 150, queuedBytes: 0))
        #expect(!paused3, "already paused")
        let paused4 = wrote(&pushback, 2, Backlog(pendingWrites: 0, queuedBytes: 1_001))
        #expect(paused4)
        #expect(pushback.paused == [1, 2])
    }

    /// Hysteresis: once pushing back, every writer is paused until both measures are back to half.
    @Test func writersArePausedUntilTheBacklogIsBackToHalfThenAllResumeTogether() {
        var pushback = WriterPushback(maxPendingWrites: 100, maxQueuedBytes: 1_000)
        let paused5 = wrote(&pushback, 1, Backlog(pendingWrites: 120, queuedBytes: 0))
        #expect(paused5)
        // Below the limit but above half: a writer arriving now is paused too, nobody resumes.
        let paused6 = wrote(&pushback, 2, Backlog(pendingWrites: 80, queuedBytes: 0))
        #expect(paused6)
        let resumed7 = changed(&pushback, Backlog(pendingWrites: 80, queuedBytes: 0))
        #expect(resumed7.isEmpty)
        let resumed8 = changed(&pushback, Backlog(pendingWrites: 50, queuedBytes: 600))
        #expect(resumed8.isEmpty, "bytes still above half")
        let resumed9 = changed(&pushback, Backlog(pendingWrites: 50, queuedBytes: 500))
        #expect(resumed9 == [1, 2])
        #expect(pushback.paused.isEmpty && !pushback.isPushingBack)
        // Back to normal: a write under the limit reads on.
        let paused10 = wrote(&pushback, 3, Backlog(pendingWrites: 60, queuedBytes: 0))
        #expect(!paused10)
    }

    /// Issue 16: a client writing small values beside a feed of big ones pushed to many readers
    /// was paused with the feed. Over the queued bytes only, a write that queued less than half of
    /// an average write reads on; the feed's writers are paused.
    @Test func overTheQueuedBytesOnlyTheWritersThatFillTheQueuesArePaused() {
        var pushback = WriterPushback(maxPendingWrites: 100, maxQueuedBytes: 10_000_000)
        for _ in 0..<40 {  // the feed: 5 MB queued per write (256 KB to twenty readers)
            let paused = wrote(&pushback, 1, Backlog(queuedBytes: 1_000), queued: 5_000_000)
            #expect(!paused)
        }
        let over = Backlog(pendingWrites: 10, queuedBytes: 12_000_000)
        let light = wrote(&pushback, 2, over, queued: 300)
        #expect(!light, "a small write beside the feed reads on")
        #expect(pushback.isPushingBack)
        let heavy = wrote(&pushback, 1, over, queued: 5_000_000)
        #expect(heavy)
        for _ in 0..<500 {  // the average is held while pushing back: small writes do not become it
            let stillLight = wrote(&pushback, 2, Backlog(pendingWrites: 10, queuedBytes: 8_000_000), queued: 300)
            #expect(!stillLight, "still pushing back, still not the one filling the queues")
        }
        #expect(pushback.paused == [1])
        let resumed = changed(&pushback, Backlog(pendingWrites: 10, queuedBytes: 5_000_000))
        #expect(resumed == [1])
    }

    /// When storage is behind too, every write adds to that: the light writer is paused as well.
    @Test func whenStorageIsBehindEveryWriterIsPausedWhateverItQueues() {
        var pushback = WriterPushback(maxPendingWrites: 100, maxQueuedBytes: 10_000_000)
        for _ in 0..<40 {
            _ = wrote(&pushback, 1, Backlog(), queued: 5_000_000)
        }
        let light = wrote(&pushback, 2, Backlog(pendingWrites: 60, queuedBytes: 12_000_000), queued: 300)
        #expect(light)
        let refused = wrote(&pushback, 3, Backlog(queuedBytes: 12_000_000), queued: nil)
        #expect(refused, "a write refused unhandled counts as an average one")
    }

    /// The common shape: writes alike (presence flapping, each pushed to ~10 watchers) are all
    /// paused, as before.
    @Test func writersAlikeAreAllPaused() {
        var pushback = WriterPushback(maxPendingWrites: 0, maxQueuedBytes: 1_000_000)
        for id in UInt64(1)...200 {
            _ = wrote(&pushback, id, Backlog(queuedBytes: 1_000), queued: 1_200 + Int(id % 7) * 100)
        }
        for id in UInt64(1)...200 {
            let paused = wrote(&pushback, id, Backlog(queuedBytes: 1_000_001), queued: 1_200 + Int(id % 7) * 100)
            #expect(paused)
        }
        #expect(pushback.paused.count == 200)
    }

    @Test func aWriterThatLeavesIsNotResumed() {
        var pushback = WriterPushback(maxPendingWrites: 10, maxQueuedBytes: 0)
        let paused11 = wrote(&pushback, 1, Backlog(pendingWrites: 11))
        #expect(paused11)
        let paused12 = wrote(&pushback, 2, Backlog(pendingWrites: 11))
        #expect(paused12)
        pushback.closed(1)
        let resumed13 = changed(&pushback, Backlog(pendingWrites: 0))
        #expect(resumed13 == [2])
    }

    @Test func aLimitOfZeroIsOff() {
        var off = WriterPushback(maxPendingWrites: 0, maxQueuedBytes: 0)
        #expect(!off.isEnabled)
        let paused14 = wrote(&off, 1, Backlog(pendingWrites: .max, queuedBytes: .max))
        #expect(!paused14)
        var bytesOnly = WriterPushback(maxPendingWrites: 0, maxQueuedBytes: 10)
        let paused15 = wrote(&bytesOnly, 1, Backlog(pendingWrites: 1_000_000, queuedBytes: 10))
        #expect(!paused15)
        let paused16 = wrote(&bytesOnly, 1, Backlog(pendingWrites: 0, queuedBytes: 11))
        #expect(paused16)
        let resumed17 = changed(&bytesOnly, Backlog(pendingWrites: 1_000_000, queuedBytes: 5))
        #expect(resumed17 == [1])
    }

    /// Random interleavings of writes, backlog changes and closes: a writer is paused only while
    /// pushing back, nobody stays paused once the backlog has drained, and each pause is undone
    /// exactly once (by a resume or a close).
    @Test func interleavingsNeverStrandAWriter() {
        var random = SplitMix(seed: 17)
        for _ in 0..<200 {
            var pushback = WriterPushback(maxPendingWrites: 50, maxQueuedBytes: 5_000)
            var readable = Set<UInt64>(1...8)
            for _ in 0..<300 {
                let backlog = Backlog(pendingWrites: Int(random.next() % 120), queuedBytes: Int(random.next() % 12_000))
                let id = 1 + random.next() % 8
                switch random.next() % 3 {
                case 0:
                    guard readable.contains(id) else { continue }  // a paused connection sends nothing
                    let queued = random.next() % 4 == 0 ? nil : Int(random.next() % 3_000)
                    let wasPushingBack = pushback.isPushingBack
                    let average = pushback.averageQueuedByWrite
                    if pushback.wrote(id, backlog: backlog, queuedByWrite: queued) {
                        #expect(pushback.isPushingBack)
                        readable.remove(id)
                    } else {
                        let light = queued.map { $0 < (wasPushingBack ? average : average + ($0 - average) / 16) / 2 } ?? false
                        #expect(!pushback.isPushingBack || pushback.isPaused(id) || (light && !pushback.storageIsBehind(backlog)))
                    }
                case 1:
                    let resumed = pushback.backlogChanged(backlog)
                    #expect(resumed.isDisjoint(with: readable), "only paused writers resume")
                    readable.formUnion(resumed)
                    if pushback.hasDrained(backlog) { #expect(pushback.paused.isEmpty) }
                default:
                    pushback.closed(id)
                    readable.insert(id)  // a new connection would take its place
                }
                #expect(readable.union(pushback.paused) == Set(1...8))
            }
            readable.formUnion(pushback.backlogChanged(Backlog()))
            #expect(readable == Set(1...8), "a drained backlog leaves nobody paused")
        }
    }
}

/// A small deterministic generator for the interleavings.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
