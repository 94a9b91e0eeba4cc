extension ServerValues {
    /// `resolve`, adding to `readSet` what the placeholders read: an increment reads the shape of
    /// its own path (whether a number is stored exactly there, and which). Timestamps read nothing.
    public static func resolve(_ json: JSON, at path: Path, now: Int64, current: (Path) -> Node,
                               recording readSet: inout ReadSet) throws(DataError) -> JSON {
        try resolve(json, at: path, now: now, current: { path in
            readSet.insert(path, .shape)
            return current(path)
        })
    }
}
