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

    /// Sets the soft limit to `target`, or to the hard limit when that is lower (also lowering a
    /// soft limit above `target`); the limits in force afterwards.
    @discardableResult
    public static func setSoft(to target: UInt64) -> Limits? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        let wanted = rlim_t(min(UInt64(limit.rlim_max), target))
        if limit.rlim_cur != wanted {
            limit.rlim_cur = wanted
            _ = setrlimit(resource, &limit)
        }
        return current()
    }

    /// Raises the soft limit (to the hard one, or to `target` when given: `setSoft`), then returns
    /// why `program` cannot run when fewer than `minimum` descriptors are allowed (nil when enough
    /// are, or when the limit cannot be read).
    public static func shortfall(minimum: UInt64, program: String, needs: String, target: UInt64? = nil) -> String? {
        guard let limits = target.map(setSoft(to:)) ?? raiseSoftToHard(), limits.soft < minimum else { return nil }
        return "\(program) needs at least \(minimum) open file descriptors (\(needs)); "
            + "this process may open only \(limits.soft) (ulimit -n, hard limit \(limits.hard)). "
            + "Raise it, e.g. `ulimit -n 4096`, LimitNOFILE= in a systemd unit, or --ulimit nofile= for a container."
    }

    /// The most descriptor slots `reserveTable` asks for: the kernel's table costs about 8 bytes a
    /// slot, so 8 MiB at this size.
    public static let largestReservedTable: UInt64 = 1 << 20

    /// Grows the kernel's table of this process's descriptors now, to the soft limit (at most
    /// `largestReservedTable` slots), by placing a descriptor at the top and closing it; the
    /// table never shrinks. Otherwise it doubles as connections arrive, and in a process with
    /// several threads each doubling waits for an RCU grace period (`expand_fdtable`): the loop
    /// thread stopped for 10–30 ms in `accept` when 1,000 connections arrived at once
    /// (docs/robustness.md, "A burst of onDisconnect ops, and the connection storm's start").
    /// Returns the slots the table holds afterwards (`FDSize` in /proc), or nil when unknown.
    @discardableResult
    public static func reserveTable() -> UInt64? {
        guard let limits = current(), limits.soft > 0 else { return nil }
        let top = Int32(clamping: min(limits.soft, largestReservedTable) - 1)
        let spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
        if spare >= 0 {
            if spare < top, dup2(spare, top) == top { close(top) }
            close(spare)
        }
        return tableSize()
    }

    /// The descriptor slots the kernel's table holds now (`FDSize` in /proc/self/status).
    public static func tableSize() -> UInt64? {
        guard let file = fopen("/proc/self/status", "r") else { return nil }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix("FDSize:") {
                return UInt64(String(text.dropFirst("FDSize:".count).filter(\.isNumber)))
            }
        }
        return nil
    }

    #if os(Linux)
    private static let resource = __rlimit_resource_t(UInt32(RLIMIT_NOFILE.rawValue))
    #else
    private static let resource = RLIMIT_NOFILE
    #endif
}
