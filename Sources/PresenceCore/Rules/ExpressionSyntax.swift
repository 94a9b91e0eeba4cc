/// The untyped syntax tree of a rule expression, as parsed. `ExpressionCompiler` type-checks it
/// and turns it into a `CompiledExpression`.
indirect enum ExpressionSyntax {
    case number(Double, at: Int)
    case string(String, at: Int)
    case bool(Bool, at: Int)
    case null(at: Int)
    case regex(pattern: String, flags: String, at: Int)
    case array([ExpressionSyntax], at: Int)
    case identifier(String, at: Int)
    case member(ExpressionSyntax, name: String, at: Int)
    case subscriptAccess(ExpressionSyntax, key: ExpressionSyntax, at: Int)
    case call(ExpressionSyntax, arguments: [ExpressionSyntax], at: Int)
    case unary(String, ExpressionSyntax, at: Int)
    case binary(String, ExpressionSyntax, ExpressionSyntax, at: Int)
    case conditional(ExpressionSyntax, ExpressionSyntax, ExpressionSyntax, at: Int)

    /// 0-based scalar offset of the node (its operator for unary/binary nodes).
    var offset: Int {
        switch self {
        case .number(_, let at), .string(_, let at), .bool(_, let at), .null(let at),
            .regex(_, _, let at), .array(_, let at), .identifier(_, let at), .member(_, _, let at),
            .subscriptAccess(_, _, let at), .call(_, _, let at), .unary(_, _, let at),
            .binary(_, _, _, let at), .conditional(_, _, _, let at):
            return at
        }
    }
}
