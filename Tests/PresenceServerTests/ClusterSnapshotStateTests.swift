import Foundation
@testable import PresenceServer
import Testing

@Suite struct ClusterSnapshotStateTests {
    /// The log a snapshot may trim: only what this node applied at least `--log-keep` ago.
    @Test func theTrimBoundTrailsTheAppliedRevisionByTheKeepTime() {
        let schedule = SnapshotSchedule()
        schedule.started(at: 0)
        #expect(schedule.trimBelow(at: 0, keepMilliseconds: 120_000) == 1) // nothing sampled yet
        for second in 0...300 { schedule.sample(at: Int64(second) * 1000, rev: UInt64(second) * 10, keepMilliseconds: 120_000) }
        // at 300 s: what was applied at 180 s (rev 1800) is 120 s old; everything after it stays
        #expect(schedule.trimBelow(at: 300_000, keepMilliseconds: 120_000) == 1801)
        #expect(schedule.trimBelow(at: 300_500, keepMilliseconds: 120_000) == 1801)
        #expect(schedule.trimBelow(at: 301_000, keepMilliseconds: 120_000) == 1811)
        // a quiet namespace keeps one sample per revision, not per beat
        schedule.sample(at: 302_000, rev: 3000, keepMilliseconds: 120_000)
        schedule.sample(at: 303_000, rev: 3000, keepMilliseconds: 120_000)
        #expect(schedule.trimBelow(at: 500_000, keepMilliseconds: 120_000) == 3001)
        // no keep: up to what is applied now
        schedule.sample(at: 501_000, rev: 3500, keepMilliseconds: 0)
        #expect(schedule.trimBelow(at: 501_000, keepMilliseconds: 0) == 3501)
        // following again forgets the samples: nothing is trimmed until the keep time has passed again
        schedule.started(at: 600_000)
        schedule.sample(at: 600_000, rev: 4000, keepMilliseconds: 120_000)
        #expect(schedule.trimBelow(at: 700_000, keepMilliseconds: 120_000) == 1)
        #expect(schedule.trimBelow(at: 720_000, keepMilliseconds: 120_000) == 4001)
    }

    @Test func theHistoryFileRemembersEpochsAndRefusesGarbage() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cluster-state-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("history.json").path
        let empty = try ClusterHistory(path: path)
        #expect(empty.epochs.isEmpty)
        #expect(empty.remember("E1", for: "demo") == nil)
        #expect(empty.remember("E2", for: "a/b \"c\"") == nil)
        #expect(try ClusterHistory(path: path).epochs == ["demo": "E1", "a/b \"c\"": "E2"])
        try Data("[1, 2]".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: ClusterHistory.Unreadable.self) { try ClusterHistory(path: path) }
        try Data(#"{"demo": 7}"#.utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: ClusterHistory.Unreadable.self) { try ClusterHistory(path: path) }
        let unwritable = try ClusterHistory(path: directory.appendingPathComponent("missing/history.json").path)
        #expect(unwritable.remember("E", for: "demo") != nil)
    }
}
