import Foundation
@testable import PresenceServer
import Testing

@Suite struct ClusterStateFileTests {
    private func temporaryDirectory() -> String {
        let path = NSTemporaryDirectory() + "cluster-state-tests-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func eachNodeNameHasItsOwnFileInTheDataDirectory() throws {
        #expect(try ClusterStateFile.defaultPath(dataDirectory: "data", nodeName: "host:9001") == "data/cluster-state-host:9001.json")
        #expect(try ClusterStateFile.defaultPath(dataDirectory: "/var/lib/p/", nodeName: "a") == "/var/lib/p/cluster-state-a.json")
        // Names that differ only in bytes a file name cannot hold still get different files.
        let slash = try ClusterStateFile.defaultPath(dataDirectory: "d", nodeName: "a/b")
        let percent = try ClusterStateFile.defaultPath(dataDirectory: "d", nodeName: "a%2Fb")
        #expect(slash == "d/cluster-state-a%2Fb.json")
        #expect(percent == "d/cluster-state-a%252Fb.json")
        #expect(try ClusterStateFile.defaultPath(dataDirectory: "d", nodeName: "é ..") == "d/cluster-state-%C3%A9%20...json")
        #expect(throws: ClusterStateFile.Unusable.self) {
            try ClusterStateFile.defaultPath(dataDirectory: "d", nodeName: String(repeating: "/", count: 200))
        }
    }

    @Test func prepareCreatesTheDirectoryAndAnEmptyMemory() throws {
        let directory = temporaryDirectory() + "/nested/data"
        let path = directory + "/cluster-state-a.json"
        #expect(ClusterStateFile.prepare(path) == nil)
        let data = try #require(FileManager.default.contents(atPath: path))
        #expect(String(decoding: data, as: UTF8.self) == "{}")
    }

    @Test func prepareKeepsWhatTheNodeRemembers() throws {
        let path = temporaryDirectory() + "/state.json"
        let history = try ClusterHistory(path: path)
        #expect(history.remember("e1", for: "demo") == nil)
        #expect(ClusterStateFile.prepare(path) == nil)
        #expect(try ClusterHistory(path: path).epochs == ["demo": "e1"])
    }

    @Test func prepareSaysWhyItCannotWrite() throws {
        let directory = temporaryDirectory()
        // A data directory that is a file cannot hold the memory.
        let file = directory + "/not-a-directory"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        let failure = try #require(ClusterStateFile.prepare(file + "/cluster-state-a.json"))
        #expect(failure.contains("cannot create the directory"))
        // A file that is not a memory is refused, not overwritten.
        let garbled = directory + "/garbled.json"
        #expect(FileManager.default.createFile(atPath: garbled, contents: Data("[1,2]".utf8)))
        let refusal = try #require(ClusterStateFile.prepare(garbled))
        #expect(refusal.contains("is not a JSON object"))
        #expect(String(decoding: FileManager.default.contents(atPath: garbled) ?? Data(), as: UTF8.self) == "[1,2]")
    }
}
