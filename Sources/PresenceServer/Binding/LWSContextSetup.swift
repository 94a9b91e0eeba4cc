import CLibWebSockets
import PresenceWire

#if canImport(Glibc)
import Glibc
#endif

/// The lws context's creation info for the server, and the C memory lws keeps pointers to
/// (protocols, the retry policy, strings), freed when this goes (after the context).
final class LWSContextSetup {
    private(set) var info = lws_context_creation_info()
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>
    private var strings: [UnsafeMutablePointer<CChar>] = []

    /// `user` comes back in the callback through `lws_context_user`.
    init(configuration: ServerConfiguration, user: UnsafeMutableRawPointer) throws(ServerError) {
        protocols = UnsafeMutablePointer<lws_protocols>.allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        retryPolicy = UnsafeMutablePointer<lws_retry_bo_t>.allocate(capacity: 1)
        // A zeroed policy: no lws validity timer per connection (each is a linear sorted insert on
        // every establish and PONG). Without a policy lws would apply its default 300/310 s one.
        // Pings and idle hang-ups are the shell's liveness sweep.
        retryPolicy.initialize(to: lws_retry_bo_t())

        // Clients send no Sec-WebSocket-Protocol: lws binds them to protocols[0].
        protocols[0].name = UnsafePointer(keep("firebase-rtdb"))
        protocols[0].callback = presenceCallback
        protocols[0].per_session_data_size = MemoryLayout<UInt64>.size
        protocols[0].rx_buffer_size = configuration.rxBufferBytes
        // lws sends at most this much per `send` (the rest waits in lws for the next WRITEABLE):
        // room for a batch of frames (`FrameBatch`), which holds at least one split frame.
        protocols[0].tx_packet_size = max(FrameBatch.budget, FrameSplitter.maxFrameBytes + 64)

        info.port = Int32(configuration.port)
        info.iface = UnsafePointer(keep(configuration.host))
        info.protocols = UnsafePointer(protocols)
        info.options = UInt64(LWS_SERVER_OPTION_VALIDATE_UTF8) | UInt64(LWS_SERVER_OPTION_HTTP_HEADERS_SECURITY_BEST_PRACTICES_ENFORCE)
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        if let certificate = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
            for (what, path) in [("certificate", certificate), ("key", key)] where access(path, R_OK) != 0 {
                throw ServerError.startFailed("cannot read the TLS \(what) \(path)")
            }
            info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
            info.ssl_cert_filepath = UnsafePointer(keep(certificate))
            info.ssl_private_key_filepath = UnsafePointer(keep(key))
            // TLS 1.2 and later only (OpenSSL 3's SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1).
            info.ssl_options_set = 0x0200_0000 | 0x0400_0000 | 0x1000_0000
        }
        info.user = user
        info.vhost_name = UnsafePointer(keep("default"))
        info.fd_limit_per_thread = 0
        // HTTP heads, set deliberately (lws 4.1.6): a head must arrive within --http-timeout (lws's
        // idle timeout for a header table, armed once, not by each byte, so slow headers are
        // dropped; also lws's gap between two parts of a body), and fit 4 KiB (lws drops a longer
        // one without an answer; clients send about 0.5 KiB). Header tables are not pooled (0: one
        // per connection that is sending its head): with a bounded pool, a few hundred slow heads
        // would make every new client wait for one. Memory is then bounded by the fd limit.
        info.timeout_secs = UInt32(configuration.httpTimeoutSeconds)
        info.timeout_secs_ah_idle = UInt32(configuration.httpTimeoutSeconds)
        info.max_http_header_data = 4096
        info.max_http_header_pool = 0
    }

    deinit {
        protocols.deallocate()
        retryPolicy.deallocate()
        for string in strings { free(string) }
    }

    private func keep(_ string: String) -> UnsafeMutablePointer<CChar> {
        let pointer = strdup(string)!
        strings.append(pointer)
        return pointer
    }

    /// Why the context could not be created, for the operator.
    static func startFailure(_ configuration: ServerConfiguration) -> ServerError {
        if configuration.tlsCertificatePath != nil {
            return .startFailed("could not start TLS on \(configuration.host):\(configuration.port): check that --tls-cert and --tls-key are PEM files of a certificate and its matching private key, and that the port is free")
        }
        return .startFailed("could not listen on \(configuration.host):\(configuration.port) (address in use, or not an address of this machine?)")
    }
}
