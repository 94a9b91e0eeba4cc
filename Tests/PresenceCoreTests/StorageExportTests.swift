import PresenceCore
import Testing

@Suite struct StorageExportTests {
    /// An import file is operator input: a time no Int64 can hold is refused, not converted (a trap).
    @Test(arguments: ["1e300", "-1e300", "9.3e18", "1.5"])
    func anImportWithAnImpossibleTimeIsRefused(_ time: String) throws {
        let text = #"{"format":"presence-database","version":1,"limitUsage":[{"ns":"a","limit":"l","uid":"u","count":1,"cooldownStartedAt":"#
            + time + "}]}"
        #expect(throws: StorageExport.ImportError.self) { try StorageExport.importBatch(database: try JSONParser.parse(text)) }
        let fine = text.replacing(time, with: "1700000000000")
        let batch = try StorageExport.importBatch(database: try JSONParser.parse(fine))
        #expect(batch.mutations.count == 1)
    }
}
