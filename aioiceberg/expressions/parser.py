"""Parse the SQL-like row-filter syntax into an unbound expression.

Grammar (keywords case-insensitive; NOT binds tighter than AND, AND tighter than OR)::

    expr      := and_expr (OR and_expr)*
    and_expr  := not_expr (AND not_expr)*
    not_expr  := NOT not_expr | primary
    primary   := '(' expr ')' | TRUE | FALSE | predicate
    predicate := column op literal | literal op column
               | column [NOT] IN '(' literal (',' literal)* ')'
               | column [NOT] BETWEEN literal AND literal
               | column IS [NOT] NULL | column IS [NOT] NAN
               | column [NOT] LIKE 'prefix%'

Columns are dotted names; a part may be quoted with double quotes or backticks to
hold any character. Literals are numbers (``12`` int, ``1.5`` Decimal so that no
digit is lost before binding, ``1e3`` float), single-quoted strings (``''`` escapes a
quote), ``X'0a0b'`` bytes, ``true`` and ``false``. Literals stay untyped until binding
converts them to the column's type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from aioiceberg.errors import ExpressionError
from aioiceberg.expressions.tree import (
    AlwaysFalse,
    AlwaysTrue,
    EqualTo,
    Expression,
    GreaterThan,
    GreaterThanOrEqual,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    LiteralPredicate,
    Not,
    NotEqualTo,
    NotNaN,
    NotNull,
    NotStartsWith,
    Reference,
    StartsWith,
    and_,
    in_,
    not_in,
    or_,
)

__all__ = ["parse"]

_KEYWORDS = frozenset({"and", "or", "not", "in", "is", "null", "nan", "like", "true", "false", "between"})

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<bytes>[xX]'(?:[0-9a-fA-F]{2})*')
  | (?P<string>'(?:[^']|'')*')
  | (?P<ident>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<dquoted>"(?:[^"]|"")*")
  | (?P<bquoted>`(?:[^`]|``)*`)
  | (?P<op><=|>=|!=|<>|==|=|<|>)
  | (?P<punct>[(),.])
    """,
    re.VERBOSE,
)

_COMPARISONS: dict[str, type[LiteralPredicate]] = {
    "=": EqualTo,
    "==": EqualTo,
    "!=": NotEqualTo,
    "<>": NotEqualTo,
    "<": LessThan,
    "<=": LessThanOrEqual,
    ">": GreaterThan,
    ">=": GreaterThanOrEqual,
}
# ``5 < x`` is ``x > 5``
_FLIPPED: dict[str, str] = {
    "=": "=",
    "==": "=",
    "!=": "!=",
    "<>": "!=",
    "<": ">",
    "<=": ">=",
    ">": "<",
    ">=": "<=",
}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # number, bytes, string, ident, name (quoted), keyword, op, punct, end
    text: str
    pos: int

    @property
    def keyword(self) -> str | None:
        return self.text.lower() if self.kind == "keyword" else None


