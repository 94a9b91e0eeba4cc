import PresenceCore
// TEMPORARY until RuleSet lands.
func loadRuleSet(text: String, source: String) throws -> any AccessPolicy { OpenAccessPolicy() }
