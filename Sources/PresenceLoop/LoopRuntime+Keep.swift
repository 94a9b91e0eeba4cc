import CLibWebSockets

#if canImport(Glibc)
import Glibc
#endif

/// Memory lws keeps pointers to for the life of a context (the protocol table, strings in the
/// creation and connect info, retry policies): allocated here, freed with the runtime, after the
/// context is gone. A Swift array or the temporary pointer a `String` bridges to would dangle.
extension LoopRuntime {
    /// The lws protocol callback's C type.
    public typealias ProtocolCallback = @convention(c) (
        OpaquePointer?, lws_callback_reasons, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, Int
    ) -> Int32

    /// A C copy of `string`.
    public func keep(_ string: String) -> UnsafePointer<CChar> {
        let copy = strdup(string)!
        releases.append { free(copy) }
        return UnsafePointer(copy)
    }

    /// A protocol table of one protocol (and the zeroed terminator), for `info.protocols`. lws
    /// also picks it for WebSocket clients that ask for no `Sec-WebSocket-Protocol`.
    public func keepProtocol(name: String, callback: ProtocolCallback, perSessionDataSize: Int = 0,
                             rxBufferSize: Int = 0) -> UnsafePointer<lws_protocols> {
        let protocols = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = keep(name)
        protocols[0].callback = callback
        protocols[0].per_session_data_size = perSessionDataSize
        protocols[0].rx_buffer_size = rxBufferSize
        releases.append { protocols.deinitialize(count: 2); protocols.deallocate() }
        return UnsafePointer(protocols)
    }

    /// A retry and idle policy. lws applies its default (ping 300 s, hang up 310 s) to connections
    /// without one, and each such connection inserts a validity timer with a linear sorted walk
    /// over every pending timer: O(n^2) over n connects. A zeroed policy (0, 0) schedules no
    /// validity timer at all.
    public func keepRetryPolicy(ping: UInt16, hangup: UInt16) -> UnsafePointer<lws_retry_bo_t> {
        let policy = UnsafeMutablePointer<lws_retry_bo_t>.allocate(capacity: 1)
        policy.initialize(to: lws_retry_bo_t())
        policy.pointee.secs_since_valid_ping = ping
        policy.pointee.secs_since_valid_hangup = hangup
        releases.append { policy.deallocate() }
        return UnsafePointer(policy)
    }
}
