import PresenceCore

#if canImport(Glibc)
import Glibc
#endif

/// The optional analytics log of limit checks: one JSON object per line, appended, flushed after
/// each event-loop step. Reopened on SIGHUP so log rotation can move the file away.
final class LimitEventLog {
    let path: String
    private var file: UnsafeMutablePointer<FILE>?

    init(path: String) throws(ServerError) {
        self.path = path
        guard let file = fopen(path, "a") else {
            throw ServerError.startFailed("cannot open the limit event log \(path): \(String(cString: strerror(errno)))")
        }
        self.file = file
    }

    deinit { if let file { fclose(file) } }

    func append(_ events: [LimitEvent]) {
        guard let file, !events.isEmpty else { return }
        var text = ""
        for event in events {
            JSONWriter.write(event.json, into: &text)
            text += "\n"
        }
        fputs(text, file)
        fflush(file)
    }

    /// After rotation: continue in a new file at the same path (the old one stays as it was).
    func reopen() -> Bool {
        guard let reopened = fopen(path, "a") else { return false }
        if let file { fclose(file) }
        file = reopened
        return true
    }
}
