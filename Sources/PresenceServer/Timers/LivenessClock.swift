/// One connection's liveness: when anything (a frame, a fragment, a PONG) was last heard, and when
/// it was last pinged. Pure; the sweep asks it what to do.
///
/// - heard from less than `pingAfter` ago: nothing;
/// - silent for `pingAfter`: one PING (as lws would send), not repeated until something is heard;
/// - silent for `hangUpAfter`: hang up without a close frame (as lws's hang-up).
struct LivenessClock {
    enum Action: Equatable {
        case none
        case ping
        /// Silent for this many milliseconds: drop it.
        case hangUp(quietMilliseconds: Int64)
    }

    private(set) var lastHeardAt: Int64
    private(set) var pingSentAt: Int64 = 0
    /// Dropped by the sweep; lws will report the close.
    private(set) var hungUp = false

    init(now: Int64) {
        lastHeardAt = now
    }

    mutating func heard(at now: Int64) {
        lastHeardAt = now
    }

    /// `closing`: the server is already closing it (no ping then).
    mutating func check(now: Int64, pingAfter: Int64, hangUpAfter: Int64, closing: Bool) -> Action {
        guard !hungUp else { return .none }
        let quiet = now - lastHeardAt
        if quiet >= hangUpAfter {
            hungUp = true
            return .hangUp(quietMilliseconds: quiet)
        }
        if quiet >= pingAfter, pingSentAt <= lastHeardAt, !closing {
            pingSentAt = now
            return .ping
        }
        return .none
    }
}
