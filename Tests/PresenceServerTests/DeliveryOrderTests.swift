@testable import PresenceServer
import PresenceTesting
import Testing

/// The durability barrier against its rule: pushes now, an ack after its step is durable, nothing
/// overtakes an ack on its destination.
@Suite struct DeliveryOrderTests {
    /// A test harness: lanes by destination, and what each destination has received.
    struct Harness {
        var order = DeliveryOrder<Int>()
        var lanes: [Int: DeliveryLane<String>] = [:]
        var received: [Int: [String]] = [:]
        var closed: Set<Int> = []

        mutating func send(_ item: String, to destination: Int, waitsFor sequence: UInt64? = nil) {
            guard !closed.contains(destination) else { return }
            var lane = lanes[destination] ?? DeliveryLane()
            if order.submit(item, waitsFor: sequence, to: destination, lane: &lane) {
                received[destination, default: []].append(item)
            }
            lanes[destination] = lane
        }

        mutating func durable(_ sequence: UInt64) {
            for destination in order.markDurable(upTo: sequence) {
                guard var lane = lanes[destination], !closed.contains(destination) else { continue }
                received[destination, default: []] += order.release(destination, lane: &lane)
                lanes[destination] = lane
            }
        }

        mutating func close(_ destination: Int) {
            closed.insert(destination)
            lanes[destination] = nil
        }
    }

    @Test func pushesGoOutAtOnce() {
        var harness = Harness()
        harness.send("push 1", to: 1)
        harness.send("push 2", to: 1)
        #expect(harness.received[1] == ["push 1", "push 2"])
        #expect(!harness.order.isHolding)
    }

    @Test func anAckWaitsForItsStepAndNothingOvertakesIt() {
        var harness = Harness()
        harness.send("echo", to: 1)
        harness.send("ack r1", to: 1, waitsFor: 5)
        harness.send("push after the ack", to: 1)
        harness.send("listen reply", to: 1, waitsFor: nil)
        #expect(harness.received[1] == ["echo"])
        harness.durable(4)
        #expect(harness.received[1] == ["echo"])
        harness.durable(5)
        #expect(harness.received[1] == ["echo", "ack r1", "push after the ack", "listen reply"])
        #expect(!harness.order.isHolding)
        // Once released, pushes go straight out again.
        harness.send("push 3", to: 1)
        #expect(harness.received[1]?.last == "push 3")
    }

    @Test func anotherDestinationIsNotHeldBySomeoneElsesAck() {
        var harness = Harness()
        harness.send("ack", to: 1, waitsFor: 1)
        harness.send("push", to: 2)
        #expect(harness.received[1] == nil)
        #expect(harness.received[2] == ["push"])
    }

    @Test func acksReleaseInStepsAsStorageCatchesUp() {
        var harness = Harness()
        harness.send("ack 1", to: 1, waitsFor: 1)
        harness.send("ack 2", to: 1, waitsFor: 2)
        harness.send("ack 3", to: 1, waitsFor: 3)
        harness.durable(2)
        #expect(harness.received[1] == ["ack 1", "ack 2"])
        harness.durable(1)  // late, out-of-order report: nothing changes
        #expect(harness.received[1] == ["ack 1", "ack 2"])
        harness.durable(3)
        #expect(harness.received[1] == ["ack 1", "ack 2", "ack 3"])
    }

    @Test func anAckForAStepAlreadyDurableIsNotHeld() {
        var harness = Harness()
        harness.durable(10)
        harness.send("ack", to: 1, waitsFor: 7)
        #expect(harness.received[1] == ["ack"])
    }

    @Test func aClosedDestinationGetsNothingMore() {
        var harness = Harness()
        harness.send("ack", to: 1, waitsFor: 1)
        harness.close(1)
        harness.durable(1)
        #expect(harness.received[1] == nil)
        #expect(!harness.order.isHolding)
    }

    @Test func aCommitVisitsOnlyTheLanesItReleases() {
        var harness = Harness()
        for writer in 1...1_000 { harness.send("ack", to: writer, waitsFor: UInt64(writer)) }
        harness.send("push behind the first ack", to: 1)
        #expect(harness.order.markDurable(upTo: 3) == [1, 2, 3])
        #expect(harness.order.markDurable(upTo: 3) == [])
        // The push waited for sequence 1 with its ack, so it added no lane of its own.
        #expect(harness.order.markDurable(upTo: 1_000).count == 997)
        #expect(!harness.order.isHolding)
    }

    /// Random interleavings of writes (an ack for the writer, pushes to listeners), listens
    /// (a reply and the initial data, no barrier), commits and closes, checked against the rule
    /// stated as a model: each open destination has received exactly the longest prefix of what
    /// was sent to it whose acks are all durable.
    @Test(arguments: 0..<200)
    func randomInterleavingsMatchTheModel(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var harness = Harness()
        var sent: [Int: [(item: String, sequence: UInt64)]] = [:]
        var nextSequence: UInt64 = 0
        var committed: UInt64 = 0
        let destinations = 1...5
        for step in 0..<120 {
            let destination = Int(random.next() % 5) + 1
            switch random.next() % 10 {
            case 0...3:  // a write: the writer's ack waits for the new step; listeners get pushes now
                nextSequence += 1
                for listener in destinations where listener != destination && random.next() % 2 == 0 {
                    harness.send("push \(step)", to: listener)
                    if !harness.closed.contains(listener) { sent[listener, default: []].append(("push \(step)", 0)) }
                }
                harness.send("ack \(step)", to: destination, waitsFor: nextSequence)
                if !harness.closed.contains(destination) { sent[destination, default: []].append(("ack \(step)", nextSequence)) }
            case 4...5:  // a listen: the initial data and the reply, no barrier (no change to store)
                harness.send("data \(step)", to: destination)
                harness.send("ok \(step)", to: destination)
                if !harness.closed.contains(destination) {
                    sent[destination, default: []] += [("data \(step)", 0), ("ok \(step)", 0)]
                }
            case 6...8:  // storage reports some prefix of the steps durable
                if nextSequence > committed { committed += 1 + random.next() % (nextSequence - committed) }
                harness.durable(committed)
            default:
                if random.next() % 3 == 0 { harness.close(destination) }
            }
            for checked in destinations where !harness.closed.contains(checked) {
                let all = sent[checked] ?? []
                let expected = all.prefix { $0.sequence <= committed }.map(\.item)
                #expect(harness.received[checked] ?? [] == expected, "seed \(seed), step \(step), destination \(checked)")
            }
        }
    }
}
