import CStorageYield

/// A thread that commits in bulk gives the core back every so often, even inside one SQLite call
/// (`Sources/CStorageYield/include/storage_yield.h` says why and how).
public enum StorageThreadYield {
    /// Wraps SQLite's reads and writes; done before a database opens, once per process (later
    /// calls change nothing). False when this SQLite does not let its system calls be replaced:
    /// nothing yields then.
    @discardableResult
    public static func install() -> Bool { presence_storage_yield_install() == 0 }

    /// The calling thread yields after `microseconds` of work since it last yielded (0: never).
    /// Threads that never call this do not yield.
    public static func yieldHere(every microseconds: UInt64) {
        presence_storage_yield_every(microseconds.multipliedReportingOverflow(by: 1_000).partialValue)
    }

    /// The calling thread's work starts now (after a sleep, say): its next yield comes after
    /// `microseconds` more of it, not at its first read or write.
    public static func startOfWork() { presence_storage_yield_restart() }

    /// How many times the calling thread has yielded.
    public static var yieldsOnThisThread: UInt64 { presence_storage_yield_count() }
}
