#if canImport(Glibc)
import Glibc
#endif

/// Corpus files without Foundation: a path is a file, or a directory whose regular files (not
/// recursively) are inputs, in name order.
public enum FuzzFiles {
    public static func list(_ path: String) -> [String] {
        guard let directory = opendir(path) else { return [path] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
            if !name.hasPrefix("."), entry.pointee.d_type == UInt8(DT_REG) { names.append(path + "/" + name) }
        }
        return names.sorted()
    }

    public static func read(_ path: String) -> [UInt8]? {
        guard let file = fopen(path, "rb") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return bytes
    }
}
