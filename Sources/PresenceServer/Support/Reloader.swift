import CLibWebSockets
import Logging
import PresenceCore

/// SIGHUP: load the TLS certificate, the token keys and credentials, the limits and the rules
/// again, and reopen the limit event log. Each file that does not load leaves what is running in
/// force; listeners the new rules no longer allow are revoked with `c`.
struct Reloader {
    /// Reloads the rules; nil when the rules are not from a file.
    let rules: (@Sendable () throws -> any AccessPolicy)?
    /// Reloads the limits file; nil when limits are not from a file.
    let limits: (@Sendable () throws -> LimitSet?)?
    /// Reloads the token verifier's keys, secret and admin credential.
    let verifier: (@Sendable () throws -> any TokenVerifier)?

    /// Returns whether the engine changed in a way that needs a step (new rules).
    func reload(engine: Engine, context: OpaquePointer?, configuration: ServerConfiguration,
                limitEventLog: LimitEventLog?, logger: Logger) -> Bool {
        if let context { reloadCertificate(context: context, configuration: configuration, logger: logger) }
        if let log = limitEventLog, !log.reopen() { logger.error("cannot reopen the limit event log \(log.path)") }
        if let verifier {
            do {
                engine.setVerifier(try verifier())
                logger.notice("token keys and credentials reloaded")
            } catch {
                logger.error("token keys not reloaded, the previous ones stay in force: \(error)")
            }
        }
        if let limits {
            do {
                let loaded = try limits()
                engine.setLimits(loaded)
                logger.notice("limits reloaded", metadata: ["limits": "\(loaded?.limits.map(\.name) ?? [])"])
            } catch {
                logger.error("limits not reloaded, the previous limits stay in force: \(error)")
            }
        }
        guard let rules else { return false }
        do {
            let policy = try rules()
            engine.setPolicy(policy, now: WallClock.nowMilliseconds())
            logger.notice("rules reloaded")
            return true
        } catch {
            logger.error("rules not reloaded, the previous rules stay in force: \(error)")
            return false
        }
    }

    /// The certificate and key again (renewed files at the same paths). Existing connections keep
    /// their session; new ones get the new certificate. A pair that does not load leaves the old one.
    private func reloadCertificate(context: OpaquePointer, configuration: ServerConfiguration, logger: Logger) {
        guard let certificatePath = configuration.tlsCertificatePath, let keyPath = configuration.tlsKeyPath else { return }
        guard let certificate = TextFile.read(certificatePath), let key = TextFile.read(keyPath) else {
            logger.error("TLS certificate not reloaded: cannot read \(certificatePath) or \(keyPath)")
            return
        }
        let result = certificate.withCString { certificatePointer in
            key.withCString { keyPointer in
                lws_tls_cert_updated(context, certificatePath, keyPath, certificatePointer, certificate.utf8.count,
                                     keyPointer, key.utf8.count)
            }
        }
        if result == 0 {
            logger.notice("TLS certificate reloaded from \(certificatePath)")
        } else {
            logger.error("TLS certificate not reloaded (does the key match the certificate?); the previous one stays in use")
        }
    }
}
