import PresenceFuzzing

#if canImport(Glibc)
import Glibc
#endif

// `presence-fuzz TARGET [libFuzzer options and corpus directories]`.
// Built for fuzzing (make fuzz: -DFUZZING with the fuzzer and address sanitizers) it runs
// libFuzzer on TARGET; built plainly it replays the files and directories given, e.g. a saved
// crash: `swift run presence-fuzz json crash-…`.
let arguments = CommandLine.arguments
guard arguments.count >= 2, let target = FuzzTarget.named(arguments[1]) else {
    print("usage: presence-fuzz TARGET [options] [files or directories]\ntargets:")
    for target in FuzzTarget.all { print("  \(target.name): \(target.summary)") }
    exit(arguments.count >= 2 && arguments[1] == "--list" ? 0 : 2)
}
FuzzDriver.run(target, arguments: [arguments[0]] + arguments.dropFirst(2))
