import Foundation
import PresenceFuzzing
import Testing

/// Every fuzz target over its seed corpus (`Fuzz/corpus/<target>`) and over the inputs that once
/// crashed it (`Fuzz/regressions/<target>`): the same invariants `make fuzz` checks, as plain
/// tests. A broken invariant stops the test process, which fails the run.
@Suite struct FuzzCorpusTests {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz")

    static func inputs(_ folder: String, _ target: String) -> [String] {
        FuzzFiles.list(fuzz.appendingPathComponent(folder).appendingPathComponent(target).path)
    }

    @Test(arguments: FuzzTarget.all.map(\.name))
    func seedsAndRegressionsKeepEveryInvariant(target name: String) throws {
        let target = try #require(FuzzTarget.named(name))
        let seeds = Self.inputs("corpus", name)
        #expect(!seeds.isEmpty, "Fuzz/corpus/\(name) has no seeds (python3 Fuzz/make-seeds.py)")
        for file in seeds + Self.inputs("regressions", name) {
            target.run(try #require(FuzzFiles.read(file)))
        }
    }
}
