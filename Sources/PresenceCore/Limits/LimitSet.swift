/// The limits file (`rules/limits.json`): limited operations and their tiers.
///
/// ```json
/// {
///   "statusLocation": "feature-limits",
///   "limits": {
///     "refreshOnlineUsers": {
///       "location": "online-users",
///       "tiers": [
///         {"name": "lite", "when": "auth.token.subscription == 'lite'", "unlimited": true},
///         {"name": "free", "when": "auth != null", "limit": 2, "cooldownSeconds": 120}
///       ]
///     }
///   }
/// }
/// ```
///
/// A limit guards the reads of its `location` (and below): each `g`, listen, REST `GET` or stream
/// there is one use. With `"operation": "write"` it guards writes instead: each `p`, `m` or REST
/// write at, below or above the location is one use (the seed's message limits); onDisconnect
/// writes, run by the server, are not counted. Tiers are tried in order; the first whose `when` (an expression of the rules
/// language seeing `auth`, `now` and `root`) is true applies. A tier is `unlimited`, or allows
/// `limit` uses, after which a cooldown of `cooldownSeconds` starts (no `cooldownSeconds`: the uses
/// never come back). Each limit's status is readable, without using it, at
/// `<statusLocation>/<name>`.
public struct LimitSet: Sendable {
    public var statusLocation: Path
    /// In file order.
    public var limits: [LimitDefinition]

    public init(statusLocation: Path = LimitSet.defaultStatusLocation, limits: [LimitDefinition]) {
        self.statusLocation = statusLocation
        self.limits = limits
    }

    public static let defaultStatusLocation = Path(validated: ["feature-limits"])

    public func limit(named name: String) -> LimitDefinition? { limits.first { $0.name == name } }

    /// The limit guarding a read of `path`, if any.
    public func limit(guarding path: Path) -> LimitDefinition? {
        limits.first { $0.operation == .read && $0.location.contains(path) }
    }

    /// The limits a write touching `paths` uses: those whose location is at, below or above one of
    /// them (a write above the location replaces what is there), each once.
    public func limits(guardingWritesTo paths: [Path]) -> [LimitDefinition] {
        limits.filter { limit in
            limit.operation == .write && paths.contains { limit.location.contains($0) || $0.contains(limit.location) }
        }
    }
}

public struct LimitDefinition: Sendable {
    public enum Operation: String, Sendable {
        case read, write
    }

    public var name: String
    public var location: Path
    public var operation: Operation
    public var tiers: [LimitTier]

    public init(name: String, location: Path, operation: Operation = .read, tiers: [LimitTier]) {
        self.name = name
        self.location = location
        self.operation = operation
        self.tiers = tiers
    }

    /// The first tier whose condition holds, or nil when none does.
    public func tier(auth: JSON?, root: Node, now: Int64) -> LimitTier? {
        tiers.first { $0.condition.evaluate(auth: auth, root: root, now: now) }
    }
}

public struct LimitTier: Sendable {
    public enum Allowance: Sendable, Equatable {
        case unlimited
        /// `uses` per cooldown; `cooldownMilliseconds` nil means the uses never come back.
        case limited(uses: Int, cooldownMilliseconds: Int64?)
    }

    public var name: String
    public var condition: RuleCondition
    public var allowance: Allowance

    public init(name: String, condition: RuleCondition, allowance: Allowance) {
        self.name = name
        self.condition = condition
        self.allowance = allowance
    }
}

/// Why a limits file was rejected. The whole file is refused; the limits in force stay.
public struct LimitsLoadError: Error, CustomStringConvertible, Sendable, Equatable {
    public var source: String
    /// A JSON pointer into the file (`/limits/refresh/tiers/1/limit`), or "" for the whole file.
    public var location: String
    public var reason: String

    public init(source: String, location: String, reason: String) {
        self.source = source
        self.location = location
        self.reason = reason
    }

    public var description: String {
        location.isEmpty ? "\(source): \(reason)" : "\(source): \(location): \(reason)"
    }
}

extension LimitSet {
    public static func load(text: String, source: String) throws(LimitsLoadError) -> LimitSet {
        let document: JSON
        do { document = try JSONParser.parse(text) } catch {
            throw LimitsLoadError(source: source, location: "", reason: "not valid JSON: \(error)")
        }
        return try load(document: document, source: source)
    }

    public static func load(document: JSON, source: String) throws(LimitsLoadError) -> LimitSet {
        var reader = LimitsDocumentReader(source: source)
        return try reader.read(document)
    }
}

/// Reads and checks a limits document, naming the exact place of the first problem.
struct LimitsDocumentReader {
    let source: String
    static let maxUses = 1_000_000_000
    static let maxCooldownSeconds = 366.0 * 24 * 3600

    func fail(_ location: String, _ reason: String) -> LimitsLoadError {
        LimitsLoadError(source: source, location: location, reason: reason)
    }

    func object(_ json: JSON, at location: String, allowed: Set<String>) throws(LimitsLoadError) -> [(String, JSON)] {
        guard case .object(let members) = json else { throw fail(location, "must be an object") }
        for (key, _) in members where !allowed.contains(key) {
            throw fail(location, "unknown key \"\(key)\" (allowed: \(allowed.sorted().joined(separator: ", ")))")
        }
        return members
    }

