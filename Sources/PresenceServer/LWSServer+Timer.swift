import CLibWebSockets
import PresenceCore

extension LWSServer {
    /// Hands the engine's changes to storage, performs what it produced (holding acknowledgements
    /// until their changes are durable), then arms the one timer for its next deadline. Returns
    /// the sequence the step's acknowledgements wait for, if any.
    @discardableResult
    func flushEngine() -> UInt64? {
        var barrier: UInt64?
        if let writer = storageWriter, let batch = engine.takeJournal() {
            writer.submit(batch)
            barrier = batch.sequence
        }
        perform(engine.drainEffects(), barrier: barrier)
        recordLimitEvents()
        for notice in engine.takeNotices() { logger.warning("\(notice)") }
        armEngineTimer()
        return barrier
    }

    /// One lws timer for everything timed in the core (lws inserts timers with a linear sorted
    /// insert, so the shell never keeps one per connection). Re-armed only when the deadline moves
    /// earlier; a late-armed timer just finds nothing due and re-arms.
    func armEngineTimer() {
        guard let context, let deadline = engine.nextDeadline else { return }
        if let armed = engineTimerDeadline, armed <= deadline { return }
        if engineTimer == nil { engineTimer = makeTimer() }
        engineTimerDeadline = deadline
        let delayMicroseconds = max(1, (deadline - now()) * 1000)
        lws_sul_schedule(context, 0, &engineTimer!.pointee.sul, { sul in
            guard let sul else { return }
            let server = LWSServer.owner(of: sul)
            server.engineTimerDeadline = nil
            server.engine.tick(now: server.now())
            server.flushEngine()
        }, delayMicroseconds)
    }

    /// A timer owned by this server (lws `sul` with a back pointer), freed in `deinit`.
    func makeTimer() -> UnsafeMutablePointer<lwss_timer_t> {
        let timer = UnsafeMutablePointer<lwss_timer_t>.allocate(capacity: 1)
        timer.initialize(to: lwss_timer_t())
        timer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        return timer
    }

    /// The server a timer callback's `sul` belongs to.
    static func owner(of sul: UnsafeMutablePointer<lws_sorted_usec_list_t>) -> LWSServer {
        Unmanaged<LWSServer>.fromOpaque(lwss_timer_from_sul(sul)!.pointee.owner).takeUnretainedValue()
    }
}
