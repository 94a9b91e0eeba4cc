/// One Redis command: binary-safe arguments, the first being the command name.
public struct RedisCommand: Sendable, Hashable, CustomStringConvertible {
    public var arguments: [[UInt8]]

    public init(arguments: [[UInt8]]) { self.arguments = arguments }

    /// `RedisCommand("SET", key, value)`: each argument is a string, bytes or an integer.
    public init(_ name: String, _ arguments: any RedisArgument...) {
        self.init(name, arguments)
    }

    public init(_ name: String, _ arguments: [any RedisArgument]) {
        var all: [[UInt8]] = [Array(name.utf8)]
        all.reserveCapacity(arguments.count + 1)
        for argument in arguments { all.append(argument.redisBytes) }
        self.arguments = all
    }

    /// The command name, upper-cased (for logs and the unsupported-command check).
    public var name: String { String(decoding: arguments.first ?? [], as: UTF8.self).uppercased() }

    public var description: String {
        arguments.map { String(decoding: $0.prefix(64), as: UTF8.self) }.joined(separator: " ")
    }

    /// Calls `body` with the C argv hiredis takes (argc, argv, argvlen); the pointers are valid
    /// only during the call (hiredis copies the command into its output buffer).
    func withArgv<R>(_ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R) -> R {
        var flat: [UInt8] = []
        flat.reserveCapacity(arguments.reduce(1) { $0 + $1.count })
        var offsets: [Int] = []
        var lengths: [Int] = []
        offsets.reserveCapacity(arguments.count)
        lengths.reserveCapacity(arguments.count)
        for argument in arguments {
            offsets.append(flat.count)
            lengths.append(argument.count)
            flat.append(contentsOf: argument)
        }
        flat.append(0) // never empty, so the base address exists
        return flat.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!)
            var pointers: [UnsafePointer<CChar>?] = offsets.map {
                base.advanced(by: $0).assumingMemoryBound(to: CChar.self)
            }
            return pointers.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeBufferPointer { argvlen in
                    body(Int32(arguments.count), argv.baseAddress!, argvlen.baseAddress!)
                }
            }
        }
    }
}

/// What can be a command argument: its bytes as sent.
public protocol RedisArgument {
    var redisBytes: [UInt8] { get }
}

extension String: RedisArgument {
    public var redisBytes: [UInt8] { Array(utf8) }
}

extension Substring: RedisArgument {
    public var redisBytes: [UInt8] { Array(utf8) }
}

extension Array: RedisArgument where Element == UInt8 {
    public var redisBytes: [UInt8] { self }
}

extension ArraySlice: RedisArgument where Element == UInt8 {
    public var redisBytes: [UInt8] { Array(self) }
}

extension Int: RedisArgument {
    public var redisBytes: [UInt8] { Array(String(self).utf8) }
}

extension Int64: RedisArgument {
    public var redisBytes: [UInt8] { Array(String(self).utf8) }
}

extension UInt64: RedisArgument {
    public var redisBytes: [UInt8] { Array(String(self).utf8) }
}
