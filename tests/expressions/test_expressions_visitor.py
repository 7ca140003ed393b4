"""The one walk over filters: its order, its reach (deep trees), and what rides on it
(operators as Op, JSON names, compile-once closures)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from aioiceberg.errors import ExpressionError
from aioiceberg.expressions import (
    BooleanExpressionVisitor,
    InclusiveMetricsEvaluator,
    Op,
    bind,
    parse,
    visit,
)
from aioiceberg.expressions import tree as t
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.expressions.serde import expression_from_json, expression_to_json
from aioiceberg.expressions.visitor import compile_filter, is_bound, referenced_field_ids, rewrite_not
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import DoubleType, LongType, NestedField, StringType, TimestamptzType
from aioiceberg.spec.values import to_bytes

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "ts", TimestamptzType()),
    NestedField(3, "s", StringType()),
    NestedField(4, "x", DoubleType()),
)


class _Trace(BooleanExpressionVisitor[str]):
    """Writes each node as it is visited, so the order shows in the result."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def _note(self, text: str) -> str:
        self.seen.append(text)
        return text

    def visit_true(self) -> str:
        return self._note("T")

    def visit_false(self) -> str:
        return self._note("F")

    def visit_not(self, child: str) -> str:
        return self._note(f"!{child}")

    def visit_and(self, left: str, right: str) -> str:
        return self._note(f"({left}&{right})")

    def visit_or(self, left: str, right: str) -> str:
        return self._note(f"({left}|{right})")

    def visit_predicate(self, pred: t.Predicate) -> str:
        return self._note(pred.term.name)


def test_visit_is_post_order_left_before_right() -> None:
    expr = t.Or(t.And(t.IsNull("a"), t.Not(t.IsNull("b"))), t.And(t.AlwaysTrue(), t.AlwaysFalse()))
    trace = _Trace()
    assert visit(expr, trace) == "((a&!b)|(T&F))"
    assert trace.seen == ["a", "b", "!b", "(a&!b)", "T", "F", "(T&F)", "((a&!b)|(T&F))"]


def test_visit_rejects_what_is_not_an_expression() -> None:
    with pytest.raises(ExpressionError, match="not a filter expression"):
        visit(t.And(t.IsNull("a"), "b"), _Trace())  # type: ignore[arg-type]


def test_walks_reach_the_bottom_of_a_filter_far_deeper_than_the_recursion_limit() -> None:
    # an upsert's key filter ORs one conjunction per key row
    n = 2000
    expr: t.Expression = t.And(t.EqualTo("id", 0), t.EqualTo("s", "k0"))
    for i in range(1, n):
        expr = t.Or(expr, t.And(t.EqualTo("id", i), t.NotEqualTo("s", f"k{i}")))
    bound = bind(SCHEMA, expr)
    assert is_bound(bound) and not is_bound(expr)
    assert referenced_field_ids(bound) == {1, 3}
    guarded = bind_row_filter(SCHEMA, t.Not(expr))
    assert referenced_field_ids(guarded) == {1, 3}
    node = expression_to_json(rewrite_not(t.Not(bound)))
    depth = 0
    while node["type"] == "and":  # NOT (a OR b OR ...) is NOT a AND NOT b AND ...
        node, depth = node["left"], depth + 1
    assert depth == n - 1


def test_compiled_filters_of_thousands_of_ored_keys_evaluate_without_overflowing() -> None:
    """An upsert's key filter reaches the metrics and residual evaluators and the row filter:
    chains of one connective compile to one loop, not one nested call per key."""
    from aioiceberg.expressions import ResidualEvaluator, StrictMetricsEvaluator, compile_row_filter
    from aioiceberg.spec.manifest import DataFile, DataFileContent, FileFormat
    from aioiceberg.spec.partitioning import PartitionField, PartitionSpec
    from aioiceberg.spec.transforms import parse_transform

    n = 2000
    text = " OR ".join(f"(id = {i} AND s = 'k{i}')" for i in range(n))
    expr = parse(text)
    f = DataFile(
        DataFileContent.DATA,
        "s3://b/f.parquet",
        FileFormat.PARQUET,
        (7,),
        10,
        100,
        value_counts={1: 10, 3: 10},
        null_value_counts={1: 0, 3: 0},
        lower_bounds={1: to_bytes(1500, LongType()), 3: to_bytes("k1500", StringType())},
        upper_bounds={1: to_bytes(1500, LongType()), 3: to_bytes("k1500", StringType())},
    )
    assert InclusiveMetricsEvaluator(SCHEMA, expr).eval(f)
    assert StrictMetricsEvaluator(SCHEMA, expr).eval(f)  # every row is key 1500
    spec = PartitionSpec(0, (PartitionField((1,), 1000, parse_transform("identity"), "id"),))
    assert str(ResidualEvaluator(SCHEMA, spec, expr).residual_for((1500,))) == str(parse("s = 'k1500'"))
    keep = compile_row_filter(bind(SCHEMA, expr))
    assert keep((1999, None, "k1999", None)) and not keep((1999, None, "k1998", None))


