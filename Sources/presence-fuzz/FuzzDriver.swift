import PresenceFuzzing

#if canImport(Glibc)
import Glibc
#endif

#if FUZZING
/// libFuzzer's entry point when the program has its own main (libFuzzer's FuzzerDriver.cpp).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

/// The target libFuzzer calls back; a C callback cannot capture, so it is a global.
nonisolated(unsafe) var currentTarget: FuzzTarget?
#endif

enum FuzzDriver {
    static func run(_ target: FuzzTarget, arguments: [String]) -> Never {
        #if FUZZING
        currentTarget = target
        var argc = CInt(arguments.count)
        var cStrings = arguments.map { strdup($0) } + [nil]
        let status = cStrings.withUnsafeMutableBufferPointer { buffer -> CInt in
            var argv = buffer.baseAddress
            return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
                currentTarget!.run(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
                return 0
            }
        }
        exit(status)
        #else
        replay(target, paths: Array(arguments.dropFirst()))
        #endif
    }

    /// Runs the target over each file (directories: each file inside), so a crash input can be
    /// reproduced without the fuzzing build.
    static func replay(_ target: FuzzTarget, paths: [String]) -> Never {
        var count = 0
        for path in paths where !path.hasPrefix("-") {
            for file in FuzzFiles.list(path) {
                target.run(FuzzFiles.read(file) ?? [])
                count += 1
            }
        }
        print("\(target.name): \(count) inputs replayed, no invariant broken")
        exit(0)
    }
}