def _error(text: str, pos: int, message: str) -> ExpressionError:
    start = max(0, pos - 20)
    snippet = text[start : pos + 20]
    caret = " " * (pos - start + len("  ")) + "^"
    return ExpressionError(f"{message} at position {pos}:\n  {snippet}\n{caret}")


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos] == "'":
                raise _error(text, pos, "unterminated string literal")
            if text[pos] in '"`':
                raise _error(text, pos, "unterminated quoted name")
            raise _error(text, pos, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        value = m.group()
        if kind == "ident" and value.lower() in _KEYWORDS:
            kind = "keyword"
        if (
            kind == "number"
            and value[0] in "+-"
            and tokens
            and tokens[-1].kind in ("number", "string", "ident")
        ):
            # ``a-1`` is not arithmetic here: treat the sign as an error at the sign itself
            raise _error(text, pos, f"unexpected {value[0]!r}")
        if kind != "ws":
            tokens.append(_Token(kind, value, pos))
        pos = m.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0

    # -- token helpers ---------------------------------------------------------------------
    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def advance(self) -> _Token:
        t = self.tokens[self.i]
        self.i += 1
        return t

    def at_keyword(self, *words: str) -> bool:
        return self.tok.keyword in words

    def accept_keyword(self, word: str) -> bool:
        if self.tok.keyword == word:
            self.i += 1
            return True
        return False

    def fail(self, expected: str, tok: _Token | None = None) -> ExpressionError:
        t = tok or self.tok
        found = "end of input" if t.kind == "end" else repr(t.text)
        return _error(self.text, t.pos, f"expected {expected}, found {found}")

    def expect_keyword(self, word: str) -> None:
        if not self.accept_keyword(word):
            raise self.fail(word.upper())

    def expect_punct(self, ch: str) -> None:
        if self.tok.kind == "punct" and self.tok.text == ch:
            self.i += 1
            return
        raise self.fail(f"'{ch}'")

    # -- grammar ---------------------------------------------------------------------------
    def parse(self) -> Expression:
        if self.tok.kind == "end":
            raise _error(self.text, 0, "empty filter")
        expr = self.parse_or()
        if self.tok.kind != "end":
            raise self.fail("AND, OR or end of input")
        return expr

    def parse_or(self) -> Expression:
        parts = [self.parse_and()]
        while self.accept_keyword("or"):
            parts.append(self.parse_and())
        return or_(*parts) if len(parts) > 1 else parts[0]

    def parse_and(self) -> Expression:
        parts = [self.parse_not()]
        while self.accept_keyword("and"):
            parts.append(self.parse_not())
        return and_(*parts) if len(parts) > 1 else parts[0]

    def parse_not(self) -> Expression:
        if self.accept_keyword("not"):
            child = self.parse_not()
            if isinstance(child, AlwaysTrue | AlwaysFalse):
                return child.negate()
            return Not(child)
        return self.parse_primary()

    def parse_primary(self) -> Expression:
        t = self.tok
        if t.kind == "punct" and t.text == "(":
            self.advance()
            expr = self.parse_or()
            self.expect_punct(")")
            return expr
        if t.keyword in ("true", "false"):
            nxt = self.tokens[self.i + 1]
            if nxt.kind != "op":
                self.advance()
                return AlwaysTrue() if t.keyword == "true" else AlwaysFalse()
        if t.kind in ("ident", "dquoted", "bquoted"):
            return self.parse_predicate(self.parse_column())
        if t.kind in ("number", "string", "bytes") or t.keyword in ("true", "false"):
            return self.parse_reversed()
        if t.kind == "keyword" and t.keyword not in ("null", "nan"):
            self.parse_name_part()  # raises the "quote it" hint
        raise self.fail("a column name, '(' or NOT")

    def parse_column(self) -> Reference:
        parts = [self.parse_name_part()]
        while self.tok.kind == "punct" and self.tok.text == ".":
            self.advance()
            parts.append(self.parse_name_part())
        return Reference(".".join(parts))

    def parse_name_part(self) -> str:
        t = self.tok
        if t.kind == "ident":
            self.advance()
            return t.text
        if t.kind == "dquoted":
            self.advance()
            return t.text[1:-1].replace('""', '"')
        if t.kind == "bquoted":
            self.advance()
            return t.text[1:-1].replace("``", "`")
        if t.kind == "keyword":
            raise _error(
                self.text, t.pos, f'{t.text!r} is a keyword; quote it ("{t.text}") to use it as a name'
            )
        raise self.fail("a column name")

    def parse_literal(self) -> Any:
        t = self.tok
        if t.kind == "number":
            self.advance()
            text = t.text
            if re.fullmatch(r"[+-]?\d+", text):
                return int(text)
            if "e" in text.lower():
                return float(text)
            return Decimal(text)
        if t.kind == "string":
            self.advance()
            return t.text[1:-1].replace("''", "'")
        if t.kind == "bytes":
            self.advance()
            return bytes.fromhex(t.text[2:-1])
        if t.keyword in ("true", "false"):
            self.advance()
            return t.keyword == "true"
        if t.keyword == "null":
            raise _error(self.text, t.pos, "NULL is not a value here; use IS NULL or IS NOT NULL")
        if t.keyword == "nan":
            raise _error(self.text, t.pos, "NaN is not a value here; use IS NAN or IS NOT NAN")
        raise self.fail("a literal (number, 'string', true or false)")

    def parse_reversed(self) -> Expression:
        value = self.parse_literal()
        t = self.tok
        if t.kind != "op":
            raise self.fail("a comparison operator")
        self.advance()
        column = self.parse_column()
        return _COMPARISONS[_FLIPPED[t.text]](column, value)

    def parse_predicate(self, column: Reference) -> Expression:
        t = self.tok
        if t.kind == "op":
            self.advance()
            return _COMPARISONS[t.text](column, self.parse_literal())
        if self.accept_keyword("is"):
            negated = self.accept_keyword("not")
            if self.accept_keyword("null"):
                return NotNull(column) if negated else IsNull(column)
            if self.accept_keyword("nan"):
                return NotNaN(column) if negated else IsNaN(column)
            raise self.fail("NULL or NAN")
        negated = self.accept_keyword("not")
        if self.accept_keyword("in"):
            values = self.parse_list()
            return not_in(column, values) if negated else in_(column, values)
        if self.at_keyword("like"):
            self.advance()
            pattern_tok = self.tok
            if pattern_tok.kind != "string":
                raise self.fail("a quoted LIKE pattern")
            pattern = self.parse_literal()
            return self.like(column, pattern, negated, pattern_tok)
        if self.accept_keyword("between"):
            low = self.parse_literal()
            self.expect_keyword("and")
            high = self.parse_literal()
            inside = and_(GreaterThanOrEqual(column, low), LessThanOrEqual(column, high))
            return inside.negate() if negated else inside
        if negated:
            raise self.fail("IN, LIKE or BETWEEN after NOT")
        raise self.fail("a comparison operator, IN, IS, LIKE or BETWEEN")

    def parse_list(self) -> list[Any]:
        self.expect_punct("(")
        values = [self.parse_literal()]
        while self.tok.kind == "punct" and self.tok.text == ",":
            self.advance()
            values.append(self.parse_literal())
        self.expect_punct(")")
        return values

    def like(self, column: Reference, pattern: str, negated: bool, tok: _Token) -> Expression:
        """Only prefix patterns are supported: ``'abc%'`` (``\\%``, ``\\_`` escape wildcards)."""
        out: list[str] = []
        i = 0
        wildcard_at_end = False
        while i < len(pattern):
            ch = pattern[i]
            if ch == "\\" and i + 1 < len(pattern):
                out.append(pattern[i + 1])
                i += 2
                continue
            if ch == "%" and i == len(pattern) - 1:
                wildcard_at_end = True
                break
            if ch in "%_":
                raise _error(
                    self.text,
                    tok.pos,
                    f"unsupported LIKE pattern {pattern!r}: only a prefix followed by one trailing '%' "
                    "is supported (escape literal % and _ with a backslash)",
                )
            out.append(ch)
            i += 1
        prefix = "".join(out)
        if not wildcard_at_end:
            return NotEqualTo(column, prefix) if negated else EqualTo(column, prefix)
        return NotStartsWith(column, prefix) if negated else StartsWith(column, prefix)


def parse(text: str) -> Expression:
    """Parse a row filter such as ``"region = 'eu' AND ts >= '2024-05-01T00:00:00+00:00'"``.

    Raises ExpressionError naming the offending token and its position.
    """
    if not isinstance(text, str):
        raise ExpressionError(f"a row filter must be a string, got {type(text).__name__}")
    return _Parser(text).parse()
