/// A script's reply: a status word, then fields (RedisScripts documents each script's shape).
struct ScriptReply {
    let status: String
    let fields: [RedisReply]

    init?(_ reply: RedisReply) {
        guard let elements = reply.array, let status = elements.first?.string else { return nil }
        self.status = status
        fields = Array(elements.dropFirst())
    }

    func string(_ index: Int) -> String? { index < fields.count ? fields[index].string : nil }
    func integer(_ index: Int) -> Int64? { index < fields.count ? fields[index].integer : nil }
    func bytes(_ index: Int) -> [UInt8]? { index < fields.count ? fields[index].bytes : nil }
    func array(_ index: Int) -> [RedisReply]? { index < fields.count ? fields[index].array : nil }

    /// `EPOCH` carries the current epoch, empty when the namespace has no log at all.
    var currentEpoch: String? {
        guard let epoch = string(0), !epoch.isEmpty else { return nil }
        return epoch
    }
}

extension RedisConnection {
    /// Runs a script and maps its reply with `parse`; a reply `parse` rejects (an error reply
    /// included) becomes `.unexpectedReply`.
    func run<T>(_ script: RedisScript, keys: [any RedisArgument], arguments: [any RedisArgument],
                parse: @escaping (ScriptReply) -> T?, completion: @escaping (Result<T, RedisError>) -> Void) {
        evaluate(script, keys: keys, arguments: arguments) { result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let reply):
                if let scripted = ScriptReply(reply), let value = parse(scripted) {
                    completion(.success(value))
                } else {
                    completion(.failure(.unexpectedReply("\(script.name): \(reply.errorMessage ?? String(describing: reply))")))
                }
            }
        }
    }
}
