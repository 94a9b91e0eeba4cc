import PresenceCore

/// The app lifecycle states that matter for presence.
public enum LifecycleState: String, Sendable, Equatable {
    case active, inactive, background

    /// What presence the state stands for.
    public var isOnline: Bool { self == .active }
}

/// What ``AppPresence`` asks the connection to do.
public enum PresenceAction: Equatable, Sendable {
    /// `onDisconnect().set(value)` at `path` (always issued right before an online write).
    case registerOnDisconnect(path: Path, value: JSON)
    /// `set(value)` at `path`: `{online, lastSeen: TIMESTAMP}`.
    case write(path: Path, value: JSON, online: Bool)
}

/// The seed app's presence logic as a pure state machine with an injected clock.
///
/// * Becoming active writes `users/{uid}/presence = {online: true, lastSeen: TIMESTAMP}` after
///   registering `onDisconnect().set({online: false, lastSeen: TIMESTAMP})`.
/// * `background` and `inactive` write `{online: false, lastSeen: TIMESTAMP}`.
/// * Transitions are debounced: a state is written only once it has stood for the whole window,
///   and only when it changes what was last written; so background-then-foreground within the
///   window writes nothing.
/// * `terminate` writes offline at once (best effort).
public struct AppPresence: Sendable {
    public let uid: String
    public let debounceMilliseconds: Int64
    public let path: Path

    /// The last observed lifecycle state (nil before the first event).
    public private(set) var state: LifecycleState?
    /// The online value last written (nil: nothing written yet).
    public private(set) var published: Bool?
    /// When the observed state will have stood long enough to be written.
    public private(set) var pendingSince: Int64?

    public init(uid: String, debounceMilliseconds: Int64 = 3000) {
        self.uid = uid
        self.debounceMilliseconds = debounceMilliseconds
        self.path = Path(validated: ["users", uid, "presence"])
    }

    /// `{online: online, lastSeen: {".sv": "timestamp"}}`.
    public static func presenceValue(online: Bool) -> JSON {
        .object([("online", .bool(online)), ("lastSeen", .object([(".sv", "timestamp")]))])
    }

    /// The time at which ``timerFired(now:)`` has work.
    public var nextDeadline: Int64? {
        guard let since = pendingSince else { return nil }
        return since + debounceMilliseconds
    }

    /// A lifecycle event. Returns the actions due now (only when the debounce window is zero).
    public mutating func lifecycle(_ newState: LifecycleState, now: Int64) -> [PresenceAction] {
        state = newState
        if published == newState.isOnline {
            pendingSince = nil  // back to what is already written: nothing to do
            return []
        }
        pendingSince = now
        return timerFired(now: now)
    }

    /// Writes the observed state once it has stood for the debounce window.
    public mutating func timerFired(now: Int64) -> [PresenceAction] {
        guard let since = pendingSince, now - since >= debounceMilliseconds, let state else { return [] }
        pendingSince = nil
        return publish(online: state.isOnline)
    }

    /// The connection (re)connected and the server ran or retired the old session's onDisconnect:
    /// an online user must be written online again. `alreadyQueued` is true when an online write is
    /// still waiting to be sent or acknowledged (then it will do).
    public mutating func reconnected(alreadyQueued: Bool) -> [PresenceAction] {
        guard published == true, !alreadyQueued else { return [] }
        return [.write(path: path, value: Self.presenceValue(online: true), online: true)]
    }

    /// The app terminates: write offline at once, whatever the debounce.
    public mutating func terminate(now: Int64) -> [PresenceAction] {
        pendingSince = nil
        state = .background
        published = false
        return [.write(path: path, value: Self.presenceValue(online: false), online: false)]
    }

    private mutating func publish(online: Bool) -> [PresenceAction] {
        published = online
        if online {
            return [
                .registerOnDisconnect(path: path, value: Self.presenceValue(online: false)),
                .write(path: path, value: Self.presenceValue(online: true), online: true),
            ]
        }
        return [.write(path: path, value: Self.presenceValue(online: false), online: false)]
    }
}
