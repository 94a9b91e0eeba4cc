import PresenceTesting
import Testing
@testable import PresenceCore

/// Always returns the same word: `next(upperBound: 64)` then always gives the same digit.
struct QueryConstantRandom: RandomNumberGenerator {
    var value: UInt64
    mutating func next() -> UInt64 { value }
}

@Suite struct PushIDTests {
    let alphabet = Set(PushID.alphabet)

    @Test func shape() {
        var generator = PushID.Generator()
        let id = generator.next(now: 1_700_000_000_000)
        #expect(id.count == 20)
        #expect(id.allSatisfy { alphabet.contains($0) })
        #expect(PushID.timestamp(of: id) == 1_700_000_000_000)
        #expect(PushID.alphabet.map(String.init).joined() == "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz")
        #expect(PushID.alphabet == PushID.alphabet.sorted { $0.asciiValue! < $1.asciiValue! })
    }

    @Test func timestampEncoding() {
        var generator = PushID.Generator()
        var zero = QueryConstantRandom(value: 0)
        #expect(generator.next(now: 0, using: &zero) == "--------" + "------------")
        #expect(generator.next(now: 0, using: &zero) == "--------" + "-----------0")
        #expect(generator.next(now: 1, using: &zero) == "-------0" + "------------")
        #expect(generator.next(now: 64, using: &zero) == "------0-" + "------------")
        #expect(generator.next(now: 64 * 64 + 63, using: &zero) == "-----0-z" + "------------")
        #expect(PushID.timestamp(of: "-----0-z------------") == Int64(64 * 64 + 63))
        #expect(PushID.timestamp(of: "short") == nil)
        #expect(PushID.timestamp(of: "-----0-z-----------!") == nil)
    }

    @Test func sameMillisecondIncrementsTheRandomPart() {
        var generator = PushID.Generator()
        var random = SeededRandom(seed: 7)
        let first = generator.next(now: 1_000, using: &random)
        let second = generator.next(now: 1_000, using: &random)
        #expect(first.prefix(8) == second.prefix(8))
        #expect(first.prefix(19) == second.prefix(19) || first.last == "z")
        #expect(first < second)
    }

    @Test func strictlyIncreasingForEqualOrIncreasingTime() {
        var generator = PushID.Generator()
        var random = SeededRandom(seed: 42)
        var previous = ""
        var now: Int64 = 1_700_000_000_000
        for step in 0..<5_000 {
            if step % 7 == 0 { now += Int64(step % 3) }
            let id = generator.next(now: now, using: &random)
            #expect(id > previous)
            #expect(QueryOrder.compareNames(previous, id) < 0 || previous.isEmpty)
            previous = id
        }
    }

    @Test func carriesThroughTheRandomPart() {
        var generator = PushID.Generator()
        var high = QueryConstantRandom(value: .max)  // digit 63 every time: "z"
        let first = generator.next(now: 5, using: &high)
        #expect(first == "-------4" + "zzzzzzzzzzzz")
        // All twelve random digits are at the maximum: the timestamp moves on by one millisecond.
        var zero = QueryConstantRandom(value: 0)
        let second = generator.next(now: 5, using: &zero)
        #expect(second == "-------5" + "------------")
        #expect(first < second)
        // Carry inside the random part.
        var mixed = PushID.Generator()
        var digits = QuerySequenceRandom(values: Array(repeating: 0, count: 11) + [63])
        let a = mixed.next(now: 9, using: &digits)
        let b = mixed.next(now: 9, using: &digits)
        #expect(a == "-------8" + "-----------z")
        #expect(b == "-------8" + "----------0-")
    }

    @Test func clockGoingBackwardsDoesNotReorder() {
        var generator = PushID.Generator()
        var random = SeededRandom(seed: 1)
        let late = generator.next(now: 2_000, using: &random)
        let early = generator.next(now: 1_000, using: &random)
        #expect(late < early)
        #expect(PushID.timestamp(of: early) == 2_000)
    }

    @Test func systemRandomIds() {
        var generator = PushID.Generator()
        let ids = (0..<100).map { _ in generator.next(now: 1_700_000_000_000) }
        #expect(ids == ids.sorted())
        #expect(Set(ids).count == ids.count)
    }
}

/// Yields digits from a list: `next(upperBound: 64)` maps the high bits, so store each digit there.
struct QuerySequenceRandom: RandomNumberGenerator {
    var values: [UInt64]
    var index = 0
    mutating func next() -> UInt64 {
        defer { index += 1 }
        return values[index % values.count] << 58
    }
}
