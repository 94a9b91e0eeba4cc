import Testing
@testable import PresenceCore

@Suite struct QueryRESTTests {
    typealias F = QueryFixture

    func rest(_ parameters: [String: String]) throws(QueryError) -> QuerySpec {
        try QuerySpec(rest: parameters)
    }

    @Test func noQueryParametersIsTheDefault() throws {
        #expect(try rest([:]) == .default)
        #expect(try rest(["ns": "demo", "print": "pretty", "shallow": "true", "auth": "x"]) == .default)
    }

    @Test func orderByForms() throws {
        #expect(try rest(["orderBy": #""$key""#]).index == .key)
        #expect(try rest(["orderBy": #""$value""#]).index == .value)
        #expect(try rest(["orderBy": #""$priority""#]).index == .priority)
        #expect(try rest(["orderBy": #""height""#]).index == F.child("height"))
        #expect(try rest(["orderBy": #""ratings/pos""#]).index == F.child("ratings/pos"))
        #expect(try !rest(["orderBy": #""height""#]).isFiltered)
    }

    /// What firebase-admin-python sends for its TestAdvancedQueries.
    @Test func pythonAdminQueries() throws {
        let height = #""height""#
        #expect(try F.keys(rest(["orderBy": height, "limitToFirst": "2"]), F.dinosaurs) == Array(F.heightSorted.prefix(2)))
        #expect(try F.keys(rest(["orderBy": height, "limitToLast": "2"]), F.dinosaurs) == Array(F.heightSorted.suffix(2)))
        #expect(try F.keys(rest(["orderBy": height, "startAt": "3.5"]), F.dinosaurs) == Array(F.heightSorted.suffix(2)))
        #expect(try F.keys(rest(["orderBy": height, "endAt": "3.5"]), F.dinosaurs) == Array(F.heightSorted.prefix(4)))
        #expect(try F.keys(rest(["orderBy": height, "startAt": "2.5", "endAt": "5"]), F.dinosaurs)
            == Array(F.heightSorted[3..<5]))
        #expect(try F.keys(rest(["orderBy": height, "equalTo": "0.6"]), F.dinosaurs) == ["linhenykus", "pterodactyl"])
        #expect(try Set(F.keys(rest(["orderBy": #""ratings/pos""#, "startAt": "4"]), F.dinosaurs))
            == ["pterodactyl", "stegosaurus", "triceratops"])
        #expect(try F.keys(rest(["orderBy": #""$key""#, "limitToFirst": "2"]), F.dinosaurs)
            == ["bruhathkayosaurus", "lambeosaurus"])
        #expect(try F.keys(rest(["orderBy": #""$value""#]), F.scores)
            == ["stegosaurus", "lambeosaurus", "triceratops", "bruhathkayosaurus", "linhenykus", "pterodactyl"])
    }

    @Test func exclusiveBounds() throws {
        let spec = try rest(["orderBy": #""$value""#, "startAfter": "22", "endBefore": "93"])
        #expect(spec.start == QueryBound(value: .number(22), inclusive: false))
        #expect(spec.end == QueryBound(value: .number(93), inclusive: false))
        #expect(F.keys(spec, F.scores) == ["bruhathkayosaurus", "linhenykus"])
        #expect(try F.keys(rest(["orderBy": #""height""#, "startAfter": "0.6"]), F.dinosaurs)
            == Array(F.heightSorted.dropFirst(2)))
        #expect(try F.keys(rest(["orderBy": #""$key""#, "startAfter": #""lambeosaurus""#, "limitToFirst": "1"]), F.dinosaurs)
            == ["linhenykus"])
    }

    @Test func equalToSetsBothEnds() throws {
        let spec = try rest(["orderBy": #""$key""#, "equalTo": #""triceratops""#])
        #expect(spec.start == QueryBound(value: .string("triceratops")))
        #expect(spec.end == spec.start)
        #expect(F.keys(spec, F.dinosaurs) == ["triceratops"])
    }

    /// The JS SDK's REST client appends the key name: `startAt=0.6,"m"`.
    @Test func boundsWithKeyNames() throws {
        let spec = try rest(["orderBy": #""height""#, "startAt": #"0.6,"m""#, "endAt": #"0.6, "zzz""#])
        #expect(spec.start == QueryBound(value: .number(0.6), name: "m"))
        #expect(spec.end == QueryBound(value: .number(0.6), name: "zzz"))
        #expect(F.keys(spec, F.dinosaurs) == ["pterodactyl"])
    }

    @Test func valueKinds() throws {
        #expect(try rest(["orderBy": #""a""#, "startAt": "null"]).start == QueryBound(value: .null))
        #expect(try rest(["orderBy": #""a""#, "startAt": "true"]).start == QueryBound(value: .bool(true)))
        #expect(try rest(["orderBy": #""a""#, "startAt": #""x""#]).start == QueryBound(value: .string("x")))
        #expect(try rest(["orderBy": #""a""#, "limitToLast": "5"]).limit == .last(5))
    }

    @Test(arguments: [
        (["startAt": "1"], "orderBy must be defined when other query parameters are defined"),
        (["limitToFirst": "1"], "orderBy must be defined when other query parameters are defined"),
        (["orderBy": "$key"], "orderBy must be a valid JSON encoded path"),
        (["orderBy": "5"], "orderBy must be a valid JSON encoded path"),
        (["orderBy": #""$foo""#], #"orderBy must name an index: "$foo" is not a valid child path"#),
        (["orderBy": #""""#], #"orderBy must name an index: "" is not a valid child path"#),
        (["orderBy": #""$key""#, "limitToFirst": "1", "limitToLast": "1"], "limitToFirst and limitToLast cannot be used together"),
        (["orderBy": #""$key""#, "startAt": #""a""#, "equalTo": #""a""#], "startAt and equalTo cannot be used together"),
        (["orderBy": #""$key""#, "startAt": #""a""#, "startAfter": #""a""#], "startAt and startAfter cannot be used together"),
        (["orderBy": #""$key""#, "endAt": #""a""#, "endBefore": #""a""#], "endAt and endBefore cannot be used together"),
        (["orderBy": #""$key""#, "endBefore": #""a""#, "equalTo": #""a""#], "endBefore and equalTo cannot be used together"),
        (["orderBy": #""$key""#, "limitToFirst": "0"], "limitToFirst must be a positive integer (1 to 9007199254740991)"),
        (["orderBy": #""$key""#, "limitToFirst": "-1"], "limitToFirst must be a positive integer (1 to 9007199254740991)"),
        (["orderBy": #""$key""#, "limitToLast": "1.5"], "limitToLast must be a positive integer (1 to 9007199254740991)"),
        (["orderBy": #""$key""#, "limitToLast": #""2""#], "limitToLast must be a positive integer (1 to 9007199254740991)"),
        (["orderBy": #""$key""#, "limitToLast": "two"], "limitToLast must be a positive integer (1 to 9007199254740991)"),
        (["orderBy": #""a""#, "startAt": "{}"],
         #"startAt must be a JSON string, number, boolean or null, optionally followed by ,"key""#),
        (["orderBy": #""a""#, "endAt": "[1]"],
         #"endAt must be a JSON string, number, boolean or null, optionally followed by ,"key""#),
        (["orderBy": #""a""#, "equalTo": "abc"],
         #"equalTo must be a JSON string, number, boolean or null, optionally followed by ,"key""#),
        (["orderBy": #""a""#, "startAt": "1,2"],
         #"startAt must be a JSON string, number, boolean or null, optionally followed by ,"key""#),
        (["orderBy": #""$key""#, "startAt": "1"], "startAt must be strings when ordering by key"),
        (["orderBy": #""$key""#, "startAt": #""a","b""#], "startAt cannot have a key name when ordering by key"),
        (["orderBy": #""$key""#, "startAt": #""a""#, "endAt": "5"], "startAt and endAt must be strings when ordering by key"),
        (["orderBy": #""$priority""#, "equalTo": "true"],
         "equalTo must be valid priorities (null, a number or a string) when ordering by priority"),
        (["orderBy": #""$key""#, "shallow": "true"],
         "shallow cannot be combined with orderBy, startAt, startAfter, endAt, endBefore, equalTo or limits"),
    ])
    func invalidParameters(parameters: [String: String], message: String) {
        #expect {
            _ = try QuerySpec(rest: parameters)
        } throws: { error in
            (error as? QueryError)?.description == message
        }
    }
}
