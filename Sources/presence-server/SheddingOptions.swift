import ArgumentParser
import PresenceCore
import PresenceServer

/// The flags of load shedding past saturation (docs/performance.md "Past saturation: shedding
/// writes", docs/robustness.md).
struct SheddingOptions: ParsableArguments {
    @Option(help: "Past saturation: the event loop busy at least this percent of a 100 ms window while writes wait unread (--shed-read-delay-ms), three windows in a row, starts refusing a share of data writes (p, m, transactions, REST PUT/PATCH/POST/DELETE) at once with 'unavailable' (REST 503 + Retry-After), the heaviest writers first, adapting the share so the loop keeps some idle time; never auth, listens, onDisconnect or pings. 0 = this signal off.")
    var shedBusyPercent = ServerConfiguration().shedBusyPercent

    @Option(help: "Past saturation: with the loop busy (--shed-busy-percent), writes waiting unread in the kernel longer than this many milliseconds (writers' unread bytes over the bytes read per second) count as overloaded; a busy loop that keeps reading (it batches under load) is not shed. 0 = the busy share alone.")
    var shedReadDelayMs = ServerConfiguration().shedReadDelayMilliseconds

    @Option(help: "Past saturation: more than this many writes read but not yet durable at the end of a 100 ms window counts as overloaded for write shedding (bounds an ack's wait; below --pushback-pending-writes, which stays the backstop). 0 = this signal off; both shed flags 0 = no shedding.")
    var shedPendingWrites = ServerConfiguration().shedPendingWrites

    static let flagNames = ["shed-busy-percent", "shed-read-delay-ms", "shed-pending-writes"]

    func validate() throws {
        guard (0...100).contains(shedBusyPercent) else { throw ValidationError("--shed-busy-percent must be between 0 (off) and 100") }
        guard (0...60_000).contains(shedReadDelayMs) else { throw ValidationError("--shed-read-delay-ms must be between 0 and 60000") }
        guard shedPendingWrites >= 0 else { throw ValidationError("--shed-pending-writes must be 0 (off) or more") }
    }

    func apply(to configuration: inout ServerConfiguration) {
        configuration.shedBusyPercent = shedBusyPercent
        configuration.shedPendingWrites = shedPendingWrites
        configuration.shedReadDelayMilliseconds = shedReadDelayMs
    }

    var effectiveConfiguration: [(String, JSON)] {
        [("shed-busy-percent", .number(Double(shedBusyPercent))), ("shed-read-delay-ms", .number(Double(shedReadDelayMs))),
         ("shed-pending-writes", .number(Double(shedPendingWrites)))]
    }
}
