#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A step-by-step port of the JS client's `doubleToIEEE754String` (used in its data hash), which
/// computes the exponent as `Math.min(Math.floor(Math.log(v) / Math.LN2), 1023)` and packs the
/// fraction bit by bit with `%` and `Math.floor`. Where that arithmetic is exact the result is
/// `Double.bitPattern`; where it is not (a log that rounds up to the next integer, powers of two
/// beyond the double range) the bits differ, and the client hashes those bits, so we must too.
/// `log` is the C library's; V8's is fdlibm's, and both are correctly rounded in practice.
enum JSDoubleBits {
    static func bits(of input: Double) -> UInt64 {
        let exponentBits = 11, fractionBits = 52
        let bias = (1 << (exponentBits - 1)) - 1
        var sign = false
        var exponent = 0.0
        var fraction = 0.0
        if input == 0 {
            sign = input.sign == .minus
        } else {
            sign = input < 0
            let v = abs(input)
            if v >= power(1 - bias) {
                let ln = min((log(v) / 0.6931471805599453).rounded(.down), Double(bias))
                exponent = ln + Double(bias)
                fraction = jsRound(v * power(fractionBits - Int(ln)) - power(fractionBits))
            } else {
                fraction = jsRound(v / power(1 - bias - fractionBits))
            }
        }
        var result: UInt64 = sign ? 1 : 0
        result = result << exponentBits | jsLowBits(exponent, count: exponentBits)
        result = result << fractionBits | jsLowBits(fraction, count: fractionBits)
        return result
    }

    /// `Math.pow(2, n)`: exact, infinite above 2^1023, zero below the smallest subnormal.
    static func power(_ n: Int) -> Double {
        if n > 1023 { return .infinity }
        if n < -1074 { return 0 }
        return Double(sign: .plus, exponent: n, significand: 1)
    }

    /// `Math.round`: the nearest integer, halves rounded up (towards +∞).
    static func jsRound(_ x: Double) -> Double {
        guard x.isFinite else { return x }
        let down = x.rounded(.down)
        return x - down >= 0.5 ? down + 1 : down
    }

    /// The bits the JS loop `for (i = count; i; i--) { bits.push(f % 2 ? 1 : 0); f = Math.floor(f / 2) }`
    /// collects, as an integer (least significant first, as it pushes them).
    static func jsLowBits(_ value: Double, count: Int) -> UInt64 {
        var f = value
        var result: UInt64 = 0
        for position in 0..<count {
            let remainder = f.truncatingRemainder(dividingBy: 2)  // JS `%`: NaN for ±∞
            if remainder != 0 && !remainder.isNaN { result |= 1 << UInt64(position) }
            f = (f / 2).rounded(.down)
        }
        return result
    }
}
