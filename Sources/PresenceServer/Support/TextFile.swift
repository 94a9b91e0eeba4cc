#if canImport(Glibc)
import Glibc
#endif

/// Whole UTF-8 files (rules, certificates, configuration), read without Foundation.
public enum TextFile {
    public static func read(_ path: String) -> String? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count > 0 { bytes.append(contentsOf: chunk[0..<count]) }
            if count < chunk.count { break }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
