"""Single-point source mutations of the functions a corpus program runs.

Each mutant rewrites one node of one file: the node's source span is replaced by the unparsed mutated
node (an expression in parentheses, a statement by ``pass``), so the rest of the file, its comments
and line numbers stay as they were and a unified diff shows exactly one change. Mutations:

``constant``   an int +1, a float doubled (0.0 -> 1.0), a bool flipped, a string suffixed with "_"
``default``    the same, on a parameter's default value (a flipped default)
``binop``      an arithmetic operator swapped (+ -, * +, / *, // /, % //, ** *), ``augassign`` too
``compare``    a comparison swapped (< <=, > >=, == !=, in / not in, is / is not)
``boolop``     ``and`` <-> ``or``; ``not`` removed (``unary``)
``swap_args``  the first two positional arguments of a call swapped; ``swap_kwargs`` the first two
               keyword arguments (observable through ``**kwargs``)
``remove``     one statement of a function body replaced by ``pass``

Targets: every node inside a function the program ran (its qualified name as the interpreter reports
it, nested functions and classes included), and the module- and class-level assignments of every
file (constants, class attributes, enum members). Nodes inside f-strings (whose positions Python
3.11 does not report reliably), annotations and docstrings are left alone. A mutant that does not
compile, or that equals the original, is dropped.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

_BINOP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd,
}
_CMPOP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Mutant:
    """One mutated version of one file of one program."""

    program: str
    path: str          # the file, relative to the program's directory (posix separators)
    function: str      # qualified name of the enclosing function or class, or "<module>"
    kind: str
    line: int
    description: str
    original: str      # the file's text
    source: str        # the mutated text

    @property
    def ident(self) -> str:
        """A stable name: program, file, line, kind and a digest of the mutated text."""
        digest = hashlib.sha1(self.source.encode()).hexdigest()[:8]
        return f"{self.program}:{self.path}:{self.line}:{self.kind}:{digest}"


def _mutate_constant(node: ast.Constant) -> ast.Constant | None:
    v = node.value
    if isinstance(v, bool):
        return ast.Constant(not v)
    if isinstance(v, int):
        return ast.Constant(v + 1)
    if isinstance(v, float):
        return ast.Constant(v * 2 if v else 1.0)
    if isinstance(v, str):
        return ast.Constant(v + "_")
    return None


def _expression_mutations(node: ast.AST) -> Iterator[tuple[str, ast.AST, str]]:
    """(kind, replacement, description) for one expression node."""
    if isinstance(node, ast.Constant):
        new = _mutate_constant(node)
        if new is not None:
            yield "constant", new, f"{node.value!r} -> {new.value!r}"
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
        op = _BINOP[type(node.op)]()
        description = f"{type(node.op).__name__} -> {type(op).__name__}"
        yield "binop", ast.BinOp(node.left, op, node.right), description
    elif isinstance(node, ast.Compare) and type(node.ops[0]) in _CMPOP:
        op = _CMPOP[type(node.ops[0])]()
        new = ast.Compare(node.left, [op, *node.ops[1:]], node.comparators)
        yield "compare", new, f"{type(node.ops[0]).__name__} -> {type(op).__name__}"
    elif isinstance(node, ast.BoolOp):
        op: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "boolop", ast.BoolOp(op, node.values), f"{type(node.op).__name__} -> {type(op).__name__}"
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)) \
            and not isinstance(node.operand, ast.Constant):
        yield "unary", node.operand, f"{type(node.op).__name__} removed"
    elif isinstance(node, ast.Call):
        pos = node.args
        if len(pos) >= 2 and not any(isinstance(a, ast.Starred) for a in pos[:2]) \
                and ast.dump(pos[0]) != ast.dump(pos[1]):
            new = ast.Call(node.func, [pos[1], pos[0], *pos[2:]], node.keywords)
            yield "swap_args", new, "first two positional arguments swapped"
        kws = node.keywords
        if len(kws) >= 2 and kws[0].arg is not None and kws[1].arg is not None:
            new = ast.Call(node.func, pos, [kws[1], kws[0], *kws[2:]])
            yield "swap_kwargs", new, f"keywords {kws[0].arg}, {kws[1].arg} swapped"


class _Collector:
    """Walks one file and yields (node, scope qualname, in_reached_function, default) targets."""

    def __init__(self, tree: ast.Module, reached: set[str]) -> None:
        self.tree = tree
        self.reached = reached
        self.expressions: list[tuple[ast.AST, str, str]] = []   # node, scope, kind override
        self.statements: list[tuple[ast.stmt, str]] = []

    def collect(self) -> None:
        self._body(self.tree.body, "", reached=False, module_level=True)

    def _body(self, body: list[ast.stmt], prefix: str, *, reached: bool, module_level: bool) -> None:
        scope = prefix.removesuffix(".<locals>.").rstrip(".") or "<module>"
        for i, stmt in enumerate(body):
            if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                    and isinstance(stmt.value.value, str):
                continue  # a docstring
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = prefix + stmt.name
                inner = qual in self.reached
                # Defaults and decorator arguments are evaluated in the enclosing scope, once.
                if inner or reached:
                    for d in stmt.args.defaults + [d for d in stmt.args.kw_defaults if d is not None]:
                        self._expr(d, qual, "default" if isinstance(d, ast.Constant) else None)
                    for dec in stmt.decorator_list:
                        self._expr(dec, scope, None)
                self._body(stmt.body, qual + ".<locals>.", reached=inner, module_level=False)
            elif isinstance(stmt, ast.ClassDef):
                qual = prefix + stmt.name
                for dec in stmt.decorator_list:
                    if reached:
                        self._expr(dec, scope, None)
                self._body(stmt.body, qual + ".", reached=reached, module_level=module_level)
            elif reached:
                if not isinstance(stmt, ast.Pass):
                    self.statements.append((stmt, scope))
                self._stmt_children(stmt, prefix, scope)
            elif module_level and isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) \
                    and stmt.value is not None:
                self._expr(stmt.value, scope, None)

    def _stmt_children(self, stmt: ast.stmt, prefix: str, scope: str) -> None:
        if isinstance(stmt, ast.AugAssign) and type(stmt.op) in _BINOP:
            self.expressions.append((stmt, scope, "augassign"))
        for name, value in ast.iter_fields(stmt):
            if name in ("annotation", "returns", "type_comment"):
                continue
            values = value if isinstance(value, list) else [value]
            if values and all(isinstance(v, ast.stmt) for v in values):
                self._body(values, prefix, reached=True, module_level=False)
                continue
            for v in values:
                if isinstance(v, ast.expr):
                    self._expr(v, scope, None)
                elif isinstance(v, ast.excepthandler):
                    if v.type is not None:
                        self._expr(v.type, scope, None)
                    self._body(v.body, prefix, reached=True, module_level=False)
                elif isinstance(v, ast.withitem):
                    self._expr(v.context_expr, scope, None)

    def _expr(self, node: ast.expr, scope: str, kind: str | None) -> None:
        if isinstance(node, ast.JoinedStr):
            return
        self.expressions.append((node, scope, kind or ""))
        if kind == "default":
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._expr(child, scope, None)
            elif isinstance(child, ast.comprehension):
                for e in (child.iter, *child.ifs):
                    self._expr(e, scope, None)
            elif isinstance(child, ast.keyword):
                self._expr(child.value, scope, None)
            elif isinstance(child, ast.arguments):
                for d in child.defaults + [d for d in child.kw_defaults if d is not None]:
                    self._expr(d, scope, None)


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _span(starts: list[int], node: ast.AST) -> tuple[int, int]:
    assert node.end_lineno is not None and node.end_col_offset is not None
    return (starts[node.lineno - 1] + node.col_offset, starts[node.end_lineno - 1] + node.end_col_offset)


def mutants_of_file(program: str, path: str, text: str, reached: set[str]) -> list[Mutant]:
    """Every valid single mutation of ``text`` in the functions named in ``reached`` (and constants)."""
    if not text.isascii():  # ast offsets are in bytes; the corpus keeps them equal to characters
        raise ValueError(f"{program}/{path}: the corpus must be ASCII")
    tree = ast.parse(text)
    collector = _Collector(tree, reached)
    collector.collect()
    starts = _offsets(text)
    out: list[Mutant] = []
    seen: set[str] = set()

    def add(node: ast.AST, scope: str, kind: str, replacement: str, description: str) -> None:
        a, b = _span(starts, node)
        source = text[:a] + replacement + text[b:]
        if source == text or source in seen:
            return
        try:
            compile(source, path, "exec")
        except SyntaxError:
            return
        seen.add(source)
        out.append(Mutant(program, path, scope, kind, node.lineno, description, text, source))

    for node, scope, override in collector.expressions:
        if override == "augassign":
            assert isinstance(node, ast.AugAssign)
            op = _BINOP[type(node.op)]()
            new_stmt = ast.AugAssign(node.target, op, node.value)
            add(node, scope, "augassign", ast.unparse(new_stmt),
                f"{type(node.op).__name__}= -> {type(op).__name__}=")
            continue
        for kind, new, description in _expression_mutations(node):
            kind = "default" if override == "default" and kind == "constant" else kind
            add(node, scope, kind, "(" + ast.unparse(new) + ")", description)
    for stmt, scope in collector.statements:
        a, b = _span(starts, stmt)
        line_start = starts[stmt.lineno - 1]
        line_end = text.find("\n", b)
        line_end = len(text) if line_end < 0 else line_end
        if text[line_start:a].strip() or text[b:line_end].split("#")[0].strip():
            continue  # shares a line with another statement
        add(stmt, scope, "remove", "pass", f"{type(stmt).__name__} statement removed")
    return out
