"""The row-filter parser: operators, precedence, quoting, literals and error positions."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioiceberg.errors import ExpressionError
from aioiceberg.expressions import (
    AlwaysTrue,
    And,
    EqualTo,
    Expression,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    Reference,
    StartsWith,
    parse,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 1", EqualTo("a", 1)),
        ("a == 1", EqualTo("a", 1)),
        ("a != 1", NotEqualTo("a", 1)),
        ("a <> 1", NotEqualTo("a", 1)),
        ("a < 1", LessThan("a", 1)),
        ("a <= 1", LessThanOrEqual("a", 1)),
        ("a > 1", GreaterThan("a", 1)),
        ("a >= -1", GreaterThanOrEqual("a", -1)),
        ("1 < a", GreaterThan("a", 1)),
        ("'x' = a", EqualTo("a", "x")),
        ("a IN (1, 2)", In("a", {1, 2})),
        ("a NOT IN (1, 2)", NotIn("a", {1, 2})),
        ("a IN (1)", EqualTo("a", 1)),
        ("a NOT IN (1)", NotEqualTo("a", 1)),
        ("a IS NULL", IsNull("a")),
        ("a IS NOT NULL", NotNull("a")),
        ("a IS NAN", IsNaN("a")),
        ("a IS NOT NAN", NotNaN("a")),
        ("a LIKE 'ab%'", StartsWith("a", "ab")),
        ("a NOT LIKE 'ab%'", NotStartsWith("a", "ab")),
        ("a LIKE 'ab'", EqualTo("a", "ab")),
        (r"a LIKE 'a\%b\_%'", StartsWith("a", "a%b_")),
        ("a BETWEEN 1 AND 5", And(GreaterThanOrEqual("a", 1), LessThanOrEqual("a", 5))),
        ("true", AlwaysTrue()),
        ("NOT false", AlwaysTrue()),
        ("a = true", EqualTo("a", True)),
    ],
)
def test_each_operator_parses_to_its_node(text: str, expected: Expression) -> None:
    assert parse(text) == expected


def test_keywords_are_case_insensitive() -> None:
    assert parse("a is not null and b in (1, 2) Or NOT c like 'x%'") == Or(
        And(NotNull("a"), In("b", {1, 2})), Not(StartsWith("c", "x"))
    )


def test_not_binds_tighter_than_and_which_binds_tighter_than_or() -> None:
    a, b, c = EqualTo("a", 1), EqualTo("b", 2), EqualTo("c", 3)
    assert parse("a = 1 OR b = 2 AND c = 3") == Or(a, And(b, c))
    assert parse("NOT a = 1 AND b = 2") == And(Not(a), b)
    assert parse("(a = 1 OR b = 2) AND c = 3") == And(Or(a, b), c)
    assert parse("NOT (a = 1 OR b = 2)") == Not(Or(a, b))


def test_literal_kinds() -> None:
    assert parse("a = 12").value == 12  # type: ignore[attr-defined]
    assert parse("a = 1.50").value == Decimal("1.50")  # type: ignore[attr-defined]
    assert parse("a = 1e3").value == 1000.0  # type: ignore[attr-defined]
    assert parse("a = 'it''s'").value == "it's"  # type: ignore[attr-defined]
    assert parse("a = X'0aff'").value == b"\x0a\xff"  # type: ignore[attr-defined]


def test_quoted_and_dotted_names() -> None:
    assert parse('"my col" = 1') == EqualTo(Reference("my col"), 1)
    assert parse("`we``ird` = 1") == EqualTo(Reference("we`ird"), 1)
    assert parse('"and" = 1') == EqualTo(Reference("and"), 1)
    assert parse("loc.city = 'x'") == EqualTo(Reference("loc.city"), "x")
    assert parse('loc."the city" = 1') == EqualTo(Reference("loc.the city"), 1)


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("a = ", 4, "end of input"),
        ("a = 1 AND", 9, "end of input"),
        ("a = 1 b", 6, "'b'"),
        ("a ~ 1", 2, "'~'"),
        ("(a = 1", 6, "')'"),
        ("a = 'open", 4, "unterminated"),
        ("a LIKE 'x%y'", 7, "LIKE pattern"),
        ("a = NULL", 4, "IS NULL"),
        ("and = 1", 0, "keyword"),
        ("a IN ()", 6, "literal"),
        ("a IS 3", 5, "NULL or NAN"),
        ("", 0, "empty"),
    ],
)
def test_errors_name_the_bad_token_and_its_position(text: str, position: int, fragment: str) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(text)
    message = str(info.value)
    assert f"position {position}" in message
    assert fragment in message


names = st.sampled_from(["a", "b_c", "my col", "x.y", "and"])
literals = st.one_of(
    st.integers(-(10**12), 10**12),
    st.text(alphabet="ab'c %_", max_size=5),
    st.booleans(),
    st.decimals(allow_nan=False, allow_infinity=False, places=3),
)


def _predicates() -> st.SearchStrategy[Expression]:
    def make(name: str, op: str, value: object, values: list[object]) -> Expression:
        if op == "in":
            return In(name, values) if len(set(values)) > 1 else EqualTo(name, values[0])
        if op == "null":
            return IsNull(name)
        if op == "like" and isinstance(value, str):
            return StartsWith(name, value)
        return {"=": EqualTo, "<": LessThan, ">=": GreaterThanOrEqual, "!=": NotEqualTo}.get(op, EqualTo)(
            name, value
        )

    return st.builds(
        make,
        names,
        st.sampled_from(["=", "<", ">=", "!=", "in", "null", "like"]),
        literals,
        st.lists(st.integers(0, 5), min_size=1, max_size=3),
    )


expressions = st.recursive(
    _predicates(),
    lambda children: st.one_of(
        st.builds(And, children, children), st.builds(Or, children, children), st.builds(Not, children)
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(expressions)
def test_str_of_an_expression_parses_back_to_it(expr: Expression) -> None:
    assert parse(str(expr)) == expr
