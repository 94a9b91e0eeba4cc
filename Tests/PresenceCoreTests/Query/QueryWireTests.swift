import Testing
@testable import PresenceCore

@Suite struct QueryWireTests {
    typealias F = QueryFixture

    @Test func emptyObjectIsTheDefaultQuery() throws {
        let spec = try F.wire("{}")
        #expect(spec == .default)
        #expect(!spec.isFiltered)
        #expect(spec.identity == "default")
        #expect(try F.wire(#"{"i":".priority"}"#).identity == "default")
        #expect(try F.wire(#"{"i":null,"future":1}"#) == .default)
    }

    @Test func indexOnlyIsNotFiltered() throws {
        let spec = try F.wire(#"{"i":"height"}"#)
        #expect(spec.index == F.child("height"))
        #expect(!spec.isFiltered)
        #expect(spec.identity == #"{"i":"height"}"#)
        #expect(try F.wire(#"{"i":".key"}"#).index == .key)
        // Found by fuzzing: a path naming only .priority is the priority index, whose wire name
        // it then keeps (as a child index it came back as another query).
        for name in ["/.priority", ".priority/", "//.priority//"] {
            let spec = try F.wire(#"{"i":"\#(name)","l":2}"#)
            #expect(spec.index == .priority)
            #expect(try QuerySpec(wire: spec.wireObject) == spec)
        }
        #expect(try F.wire(#"{"i":".value"}"#).index == .value)
        #expect(try F.wire(#"{"i":"ratings/pos"}"#).index == F.child("ratings/pos"))
        #expect(try F.wire(#"{"i":"/ratings/pos/"}"#).identity == #"{"i":"ratings/pos"}"#)
    }

    /// `ref.orderByChild('height').startAt(3.5).limitToFirst(2)` as the current JS SDK sends it.
    @Test func startAtWithLimit() throws {
        let spec = try F.wire(#"{"sp":3.5,"sin":true,"l":2,"vf":"l","i":"height"}"#)
        #expect(spec == QuerySpec(index: F.child("height"), start: QueryBound(value: .number(3.5)), limit: .first(2)))
        #expect(spec.isFiltered)
        #expect(spec.identity == #"{"i":"height","l":2,"sin":true,"sp":3.5,"vf":"l"}"#)
        #expect(F.keys(spec, F.dinosaurs) == ["stegosaurus", "bruhathkayosaurus"])
    }

    /// `orderByChild('height').startAfter(0.6)` / `.endBefore(4)`: sentinel names, exclusive.
    @Test func startAfterAndEndBeforeWithSentinels() throws {
        let spec = try F.wire(#"{"sp":0.6,"sn":"[MAX_NAME]","sin":false,"ep":4,"en":"[MIN_NAME]","ein":false,"i":"height"}"#)
        #expect(spec.start == QueryBound(value: .number(0.6), name: QueryOrder.maxName, inclusive: false))
        #expect(spec.end == QueryBound(value: .number(4), name: QueryOrder.minName, inclusive: false))
        #expect(F.keys(spec, F.dinosaurs) == ["lambeosaurus", "triceratops"])
        #expect(spec.identity == #"{"ein":false,"en":"[MIN_NAME]","ep":4,"i":"height","sin":false,"sn":"[MAX_NAME]","sp":0.6}"#)
    }

    /// `equalTo(v, k)` is `sp=ep=v`, `sn=en=k`.
    @Test func equalToWithName() throws {
        let spec = try F.wire(#"{"sp":0.6,"sn":"pterodactyl","sin":true,"ep":0.6,"en":"pterodactyl","ein":true,"i":"height"}"#)
        #expect(F.keys(spec, F.dinosaurs) == ["pterodactyl"])
    }

    /// 8.x clients send no `sin`/`ein`: inclusive.
    @Test func missingInclusiveFlagsMeanInclusive() throws {
        let spec = try F.wire(#"{"sp":21,"ep":55,"i":".value"}"#)
        #expect(spec.start?.inclusive == true && spec.end?.inclusive == true)
        #expect(F.keys(spec, F.scores) == ["lambeosaurus", "triceratops", "bruhathkayosaurus"])
        // The canonical identity always carries the flags.
        #expect(spec.identity == #"{"ein":true,"ep":55,"i":".value","sin":true,"sp":21}"#)
    }

    @Test func keyIndexIgnoresNames() throws {
        let spec = try F.wire(#"{"sp":"lambeosaurus","sn":"zzz","sin":false,"i":".key","l":2,"vf":"l"}"#)
        #expect(F.keys(spec, F.dinosaurs) == ["linhenykus", "pterodactyl"])
    }

    @Test func limitDirectionDefaultsLikeTheJSClient() throws {
        #expect(try F.wire(#"{"l":3}"#).limit == .last(3))
        #expect(try F.wire(#"{"l":3,"ep":1}"#).limit == .last(3))
        #expect(try F.wire(#"{"l":3,"sp":1}"#).limit == .first(3))
        #expect(try F.wire(#"{"l":3,"vf":"r","sp":1}"#).limit == .last(3))
        #expect(try F.wire(#"{"l":3,"vf":"l"}"#).limit == .first(3))
        #expect(try F.wire(#"{"vf":"l"}"#).limit == nil)
    }

    @Test func nullValuesAndNames() throws {
        let spec = try F.wire(#"{"sp":null,"sn":null,"ep":null,"en":"b","i":"x"}"#)
        #expect(spec.start == QueryBound(value: .null))
        #expect(spec.end == QueryBound(value: .null, name: "b"))
        #expect(spec.isFiltered)
        // Orphan names without values are ignored.
        #expect(try F.wire(#"{"sn":"a","sin":false}"#) == .default)
    }

    @Test func priorityIndexWhenIAbsent() throws {
        let spec = try F.wire(#"{"sp":"a","ep":"b"}"#)
        #expect(spec.index == .priority)
        #expect(spec.identity == #"{"ein":true,"ep":"b","sin":true,"sp":"a"}"#)
    }

    @Test func wireObjectRoundTrips() throws {
        let specs = [
            QuerySpec(index: .key, start: QueryBound(value: .string("a"), inclusive: false), limit: .first(5)),
            QuerySpec(index: F.child("a/b"), end: QueryBound(value: .bool(true), name: "k"), limit: .last(1)),
            QuerySpec(index: .value, start: QueryBound(value: .string("x\"y")), end: QueryBound(value: .string("z"))),
            QuerySpec(start: QueryBound(value: .null)),
        ]
        for spec in specs {
            #expect(try QuerySpec(wire: spec.wireObject) == spec)
            #expect(try QuerySpec(wire: JSONParser.parse(spec.identity)) == spec)
        }
    }

    @Test(arguments: [
        ("[]", "query must be a JSON object"),
        (#"{"i":5}"#, "i must be a string"),
        (#"{"i":""}"#, #"i must name an index: "" is not a valid child path"#),
        (#"{"i":"$key"}"#, #"i must name an index: "$key" is not a valid child path"#),
        (#"{"i":"a.b"}"#, #"i must name an index: "a.b" is not a valid child path"#),
        (#"{"sp":{"a":1}}"#, "sp cannot be an object or an array"),
        (#"{"ep":[1]}"#, "ep cannot be an object or an array"),
        (#"{"sp":1,"sn":2}"#, "sn must be a string"),
        (#"{"ep":1,"ein":"yes"}"#, "ein must be a boolean"),
        (#"{"l":0}"#, "l must be a positive integer (1 to 9007199254740991)"),
        (#"{"l":1.5}"#, "l must be a positive integer (1 to 9007199254740991)"),
        (#"{"l":"3"}"#, "l must be a positive integer (1 to 9007199254740991)"),
        (#"{"l":1e300}"#, "l must be a positive integer (1 to 9007199254740991)"),
        (#"{"l":1,"vf":"x"}"#, #"vf must be "l" or "r""#),
        (#"{"i":".key","sp":1}"#, "sp and ep must be strings when ordering by key"),
        (#"{"sp":true}"#, "sp and ep must be valid priorities (null, a number or a string) when ordering by priority"),
    ])
    func invalidQueries(text: String, message: String) {
        #expect {
            _ = try F.wire(text)
        } throws: { error in
            (error as? QueryError)?.description == message
        }
    }
}