def test_every_op_is_named_as_iceberg_json_names_it() -> None:
    predicates: list[t.Predicate] = [
        t.IsNull("s"),
        t.NotNull("s"),
        t.IsNaN("x"),
        t.NotNaN("x"),
        t.LessThan("id", 1),
        t.LessThanOrEqual("id", 1),
        t.GreaterThan("id", 1),
        t.GreaterThanOrEqual("id", 1),
        t.EqualTo("id", 1),
        t.NotEqualTo("id", 1),
        t.StartsWith("s", "a"),
        t.NotStartsWith("s", "a"),
        t.In("id", [1, 2]),
        t.NotIn("id", [1, 2]),
    ]
    assert {p.op for p in predicates} == set(Op)
    for pred in predicates:
        written = expression_to_json(pred)
        assert written["type"] == pred.op.value
        assert expression_from_json(written) == pred
    assert {op.value for op in Op} == {
        "is-null", "not-null", "is-nan", "not-nan", "lt", "lt-eq", "gt", "gt-eq",
        "eq", "not-eq", "starts-with", "not-starts-with", "in", "not-in",
    }  # fmt: skip


FILTER = (
    "(id < 5 OR id >= 10) AND NOT (s LIKE 'ab%') AND s NOT IN ('a', 'b')"
    " AND ts <= '2024-01-02T03:04:05+00:00' AND x IS NOT NAN AND id != 3 AND s NOT LIKE 'q%'"
)


def _nest(*preds: str) -> str:
    text = preds[0]
    for p in preds[1:]:
        text = f'{{"type": "and", "left": {text}, "right": {p}}}'
    return text


def _golden(ts: str) -> str:
    return _nest(
        '{"type": "or", "left": {"type": "lt", "term": "id", "value": 5},'
        ' "right": {"type": "gt-eq", "term": "id", "value": 10}}',
        '{"type": "not", "child": {"type": "starts-with", "term": "s", "value": "ab"}}',
        '{"type": "not-in", "term": "s", "values": ["a", "b"]}',
        f'{{"type": "lt-eq", "term": "ts", "value": "{ts}"}}',
        '{"type": "not-nan", "term": "x"}',
        '{"type": "not-eq", "term": "id", "value": 3}',
        '{"type": "not-starts-with", "term": "s", "value": "q"}',
    )


def test_json_text_of_filters_is_unchanged() -> None:
    expr = parse(FILTER)
    assert json.dumps(expression_to_json(expr)) == _golden("2024-01-02T03:04:05+00:00")
    assert json.dumps(expression_to_json(bind(SCHEMA, expr))) == _golden("2024-01-02T03:04:05.000000+00:00")


def test_compiled_filters_refuse_a_not_left_in_the_tree() -> None:
    with pytest.raises(ExpressionError, match="NOT must be pushed"):
        compile_filter(t.Not(t.IsNull("a")), lambda pred: lambda x: True)


def test_evaluation_calls_closures_and_never_walks_the_tree() -> None:
    calls: list[t.Predicate] = []

    def leaf(pred: t.Predicate) -> object:
        calls.append(pred)
        return lambda x: x

    fn = compile_filter(t.Or(t.And(t.IsNull("a"), t.IsNull("b")), t.IsNull("c")), leaf)  # type: ignore[arg-type]
    assert len(calls) == 3
    for _ in range(10):
        assert fn(True) and not fn(False)
    assert len(calls) == 3


def test_metrics_evaluator_answers_the_same_through_precomputed_bound_checks() -> None:
    stats = SimpleNamespace(
        record_count=10,
        value_counts={1: 10},
        null_value_counts={1: 0},
        nan_value_counts={},
        lower_bounds={1: to_bytes(5, LongType())},
        upper_bounds={1: to_bytes(9, LongType())},
    )

    answers = {
        text: InclusiveMetricsEvaluator(SCHEMA, text).eval(stats)
        for text in ["id < 5", "id <= 5", "id = 4", "id = 10", "id > 9", "id >= 9", "id = 7", "id < 6"]
    }
    assert answers == {
        "id < 5": False,
        "id <= 5": True,
        "id = 4": False,
        "id = 10": False,
        "id > 9": False,
        "id >= 9": True,
        "id = 7": True,
        "id < 6": True,
    }


def test_long_chains_print_compare_hash_and_negate_without_recursing() -> None:
    """A key filter of thousands of terms is printed (errors, plans), hashed (caches) and
    negated (NOT IN rewrites) one term at a time; the grouping of a chain does not matter."""
    n = 5000
    keys = [parse(f"id = {i}") for i in range(n)]
    left = t.or_(*keys)
    right = keys[-1]
    for key in reversed(keys[:-1]):
        right = t.Or(key, right)  # the same terms, nested the other way
    assert left == right and hash(left) == hash(right)
    text = str(left)
    assert text.count(" OR ") == n - 1 and parse(text) == left
    negated = left.negate()
    assert isinstance(negated, t.And) and t.chain_of(negated, t.And) == [k.negate() for k in keys]
    assert str(negated).count(" AND ") == n - 1
    assert t.and_(parse("a = 1"), parse("b = 2 OR c = 3")) != t.or_(parse("a = 1 AND b = 2"), parse("c = 3"))
    assert str(parse("a = 1 AND (b = 2 OR c = 3)")) == "a = 1 AND (b = 2 OR c = 3)"
