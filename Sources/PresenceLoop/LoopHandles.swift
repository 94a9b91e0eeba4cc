import CLibUV

/// The handles on a libuv loop, for the parts that find lws's own handles there (lws 4.1 exposes
/// neither its timer nor its listeners): `LWSTimerGuard`, and the server's `AcceptGovernor`.
public enum LoopHandles {
    /// The handles of `type` on `loop`; with `listening`, only poll handles on listening sockets.
    public static func find(on loop: UnsafeMutablePointer<uv_loop_t>, type: uv_handle_type,
                            listening: Bool = false) -> [UnsafeMutablePointer<uv_handle_t>] {
        var capacity = 8
        while true {
            let found = UnsafeMutablePointer<UnsafeMutablePointer<uv_handle_t>?>.allocate(capacity: capacity)
            defer { found.deallocate() }
            let count = Int(presence_uv_handles(loop, type, listening ? 1 : 0, found, Int32(capacity)))
            if count <= capacity { return (0..<count).compactMap { found[$0] } }
            capacity = count
        }
    }
}
