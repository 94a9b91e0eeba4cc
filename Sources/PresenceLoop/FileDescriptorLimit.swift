#if canImport(Glibc)
import Glibc
#endif

/// The process's limit on open file descriptors (`ulimit -n`).
///
/// Both binaries raise the soft limit to the hard one (each connection is a descriptor), then check
/// that what is left is enough to start at all. Below a handful of descriptors libuv cannot open
/// its loop, lws cannot load its event-loop plugin or open a socket, and some of those failures
/// end in an abort or a hang rather than an error; checking first turns them into one clear line.
public enum FileDescriptorLimit {
    public struct Limits: Equatable, Sendable {
        public var soft: UInt64
        public var hard: UInt64
    }

    public static func current() -> Limits? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        return Limits(soft: UInt64(limit.rlim_cur), hard: UInt64(limit.rlim_max))
    }

    /// Raises the soft limit to the hard one where it is lower; the limits in force afterwards.
    @discardableResult
    public static func raiseSoftToHard() -> Limits? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(resource, &limit)
        }
        return current()
    }

    /// Raises the soft limit, then returns why `program` cannot run when fewer than `minimum`
    /// descriptors are allowed (nil when enough are, or when the limit cannot be read).
    public static func shortfall(minimum: UInt64, program: String, needs: String) -> String? {
        guard let limits = raiseSoftToHard(), limits.soft < minimum else { return nil }
        return "\(program) needs at least \(minimum) open file descriptors (\(needs)); "
            + "this process may open only \(limits.soft) (ulimit -n, hard limit \(limits.hard)). "
            + "Raise it, e.g. `ulimit -n 4096`, LimitNOFILE= in a systemd unit, or --ulimit nofile= for a container."
    }

    #if os(Linux)
    private static let resource = __rlimit_resource_t(UInt32(RLIMIT_NOFILE.rawValue))
    #else
    private static let resource = RLIMIT_NOFILE
    #endif
}