    func path(_ json: JSON?, at location: String) throws(LimitsLoadError) -> Path {
        guard case .string(let text)? = json else { throw fail(location, "must be a path string like \"online-users\"") }
        let path: Path
        do { path = try Path(text) } catch { throw fail(location, error.description) }
        guard !path.isRoot else { throw fail(location, "must not be the root") }
        return path
    }

    mutating func read(_ document: JSON) throws(LimitsLoadError) -> LimitSet {
        let top = try object(document, at: "", allowed: ["limits", "statusLocation"])
        let members = Dictionary(top, uniquingKeysWith: { first, _ in first })
        let statusLocation = members["statusLocation"] == nil
            ? LimitSet.defaultStatusLocation : try path(members["statusLocation"], at: "/statusLocation")
        guard let limitsJSON = members["limits"] else { throw fail("", "missing \"limits\"") }
        guard case .object(let entries) = limitsJSON else { throw fail("/limits", "must be an object of limits by name") }
        var limits: [LimitDefinition] = []
        for (name, body) in entries {
            let location = "/limits/\(name)"
            guard Path.isValidKey(name) else { throw fail(location, "invalid limit name (no . $ # [ ] / or control characters)") }
            limits.append(try limit(name, body, at: location))
        }
        for (i, a) in limits.enumerated() {
            if a.location.contains(statusLocation) || statusLocation.contains(a.location) {
                throw fail("/limits/\(a.name)/location", "overlaps the statusLocation \(statusLocation)")
            }
            for b in limits[(i + 1)...] where a.operation == b.operation
                && (a.location.contains(b.location) || b.location.contains(a.location)) {
                throw fail("/limits/\(b.name)/location", "overlaps the location of \(a.operation.rawValue) limit \"\(a.name)\" (\(a.location))")
            }
        }
        return LimitSet(statusLocation: statusLocation, limits: limits)
    }

    func limit(_ name: String, _ body: JSON, at location: String) throws(LimitsLoadError) -> LimitDefinition {
        let members = Dictionary(try object(body, at: location, allowed: ["location", "operation", "tiers"]), uniquingKeysWith: { a, _ in a })
        let guarded = try path(members["location"], at: location + "/location")
        var operation = LimitDefinition.Operation.read
        if let raw = members["operation"] {
            guard case .string(let text) = raw, let parsed = LimitDefinition.Operation(rawValue: text) else {
                throw fail(location + "/operation", "must be \"read\" (the default) or \"write\"")
            }
            operation = parsed
        }
        guard case .array(let tierList)? = members["tiers"], !tierList.isEmpty else {
            throw fail(location + "/tiers", "must be a non-empty array of tiers, tried in order")
        }
        var tiers: [LimitTier] = []
        for (index, tierJSON) in tierList.enumerated() {
            let tier = try self.tier(tierJSON, at: "\(location)/tiers/\(index)")
            if tiers.contains(where: { $0.name == tier.name }) {
                throw fail("\(location)/tiers/\(index)/name", "duplicate tier name \"\(tier.name)\"")
            }
            tiers.append(tier)
        }
        return LimitDefinition(name: name, location: guarded, operation: operation, tiers: tiers)
    }

    func tier(_ json: JSON, at location: String) throws(LimitsLoadError) -> LimitTier {
        let members = Dictionary(try object(json, at: location, allowed: ["name", "when", "unlimited", "limit", "cooldownSeconds"]),
                                 uniquingKeysWith: { a, _ in a })
        guard case .string(let name)? = members["name"], !name.isEmpty, name.utf8.count <= 64 else {
            throw fail(location + "/name", "every tier needs a name (1–64 characters), used in metrics and events")
        }
        let conditionText: String
        switch members["when"] {
        case .string(let text)?: conditionText = text
        case .bool(let value)?: conditionText = value ? "true" : "false"
        default: throw fail(location + "/when", "must be a rules-language expression string (or true)")
        }
        let condition: RuleCondition
        do { condition = try RuleCondition(conditionText, file: source, location: location + "/when") } catch {
            throw fail(location + "/when", "\(error.position.map { "at position \($0): " } ?? "")\(error.reason)")
        }
        let allowance: LimitTier.Allowance
        switch (members["unlimited"], members["limit"]) {
        case (.bool(true)?, nil):
            guard members["cooldownSeconds"] == nil else { throw fail(location + "/cooldownSeconds", "an unlimited tier has no cooldown") }
            allowance = .unlimited
        case (nil, .number(let limit)?), (.bool(false)?, .number(let limit)?):
            guard limit == limit.rounded(), limit >= 0, limit <= Double(Self.maxUses) else {
                throw fail(location + "/limit", "must be a whole number of uses from 0 to \(Self.maxUses)")
            }
            var cooldown: Int64?
            if let raw = members["cooldownSeconds"] {
                guard case .number(let seconds) = raw, seconds > 0, seconds <= Self.maxCooldownSeconds else {
                    throw fail(location + "/cooldownSeconds", "must be a number of seconds above 0 (at most a year)")
                }
                guard limit > 0 else { throw fail(location + "/cooldownSeconds", "a tier with limit 0 never allows a use; drop the cooldown") }
                cooldown = Int64((seconds * 1000).rounded())
            }
            allowance = .limited(uses: Int(limit), cooldownMilliseconds: cooldown)
        default:
            throw fail(location, "a tier is either \"unlimited\": true or has a \"limit\" (with an optional \"cooldownSeconds\")")
        }
        return LimitTier(name: name, condition: condition, allowance: allowance)
    }
}
