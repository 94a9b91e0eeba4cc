import ArgumentParser
import PresenceCore
import PresenceStorage

#if canImport(Glibc)
import Glibc
#endif

/// `presence-server export`: the database (or one namespace) as JSON, from a stopped server's
/// data directory. For a running server use REST: `GET /.json?ns=NS&format=export`.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Print a stopped server's database as JSON (all namespaces with their rules, or one namespace's tree).",
        discussion: """
            Examples:
              presence-server export data > backup.json
              presence-server export data --ns demo > demo.json
            """
    )

    @Argument(help: "The data directory of a stopped server.")
    var dataDir: String

    @Option(help: "Export only this namespace's tree (export format, with priorities).")
    var ns: String?

    func run() throws {
        do {
            let storage = try SQLiteStorage(directory: dataDir, options: .init(durability: .full))
            defer { try? storage.close() }
            let json = try ns.map { try StorageExport.exportNamespace($0, from: storage) } ?? StorageExport.exportDatabase(from: storage)
            print(JSONWriter.string(json))
        } catch {
            throw ValidationError("cannot export from \(dataDir): \(error)")
        }
    }
}

/// `presence-server import`: loads JSON made by `export` into a stopped server's data directory.
struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Load a JSON export into a stopped server's data directory (replacing what it names).",
        discussion: """
            Examples:
              presence-server import data backup.json
              presence-server import data demo.json --ns demo     # replaces namespace demo
            """
    )

    @Argument(help: "The data directory of a stopped server (created if missing).")
    var dataDir: String

    @Option(help: "Import the file as this namespace's tree (a file from `export --ns`).")
    var ns: String?

    @Argument(help: "The JSON file.")
    var file: String

    func run() throws {
        guard let text = RulesFile.readFile(file) else { throw ValidationError("cannot read \(file)") }
        do {
            let json = try JSONParser.parse(text, maxDepth: 64)
            mkdir(dataDir, 0o700)
            let storage = try SQLiteStorage(directory: dataDir, options: .init(durability: .full))
            defer { try? storage.close() }
            if let ns {
                try StorageExport.importNamespace(ns, json: json, into: storage)
            } else {
                try StorageExport.importDatabase(json, into: storage)
            }
            print("imported \(file) into \(dataDir)")
        } catch {
            throw ValidationError("cannot import \(file): \(error)")
        }
    }
}
