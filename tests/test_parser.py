"""Tests of the workload language parser (docs/semantics.md section 4, "Query language")."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_hamlet.errors import WorkloadError
from gpu_hamlet.names import quoted, quoted_list
from gpu_hamlet.query.parser import checked, parse_workload, query_text, tokenize
from gpu_hamlet.query.pattern import Alt, And, Not, Seq
from gpu_hamlet.query.workload import (
    Aggregate,
    Filter,
    NextCondition,
    PatternElement,
    Query,
    Workload,
)

MS, S, MIN, H, D = 1, 1000, 60_000, 3_600_000, 86_400_000


def one(text: str) -> Query:
    workload = parse_workload(text)
    assert len(workload) == 1
    return workload.queries[0]


def error(text: str) -> WorkloadError:
    with pytest.raises(WorkloadError) as info:
        parse_workload(text)
    return info.value


def assert_error(
    text: str, *, query: str | None, line: int | None, column: int | None, contains: tuple[str, ...]
) -> WorkloadError:
    err = error(text)
    assert (err.query, err.line, err.column) == (query, line, column), str(err)
    for part in contains:
        assert part in str(err), (part, str(err))
    if query is not None:
        assert str(err).startswith(f"query {query}")
    if line is not None:
        assert f"line {line}, column {column}:" in str(err)
    return err


# --------------------------------------------------------------------------------------------------
# Clauses


def test_full_query_every_clause() -> None:
    q = one(
        """
        RETURN driver, COUNT(*), COUNT(Travel), SUM(Travel.fare), AVG(Travel.fare),
               MIN(Travel.fare), MAX(Travel.fare)
        PATTERN SEQ(Request, Travel+, Dropoff)
        WHERE [driver, zone] AND Travel.fare > 2 AND [zone, rider]
        GROUPBY driver
        WITHIN 30 min SLIDE 10 min
        """
    )
    assert q == Query(
        name="q1",
        pattern=(
            PatternElement("Request"),
            PatternElement("Travel", True),
            PatternElement("Dropoff"),
        ),
        aggregates=(
            Aggregate("COUNT", None, None, "count"),
            Aggregate("COUNT", "Travel", None, "count_Travel"),
            Aggregate("SUM", "Travel", "fare", "sum_Travel_fare"),
            Aggregate("AVG", "Travel", "fare", "avg_Travel_fare"),
            Aggregate("MIN", "Travel", "fare", "min_Travel_fare"),
            Aggregate("MAX", "Travel", "fare", "max_Travel_fare"),
        ),
        group_items=("driver",),
        filters=(Filter("Travel", "fare", ">", 2),),
        equivalence=("driver", "zone", "rider"),
        groupby=("driver",),
        within_ms=30 * MIN,
        slide_ms=10 * MIN,
    )
    assert q.text.startswith("RETURN driver, COUNT(*)")
    assert q.text.endswith("WITHIN 30 min SLIDE 10 min")
    assert q.partition_attrs == ("driver", "zone", "rider")
    assert q.slide_ms != q.within_ms


def test_minimal_query_single_element_pattern_and_defaults() -> None:
    q = one("RETURN COUNT(*) PATTERN A WITHIN 5 s")
    assert q.name == "q1"
    assert q.elements == (PatternElement("A", False),)
    assert q.aggregates == (Aggregate("COUNT", None, None, "count"),)
    assert q.group_items == q.filters == q.equivalence == q.groupby == ()
    assert q.within_ms == q.slide_ms == 5 * S
    assert q.slide_ms == q.within_ms
    assert q.text == "RETURN COUNT(*) PATTERN A WITHIN 5 s"


def test_single_kleene_element_pattern() -> None:
    assert one("RETURN COUNT(*) PATTERN B+ WITHIN 1 s").elements == (PatternElement("B", True),)


def test_seq_of_one_element() -> None:
    assert one("RETURN COUNT(*) PATTERN SEQ(B+) WITHIN 1 s").elements == (
        PatternElement("B", True),
    )


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("COUNT(*)", Aggregate("COUNT", None, None, "count")),
        ("COUNT(A)", Aggregate("COUNT", "A", None, "count_A")),
        ("SUM(A.x)", Aggregate("SUM", "A", "x", "sum_A_x")),
        ("AVG(A.x)", Aggregate("AVG", "A", "x", "avg_A_x")),
        ("MIN(A.x)", Aggregate("MIN", "A", "x", "min_A_x")),
        ("MAX(A.x)", Aggregate("MAX", "A", "x", "max_A_x")),
        ("count(*)", Aggregate("COUNT", None, None, "count")),
        ("Sum(A.x)", Aggregate("SUM", "A", "x", "sum_A_x")),
        ("avg ( A . x )", Aggregate("AVG", "A", "x", "avg_A_x")),
        ("COUNT(*) AS n", Aggregate("COUNT", None, None, "n")),
        ("COUNT(A) as nA", Aggregate("COUNT", "A", None, "nA")),
        ("max(A.x) As top", Aggregate("MAX", "A", "x", "top")),
        ("SUM(A.x) AS `total x`", Aggregate("SUM", "A", "x", "total x")),
    ],
)
def test_aggregates_default_names_and_aliases(item: str, expected: Aggregate) -> None:
    q = one(f"RETURN {item} PATTERN SEQ(A, B+) WITHIN 1 s")
    assert q.aggregates == (expected,)
    assert (
        q.aggregates[0].default_name
        == Aggregate(expected.func, expected.type, expected.attr, "").default_name
    )


def test_return_order_and_group_items() -> None:
    q = one("RETURN b, MAX(A.x), a, COUNT(*) AS n, SUM(A.x) PATTERN A GROUPBY a, b WITHIN 1 s")
    assert q.group_items == ("b", "a")
    assert [a.name for a in q.aggregates] == ["max_A_x", "n", "sum_A_x"]
    assert q.groupby == ("a", "b")


@pytest.mark.parametrize("groupby", ["GROUPBY", "groupby", "GROUP BY", "group  by", "Group\n  By"])
def test_groupby_spellings(groupby: str) -> None:
    q = one(f"RETURN g, COUNT(*) PATTERN A {groupby} g, h WITHIN 1 s")
    assert q.groupby == ("g", "h")


def test_equivalence_merges_without_duplicates_in_first_appearance_order() -> None:
    q = one(
        "RETURN COUNT(*) PATTERN SEQ(A, B) WHERE [c, a] AND A.x = 1 AND [a, b] AND [c] AND [d]"
        " WITHIN 1 s"
    )
    assert q.equivalence == ("c", "a", "b", "d")
    assert q.filters == (Filter("A", "x", "=", 1),)


def test_filters_keep_order_and_may_repeat_a_type() -> None:
    q = one(
        "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE B.x > 1 AND A.y = 'k' AND B.x < 10 WITHIN 1 s"
    )
    assert q.filters == (
        Filter("B", "x", ">", 1),
        Filter("A", "y", "=", "k"),
        Filter("B", "x", "<", 10),
    )
    assert q.filters_of("B") == (Filter("B", "x", ">", 1), Filter("B", "x", "<", 10))


# --------------------------------------------------------------------------------------------------
# Filters: operators and literals


@pytest.mark.parametrize(
    ("op", "canonical"),
    [
        ("=", "="),
        ("==", "="),
        ("!=", "!="),
        ("<>", "!="),
        ("<", "<"),
        ("<=", "<="),
        (">", ">"),
        (">=", ">="),
    ],
)
@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("7", 7),
        ("-7", -7),
        ("0", 0),
        ("2.5", 2.5),
        ("-0.25", -0.25),
        ("12345678901234567890", 12345678901234567890),
        ("1e308", 1e308),
        ("-2.5E-3", -0.0025),
        ("1e400", Decimal("1e400")),
        ("'abc'", "abc"),
        ('"abc"', "abc"),
        ("''", ""),
    ],
)
def test_every_operator_on_every_literal_kind(
    op: str, canonical: str, literal: str, value: object
) -> None:
    q = one(f"RETURN COUNT(*) PATTERN A WHERE A.v {op} {literal} WITHIN 1 s")
    (f,) = q.filters
    assert f == Filter("A", "v", canonical, value)
    assert type(f.value) is type(value)


def test_operators_without_spaces() -> None:
    q = one("RETURN COUNT(*) PATTERN A WHERE A.v>=-3 AND A.w<>'x' AND A.u<2.5 WITHIN 1 s")
    assert q.filters == (
        Filter("A", "v", ">=", -3),
        Filter("A", "w", "!=", "x"),
        Filter("A", "u", "<", 2.5),
    )


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("'it''s'", "it's"),
        ("'it\\'s'", "it's"),
        ('"say ""hi"""', 'say "hi"'),
        ('"say \\"hi\\""', 'say "hi"'),
        ("'a\\\\b'", "a\\b"),
        ("'line\\nbreak'", "line\nbreak"),
        ("'C:\\data'", "C:\\data"),
        ("'-- not a comment'", "-- not a comment"),
        ("'a;b'", "a;b"),
        ('"it\'s"', "it's"),
        ("'Ünïcode ✓'", "Ünïcode ✓"),
    ],
)
def test_string_literal_escapes(literal: str, value: str) -> None:
    assert (
        one(f"RETURN COUNT(*) PATTERN A WHERE A.s = {literal} WITHIN 1 s").filters[0].value == value
    )


# --------------------------------------------------------------------------------------------------
# Durations


@pytest.mark.parametrize(
    ("unit", "factor"),
    [
        ("ms", MS),
        ("msec", MS),
        ("msecs", MS),
        ("millisecond", MS),
        ("milliseconds", MS),
        ("s", S),
        ("sec", S),
        ("secs", S),
        ("second", S),
        ("seconds", S),
        ("min", MIN),
        ("mins", MIN),
        ("minute", MIN),
        ("minutes", MIN),
        ("h", H),
        ("hr", H),
        ("hrs", H),
        ("hour", H),
        ("hours", H),
        ("d", D),
        ("day", D),
        ("days", D),
        ("MS", MS),
        ("Sec", S),
        ("MIN", MIN),
        ("Hours", H),
        ("DAYS", D),
    ],
)
def test_every_unit(unit: str, factor: int) -> None:
    q = one(f"RETURN COUNT(*) PATTERN A WITHIN 6 {unit} SLIDE 2 {unit}")
    assert (q.within_ms, q.slide_ms) == (6 * factor, 2 * factor)


@pytest.mark.parametrize(
    ("duration", "ms"),
    [
        ("1.5 h", 5_400_000),
        ("0.5 s", 500),
        ("2.25 min", 135_000),
        ("0.001 s", 1),
        ("1.0 ms", 1),
        ("0.5 d", 43_200_000),
        ("10s", 10_000),
        ("250ms", 250),
        ("1.5h", 5_400_000),
        ("365 days", 365 * D),
    ],
)
def test_decimal_and_unspaced_durations(duration: str, ms: int) -> None:
    q = one(f"RETURN COUNT(*) PATTERN A WITHIN {duration}")
    assert q.within_ms == q.slide_ms == ms
    assert type(q.within_ms) is int


def test_slide_equal_to_within_is_tumbling() -> None:
    q = one("RETURN COUNT(*) PATTERN A WITHIN 1 min SLIDE 60 s")
    assert q.within_ms == q.slide_ms == MIN
    assert q.slide_ms == q.within_ms


# --------------------------------------------------------------------------------------------------
# Names, case, workloads


def test_keywords_case_insensitive_names_case_sensitive() -> None:
    q = one(
        "return Grp, count(*) pattern seq(a, A+) where [K, k] and A.X = 1 "
        "group by Grp within 1 S slide 1 Ms"
    )
    assert q.elements == (PatternElement("a"), PatternElement("A", True))
    assert q.equivalence == ("K", "k")
    assert q.filters == (Filter("A", "X", "=", 1),)
    assert q.groupby == ("Grp",)
    assert q.slide_ms == 1


def test_type_names_differing_in_case_are_different_types() -> None:
    err = error("RETURN COUNT(a) PATTERN A WITHIN 1 s")
    assert "'a'" in str(err)


def test_function_names_and_units_are_not_reserved() -> None:
    q = one(
        "RETURN min, day, COUNT(*) AS n, SUM(count.max) PATTERN SEQ(count, sum+) WHERE sum.h > 2 "
        "GROUPBY min, day WITHIN 1 s"
    )
    assert q.group_items == ("min", "day")
    assert q.elements == (PatternElement("count"), PatternElement("sum", True))
    assert q.aggregates[1] == Aggregate("SUM", "count", "max", "sum_count_max")
    assert q.filters == (Filter("sum", "h", ">", 2),)


def test_any_identifier_is_an_attribute_after_a_dot() -> None:
    q = one("RETURN SUM(Stock.return) PATTERN Stock+ WHERE Stock.within > 0 WITHIN 1 d")
    assert q.aggregates[0] == Aggregate("SUM", "Stock", "return", "sum_Stock_return")
    assert q.filters == (Filter("Stock", "within", ">", 0),)


def test_backtick_names() -> None:
    q = one(
        "`my q`: RETURN `the key`, COUNT(`my type`) AS `n of ``x```, SUM(`my type`.`a b`) "
        "PATTERN SEQ(`my type`+, `Return`) WHERE [`the key`] AND `my type`.`a b` >= 1 "
        "GROUPBY `the key` WITHIN 1 s"
    )
    assert q.name == "my q"
    assert q.elements == (PatternElement("my type", True), PatternElement("Return"))
    assert q.aggregates == (
        Aggregate("COUNT", "my type", None, "n of `x`"),
        Aggregate("SUM", "my type", "a b", "sum_my type_a b"),
    )
    assert q.group_items == q.groupby == q.equivalence == ("the key",)
    assert q.filters == (Filter("my type", "a b", ">=", 1),)


def test_named_and_unnamed_queries_numbered_by_position() -> None:
    w = parse_workload(
        "RETURN COUNT(*) PATTERN A WITHIN 1 s;"
        "fast: RETURN COUNT(*) PATTERN B WITHIN 1 s;"
        "RETURN COUNT(*) PATTERN C WITHIN 1 s;"
        "Q4: RETURN COUNT(*) PATTERN D WITHIN 1 s;"
        "RETURN COUNT(*) PATTERN E WITHIN 1 s"
    )
    assert isinstance(w, Workload)
    assert w.names == ("q1", "fast", "q3", "Q4", "q5")
    assert w["fast"].types == ("B",)
    assert w["q5"].types == ("E",)


def test_explicit_name_matching_own_position_is_fine() -> None:
    assert parse_workload(
        "RETURN COUNT(*) PATTERN A WITHIN 1 s; q2: RETURN COUNT(*) PATTERN A WITHIN 1 s"
    ).names == (
        "q1",
        "q2",
    )


@pytest.mark.parametrize("end", ["", ";", " ;  ", ";\n-- done\n", ";  -- done"])
def test_trailing_semicolon_and_comments(end: str) -> None:
    w = parse_workload(
        "RETURN COUNT(*) PATTERN A WITHIN 1 s; RETURN COUNT(*) PATTERN B WITHIN 2 s" + end
    )
    assert w.names == ("q1", "q2")
    assert w["q2"].text == "RETURN COUNT(*) PATTERN B WITHIN 2 s"


def test_multi_line_workload_with_comments() -> None:
    text = """-- workload for the ride-sharing demo
-- two queries

rides : -- name on the same line as a comment
  RETURN driver, COUNT(*) AS trends  -- all trends
  PATTERN SEQ(Request, Travel+, Dropoff)
  WHERE [driver] -- per driver
    AND Travel.speed >= 10
  GROUPBY driver
  WITHIN 1 hour SLIDE 30 minutes;

-- the second query
RETURN
  AVG(Travel.speed)
PATTERN
  Travel+
WITHIN
  1 day
;
"""
    w = parse_workload(text)
    assert w.names == ("rides", "q2")
    rides = w["rides"]
    assert rides.aggregates == (Aggregate("COUNT", None, None, "trends"),)
    assert rides.filters == (Filter("Travel", "speed", ">=", 10),)
    assert (rides.within_ms, rides.slide_ms) == (H, 30 * MIN)
    assert rides.text.startswith("rides : -- name on the same line")
    assert rides.text.endswith("WITHIN 1 hour SLIDE 30 minutes")
    assert "-- all trends" in rides.text
    assert w["q2"].text == "RETURN\n  AVG(Travel.speed)\nPATTERN\n  Travel+\nWITHIN\n  1 day"
    assert w["q2"].within_ms == D


def test_windows_and_tabs_whitespace() -> None:
    w = parse_workload("RETURN COUNT(*)\r\n\tPATTERN A\r\n\tWITHIN 1 s;\r\n")
    assert w.names == ("q1",)


def test_str_of_query_is_its_text() -> None:
    q = one("  RETURN COUNT(*) PATTERN A WITHIN 1 s  ")
    assert str(q) == "RETURN COUNT(*) PATTERN A WITHIN 1 s"


def test_tokenizer_positions_and_normalisation() -> None:
    tokens = tokenize("a <> 'x\ny'\n  `b c` == -1.5 -- c\n")
    kinds = [(t.kind.name, t.value, t.line, t.column) for t in tokens]
    assert kinds == [
        ("IDENT", "a", 1, 1),
        ("SYMBOL", "!=", 1, 3),
        ("STRING", "x\ny", 1, 6),
        ("QUOTED", "b c", 3, 3),
        ("SYMBOL", "=", 3, 9),
        ("NUMBER", "-1.5", 3, 12),
        ("END", "", 4, 1),
    ]


def test_non_string_input_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_workload(b"RETURN COUNT(*) PATTERN A WITHIN 1 s")  # type: ignore[arg-type]


@pytest.mark.parametrize("workload", [b"RETURN COUNT(*) PATTERN A WITHIN 1 s", None])
def test_aggregate_of_no_text_nor_workload_is_parse_workloads_type_error(workload) -> None:
    """Not an AttributeError from deep inside (bytes iterate as ints)."""
    import pyarrow as pa

    from gpu_hamlet import aggregate

    events = pa.table({"time": [1], "type": ["A"]})
    with pytest.raises(TypeError, match="parse_workload expects the workload text as str"):
        aggregate(events, workload, backend="cpu")


def test_integer_literal_of_thousands_of_digits() -> None:
    """Python reads no integer of more than 4300 digits: such a literal is a Decimal, not a
    ValueError about sys.set_int_max_str_digits."""
    digits = "1" + "0" * 5000
    (q,) = parse_workload(f"RETURN COUNT(*) PATTERN A WHERE A.x < {digits} WITHIN 1 s")
    assert q.filters[0].value == Decimal(digits)


# --------------------------------------------------------------------------------------------------
# Semantic errors


@pytest.mark.parametrize("text", ["", "   \n\t", "-- nothing here\n-- at all"])
def test_empty_workload(text: str) -> None:
    err = assert_error(text, query=None, line=None, column=None, contains=("empty workload",))
    assert isinstance(err, ValueError)


def test_duplicate_explicit_names() -> None:
    assert_error(
        "a: RETURN COUNT(*) PATTERN A WITHIN 1 s;\na: RETURN COUNT(*) PATTERN B WITHIN 1 s",
        query="a",
        line=2,
        column=1,
        contains=("duplicate query name 'a'", "query 1"),
    )


def test_explicit_name_equal_to_earlier_positional_default() -> None:
    assert_error(
        "RETURN COUNT(*) PATTERN A WITHIN 1 s; q1: RETURN COUNT(*) PATTERN B WITHIN 1 s",
        query="q1",
        line=1,
        column=39,
        contains=("duplicate query name 'q1'", "query 1", "by position"),
    )


def test_positional_default_equal_to_earlier_explicit_name() -> None:
    assert_error(
        "q2: RETURN COUNT(*) PATTERN A WITHIN 1 s;\nRETURN COUNT(*) PATTERN B WITHIN 1 s",
        query="q2",
        line=2,
        column=1,
        contains=("duplicate query name 'q2'", "query 1"),
    )


def test_bare_return_name_not_in_groupby() -> None:
    assert_error(
        "RETURN g, x, COUNT(*) PATTERN A GROUPBY g WITHIN 1 s",
        query="q1",
        line=1,
        column=11,
        contains=("'x'", "GROUPBY"),
    )


def test_bare_return_name_without_any_groupby() -> None:
    assert_error(
        "RETURN x, COUNT(*) PATTERN A WITHIN 1 s",
        query="q1",
        line=1,
        column=8,
        contains=("'x'", "GROUPBY"),
    )


def test_aggregate_on_type_not_in_pattern() -> None:
    assert_error(
        "RETURN COUNT(*), SUM(C.x) PATTERN SEQ(A, B+) WITHIN 1 s",
        query="q1",
        line=1,
        column=18,
        contains=("SUM(C.x)", "'C'", "SEQ(A, B+)"),
    )


def test_count_of_type_not_in_pattern() -> None:
    assert_error(
        "n: RETURN COUNT(C) PATTERN A+ WITHIN 1 s",
        query="n",
        line=1,
        column=11,
        contains=("COUNT(C)", "'C'", "A+"),
    )


def test_filter_on_type_not_in_pattern() -> None:
    assert_error(
        "RETURN COUNT(*) PATTERN SEQ(A, B)\nWHERE A.x = 1 AND C.y > 2 WITHIN 1 s",
        query="q1",
        line=2,
        column=19,
        contains=("C.y > 2", "'C'", "not in the pattern"),
    )


@pytest.mark.parametrize(
    ("window", "column", "token"),
    [
        ("WITHIN 0 s", 14, "0 s"),
        ("WITHIN 0.0 h", 14, "0.0 h"),
        ("WITHIN -5 min", 14, "-5 min"),
        ("WITHIN 5 min SLIDE 0 ms", 26, "0 ms"),
        ("WITHIN 5 min SLIDE -1 s", 26, "-1 s"),
    ],
)
def test_zero_or_negative_duration(window: str, column: int, token: str) -> None:
    assert_error(
        f"RETURN COUNT(*) PATTERN A+\n      {window}",
        query="q1",
        line=2,
        column=column,
        contains=("positive duration", token),
    )


@pytest.mark.parametrize("duration", ["0.5 ms", "1.0001 s", "0.00001 min"])
def test_duration_not_whole_milliseconds(duration: str) -> None:
    assert_error(
        f"RETURN COUNT(*) PATTERN A WITHIN {duration}",
        query="q1",
        line=1,
        column=34,
        contains=(duration, "whole number of milliseconds"),
    )


def test_slide_greater_than_within() -> None:
    assert_error(
        "w: RETURN COUNT(*) PATTERN A WITHIN 1 min SLIDE 61 s",
        query="w",
        line=1,
        column=49,
        contains=("SLIDE", "WITHIN", "Spark", "window()"),
    )


def test_repeated_types_are_patterns_now() -> None:
    assert one("RETURN COUNT(*) PATTERN SEQ(A, B+, A) WITHIN 1 s").pattern == Seq(
        (PatternElement("A"), PatternElement("B", True), PatternElement("A"))
    )
    q = one("RETURN COUNT(*) PATTERN SEQ(B, B+) WITHIN 1 s")
    assert q.elements is None and q.types == ("B",)


@pytest.mark.parametrize(
    ("items", "column", "contains"),
    [
        ("COUNT(*), COUNT(*)", 18, ("'count'", "unique", "AS")),
        ("COUNT(*) AS n, SUM(A.x) AS n", 23, ("'n'", "unique")),
        ("SUM(A.x), SUM(A.x) AS sum_A_x", 18, ("'sum_A_x'",)),
        ("COUNT(*) AS g", 8, ("'g'", "GROUPBY")),
        ("COUNT(*) AS window_start", 8, ("'window_start'", "window")),
        ("COUNT(*) AS window_end", 8, ("'window_end'", "window")),
        ("g, g, COUNT(*)", 11, ("'g'", "twice")),
    ],
)
def test_duplicate_output_columns(items: str, column: int, contains: tuple[str, ...]) -> None:
    assert_error(
        f"RETURN {items} PATTERN A GROUPBY g WITHIN 1 s",
        query="q1",
        line=1,
        column=column,
        contains=contains,
    )


def test_default_name_clashing_with_groupby_column() -> None:
    assert_error(
        "RETURN COUNT(*) PATTERN A GROUPBY count WITHIN 1 s",
        query="q1",
        line=1,
        column=8,
        contains=("'count'", "GROUPBY", "AS"),
    )


def test_groupby_window_column_and_duplicate_groupby() -> None:
    assert_error(
        "RETURN COUNT(*) PATTERN A GROUPBY window_end WITHIN 1 s",
        query="q1",
        line=1,
        column=35,
        contains=("'window_end'",),
    )
    assert_error(
        "RETURN COUNT(*) PATTERN A GROUPBY g, g WITHIN 1 s",
        query="q1",
        line=1,
        column=38,
        contains=("'g'", "twice"),
    )


def test_return_of_groupby_names_alone() -> None:
    """The grammar's RETURN items may all be GROUPBY names (DESIGN.md section 2): such a query
    has no aggregate; it was refused ("RETURN has no aggregate")."""
    q = parse_workload("q: RETURN g PATTERN A GROUPBY g WITHIN 1 s").queries[0]
    assert q.aggregates == () and q.groupby == ("g",)
    assert_error(
        "RETURN COUNT(*) PATTERN A WITHIN 1 s;\nq: RETURN h PATTERN A GROUPBY g WITHIN 1 s",
        query="q",
        line=2,
        column=11,
        contains=("RETURN names 'h', which is not a GROUPBY attribute",),
    )


@pytest.mark.parametrize(
    ("pattern", "tree"),
    [
        ("SEQ(A, NOT B, C)", Seq((PatternElement("A"), Not("B"), PatternElement("C")))),
        ("SEQ(A, not B, C)", Seq((PatternElement("A"), Not("B"), PatternElement("C")))),
        (
            "SEQ(A, (SEQ(B, C))+)",
            Seq((PatternElement("A"), Seq((PatternElement("B"), PatternElement("C")), True))),
        ),
        ("(SEQ(A, B))+", Seq((PatternElement("A"), PatternElement("B")), True)),
        (
            "SEQ(A, SEQ(B, C))",
            Seq((PatternElement("A"), Seq((PatternElement("B"), PatternElement("C"))))),
        ),
        ("(B OR C)+", Alt((PatternElement("B"), PatternElement("C")), True)),
        ("A or B", Alt((PatternElement("A"), PatternElement("B")))),
        ("A AND B", And(PatternElement("A"), PatternElement("B"))),
    ],
)
def test_constructs_of_the_whole_language(pattern: str, tree) -> None:
    assert one(f"RETURN COUNT(*) PATTERN {pattern} WITHIN 1 s").pattern == tree


@pytest.mark.parametrize(
    ("pattern", "column", "contains"),
    [
        ("SEQ((B)|(C), A)", 32, ("unexpected character '|'",)),
        ("NOT A", 25, ("NOT stands only between two positive parts",)),
        ("SEQ(A, B AND C)", 34, ("expected ')', '+' or ','", "found 'AND'")),
    ],
)
def test_forms_outside_the_language(pattern: str, column: int, contains: tuple[str, ...]) -> None:
    assert_error(
        f"RETURN COUNT(*) PATTERN {pattern} WITHIN 1 s",
        query="q1",
        line=1,
        column=column,
        contains=contains,
    )


# --------------------------------------------------------------------------------------------------
# Syntax errors


def test_misspelt_keyword_in_second_query() -> None:
    text = "RETURN COUNT(*) PATTERN A WITHIN 1 s;\nRETURN COUNT(*)\n         PATERN A WITHIN 1 s"
    err = assert_error(
        text, query="q2", line=3, column=10, contains=("expected PATTERN", "found 'PATERN'")
    )
    assert str(err).startswith("query q2, line 3, column 10: expected PATTERN")


def test_syntax_error_after_explicit_name_uses_that_name() -> None:
    assert_error(
        "RETURN COUNT(*) PATTERN A WITHIN 1 s;\n\nrides: RETURN COUNT(*) PATTERN A WITHN 1 s",
        query="rides",
        line=3,
        column=34,
        contains=("expected WITHIN", "'WITHN'"),
    )


def test_empty_statement_between_queries_is_an_error_of_the_next_position() -> None:
    assert_error(
        "RETURN COUNT(*) PATTERN A WITHIN 1 s;;",
        query="q2",
        line=1,
        column=38,
        contains=("expected RETURN", "';'"),
    )


def test_two_names_for_one_query() -> None:
    assert_error(
        "x: y: RETURN COUNT(*) PATTERN A WITHIN 1 s",
        query="x",
        line=1,
        column=4,
        contains=("expected RETURN", "'y'"),
    )


def test_syntax_error_before_the_name_colon_uses_positional_name() -> None:
    assert_error(
        "RETURN COUNT(*) PATTERN A WITHIN 1 s; RETURN COUNT(*) PATTERN A WITHIN 1 s; rides RETURN",
        query="q3",
        line=1,
        column=77,
        contains=("expected RETURN", "'rides'"),
    )


@pytest.mark.parametrize(
    ("text", "line", "column", "contains"),
    [
        # unexpected end of text, at the end position
        ("RETURN COUNT(*) PATTERN A", 1, 26, ("expected WITHIN", "end of text")),
        ("RETURN COUNT(*) PATTERN A WITHIN 5", 1, 35, ("time unit", "end of text")),
        ("RETURN COUNT(*) PATTERN A WITHIN", 1, 33, ("a number", "end of text")),
        ("RETURN COUNT(*) PATTERN SEQ(A, B\n", 2, 1, ("')'", "end of text")),
        ("RETURN", 1, 7, ("aggregate", "end of text")),
        # wrong tokens
        ("RETURN COUNT(*) PATTERN A WITHIN 5 weeks", 1, 36, ("time unit", "'weeks'")),
        ("RETURN COUNT(*) PATTERN A WITHIN s", 1, 34, ("a number", "'s'")),
        ("RETURN COUNT(*) PATTERN A WITHIN 1 s SLIDE", 1, 43, ("a number", "end of text")),
        ("RETURN COUNT(*) PATTERN A WITHIN 1 s GROUPBY g", 1, 38, ("SLIDE", "';'", "'GROUPBY'")),
        ("RETURN COUNT(*) PATTERN A WITHIN 1 s RETURN", 1, 38, ("';'", "'RETURN'")),
        ("RETURN COUNT(*) PATTERN A WHERE A.x 3 WITHIN 1 s", 1, 37, ("comparison operator", "'3'")),
        ("RETURN COUNT(*) PATTERN A WHERE A.x = B WITHIN 1 s", 1, 39, ("literal", "'B'")),
        ("RETURN COUNT(*) PATTERN A WHERE A = 1 WITHIN 1 s", 1, 35, ("'.'", "'='")),
        ("RETURN COUNT(*) PATTERN A WHERE [a b] WITHIN 1 s", 1, 36, ("']'", "'b'")),
        ("RETURN COUNT(*) PATTERN A WHERE [] WITHIN 1 s", 1, 34, ("attribute", "']'")),
        ("RETURN COUNT(*) PATTERN A WHERE WITHIN 1 s", 1, 33, ("event type", "'['", "'WITHIN'")),
        ("RETURN COUNT(*) PATTERN SEQ() WITHIN 1 s", 1, 29, ("event type", "')'")),
        ("RETURN COUNT(*) PATTERN SEQ A WITHIN 1 s", 1, 29, ("'('", "'A'")),
        ("RETURN COUNT(*) PATTERN SEQ(A B) WITHIN 1 s", 1, 31, ("')'", "'B'")),
        ("RETURN COUNT(*) PATTERN A++ WITHIN 1 s", 1, 27, ("WITHIN", "'+'")),
        ("RETURN COUNT(*) PATTERN A GROUP g WITHIN 1 s", 1, 33, ("BY", "'g'")),
        (
            "RETURN COUNT(*) PATTERN A GROUPBY WITHIN 1 s",
            1,
            35,
            ("attribute", "'WITHIN'", "keyword"),
        ),
        (
            "RETURN COUNT(*) PATERN A WITHIN 1 s",
            1,
            17,
            ("expected PATTERN", "AS", "','", "'PATERN'"),
        ),
        ("RETURN COUNT(*) AS PATTERN A WITHIN 1 s", 1, 20, ("alias", "'PATTERN'")),
        ("RETURN COUNT(x.y) PATTERN x WITHIN 1 s", 1, 15, ("COUNT", "'.'")),
        ("RETURN COUNT() PATTERN A WITHIN 1 s", 1, 14, ("event type", "'*'", "')'")),
        ("RETURN SUM(*) PATTERN A WITHIN 1 s", 1, 12, ("event type", "'*'")),
        ("RETURN SUM(A) PATTERN A WITHIN 1 s", 1, 13, ("'.'", "')'")),
        ("RETURN SUM(A.x PATTERN A WITHIN 1 s", 1, 16, ("')'", "'PATTERN'")),
        ("RETURN MEDIAN(A.x) PATTERN A WITHIN 1 s", 1, 8, ("unknown aggregate", "'MEDIAN'")),
        ("RETURN , COUNT(*) PATTERN A WITHIN 1 s", 1, 8, ("aggregate", "','")),
        (";", 1, 1, ("expected RETURN", "';'")),
        ("SELECT COUNT(*) PATTERN A WITHIN 1 s", 1, 1, ("expected RETURN", "'SELECT'")),
        ("RETURN COUNT(*) PATTERN A WITHIN 1 s 5", 1, 38, ("end of text", "'5'")),
    ],
)
def test_syntax_errors(text: str, line: int, column: int, contains: tuple[str, ...]) -> None:
    err = assert_error(text, query="q1", line=line, column=column, contains=contains)
    assert "expected" in str(err) or "unknown aggregate" in str(err) or "COUNT takes" in str(err)


@pytest.mark.parametrize(
    ("text", "line", "column", "contains"),
    [
        (
            "RETURN COUNT(*) PATTERN A WHERE A.x ! 3 WITHIN 1 s",
            1,
            37,
            ("unexpected character", "'!'"),
        ),
        ("RETURN COUNT(*) PATTERN A | B WITHIN 1 s", 1, 27, ("unexpected character", "'|'")),
        (
            "RETURN COUNT(*) PATTERN A WHERE A.x = - 3 WITHIN 1 s",
            1,
            39,
            ("unexpected character", "'-'"),
        ),
        (
            "RETURN COUNT(*) PATTERN A WHERE A.x = 'abc WITHIN 1 s",
            1,
            39,
            ("unterminated string", "'abc"),
        ),
        ('RETURN COUNT(*) PATTERN A WHERE A.x = "abc\\"', 1, 39, ("unterminated string", "abc")),
        ("RETURN COUNT(*) PATTERN `A WITHIN 1 s", 1, 25, ("unterminated quoted name", "`A")),
        ("RETURN COUNT(*) PATTERN `` WITHIN 1 s", 1, 25, ("empty quoted name", "``")),
        ("RETURN COUNT(*) PATTERN Ä WITHIN 1 s", 1, 25, ("unexpected character", "'Ä'")),
    ],
)
def test_lexical_errors(text: str, line: int, column: int, contains: tuple[str, ...]) -> None:
    assert_error(text, query="q1", line=line, column=column, contains=contains)


def test_lexical_error_in_later_named_query() -> None:
    assert_error(
        "RETURN COUNT(*) PATTERN A WITHIN 1 s;\n"
        "name: RETURN COUNT(*)\n"
        "  PATTERN A WHERE A.x = 1 & A.y = 2 WITHIN 1 s",
        query="name",
        line=3,
        column=27,
        contains=("unexpected character", "'&'"),
    )


def test_lexical_error_at_start_is_in_first_query() -> None:
    assert_error(
        "# comment\nRETURN COUNT(*) PATTERN A WITHIN 1 s",
        query="q1",
        line=1,
        column=1,
        contains=("'#'",),
    )


def test_reserved_word_as_type_suggests_backticks() -> None:
    err = assert_error(
        "RETURN COUNT(*) PATTERN SEQ(A, Return) WITHIN 1 s",
        query="q1",
        line=1,
        column=32,
        contains=("event type", "'Return'", "`Return`"),
    )
    assert "keyword" in str(err)


def test_error_is_a_value_error_with_fields() -> None:
    err = error("RETURN COUNT(*) PATTERN A WITHIN 1 s SLIDE 2 s")
    assert isinstance(err, ValueError)
    assert err.query == "q1" and err.line == 1 and err.column == 44


def test_exponent_literals_in_filters_and_durations() -> None:
    q = one("RETURN COUNT(*) PATTERN A WHERE A.v < 1e308 WITHIN 1e3 s")
    assert q.filters == (Filter("A", "v", "<", 1e308),) and q.within_ms == 1_000_000


# --------------------------------------------------------------------------------------------------
# Conditions between adjacent events (NEXT)


def test_next_conditions_are_parsed_in_text_order_without_duplicates() -> None:
    q = one(
        "RETURN COUNT(*) PATTERN SEQ(A, B+) WHERE A.x < NEXT(B).y AND B.k = NEXT(B).k "
        "AND B.x > 0 WITHIN 1 h"
    )
    assert q.next_conditions == (
        NextCondition("A", "x", "<", "B", "y"),
        NextCondition("B", "k", "=", "B", "k"),
    )
    assert q.filters == (Filter("B", "x", ">", 0),)
    assert str(q.next_conditions[0]) == "A.x < NEXT(B).y"
    twice = one("RETURN COUNT(*) PATTERN S+ WHERE S.p < NEXT(S).p AND S.p < NEXT(S).p WITHIN 1 h")
    assert twice.next_conditions == (NextCondition("S", "p", "<", "S", "p"),)
    assert twice.next_of("S", "S") == twice.next_conditions


def test_next_of_puts_equalities_first() -> None:
    q = one("RETURN COUNT(*) PATTERN S+ WHERE S.p <= NEXT(S).p AND S.g = NEXT(S).g WITHIN 1 h")
    assert [c.op for c in q.next_of("S", "S")] == ["=", "<="]
    assert q.next_of("S", "T") == ()


@pytest.mark.parametrize(
    "text, column, contains",
    [
        (
            "RETURN COUNT(*) PATTERN SEQ(A, B) WHERE B.x < NEXT(A).x WITHIN 1 h",
            41,
            ("B.x < NEXT(A).x", "no event of type A comes right after one of type B"),
        ),
        (
            "RETURN COUNT(*) PATTERN SEQ(A, NOT N, B) WHERE N.x < NEXT(B).x WITHIN 1 h",
            48,
            ("uses event type 'N', which is only negated",),
        ),
        (
            "RETURN COUNT(*) PATTERN A+ WHERE A.x < NEXT(Z).x WITHIN 1 h",
            34,
            ("uses event type 'Z', which is not in the pattern",),
        ),
        (
            "RETURN COUNT(*) PATTERN S+ WHERE S.a < NEXT(S).a AND S.b != NEXT(S).b WITHIN 1 h",
            54,
            ("at most one condition with <, <=, >, >= or != per pair of types",),
        ),
        (
            "RETURN COUNT(*) PATTERN S+ WHERE S.a < NEXT S.a WITHIN 1 h",
            45,
            ("expected '('",),
        ),
    ],
)
def test_next_condition_errors(text: str, column: int, contains: tuple[str, ...]) -> None:
    assert_error(text, query="q1", line=1, column=column, contains=contains)


def test_next_condition_errors_quote_the_types() -> None:
    """The types of a NEXT condition's messages read as names (`a b`, not 'a a b event')."""
    message = str(
        error("RETURN COUNT(*) PATTERN SEQ(`a b`, B) WHERE B.x = NEXT(`a b`).x WITHIN 1 h")
    )
    assert "no event of type `a b` comes right after one of type B" in message
    message = str(
        error(
            "RETURN COUNT(*) PATTERN SEQ(`a b`, B) WHERE `a b`.x < NEXT(B).x "
            "AND `a b`.y > NEXT(B).y WITHIN 1 h"
        )
    )
    assert "both compare an event of type `a b` with the B event after it" in message


def test_next_is_reserved() -> None:
    assert "write `NEXT` to use it as a name" in str(
        error("RETURN COUNT(*) PATTERN NEXT WITHIN 1 h")
    )
    assert one("RETURN COUNT(*) PATTERN `NEXT`+ WITHIN 1 h").types == ("NEXT",)


def test_a_workload_hashes_as_its_queries_once_and_pickles_without_the_hash() -> None:
    """Plan caches look a workload up on every call, so its hash is kept; a pickled workload
    (Spark ships them) hashes again where it is loaded, where strings hash differently."""
    import pickle

    wl = parse_workload("a: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 9 s SLIDE 9 s")
    assert hash(wl) == hash(wl.queries)
    assert "_hash" in wl.__dict__
    back = pickle.loads(pickle.dumps(wl))
    assert back == wl and "_hash" not in back.__dict__
    assert hash(back) == hash(wl)


def test_a_pattern_nested_too_deeply_names_its_query():
    """Hundreds of nested SEQ( exhaust Python's recursion: a WorkloadError naming the query and
    where it starts (was a RecursionError)."""
    text = "ok: RETURN COUNT(*) PATTERN A WITHIN 1 s;\ndeep: RETURN COUNT(*) PATTERN "
    text += "SEQ(B, " * 400 + "A" + ")" * 400 + " WITHIN 1 s"
    with pytest.raises(WorkloadError, match="query deep, line 2, column 1: the query nests too"):
        parse_workload(text)


#: Names that need backticks (spaces, commas, brackets, a backtick, keywords) and names that do not.
NAMES = st.text(alphabet="ab ,`()+[]_1", min_size=1, max_size=5) | st.sampled_from(
    ["SEQ", "and", "Not", "x", "next"]
)


@settings(max_examples=150, deadline=None)
@given(types=st.lists(NAMES, min_size=4, max_size=4, unique=True), attr=NAMES, alias=NAMES)
def test_patterns_conditions_and_aggregates_read_back_as_they_are_shown(types, attr, alias):
    """What `explain` and messages show (str() of a pattern, filter, NEXT condition or
    aggregate) parses back to the same thing, whatever the names: it quotes where it must."""
    a, b, c, d = map(quoted, types)
    x = quoted(attr, attribute=True)
    q = one(
        f"RETURN COUNT(*) AS {quoted(alias)}, SUM({b}.{x}) PATTERN SEQ({a}, NOT {c}, ({b} OR {d})+)"
        f" WHERE {b}.{x} < 3 AND {a}.{x} = 'it''s' WITHIN 1 s"
    )
    again = one(
        f"RETURN {', '.join(f'{g} AS {quoted(g.name)}' for g in q.aggregates)} "
        f"PATTERN {q.pattern_text} WHERE {' AND '.join(map(str, q.filters))} WITHIN 1 s"
    )
    assert (again.pattern, again.filters, again.aggregates) == (q.pattern, q.filters, q.aggregates)
    q = one(f"RETURN COUNT(*) PATTERN SEQ({a}, {b}+) WHERE {a}.{x} < NEXT({b}).{x} WITHIN 1 s")
    again = one(f"RETURN COUNT(*) PATTERN SEQ({a}, {b}+) WHERE {q.next_conditions[0]} WITHIN 1 s")
    assert again.next_conditions == q.next_conditions


@pytest.mark.parametrize(
    ("name", "shown_as"),
    [("q1", "q1"), ("my q", "`my q`"), ("a`b", "`a``b`"), ("Return", "`Return`"), ("1a", "`1a`")],
)
def test_names_are_quoted_only_where_they_must_be(name: str, shown_as: str) -> None:
    assert quoted(name) == shown_as
    assert quoted("return", attribute=True) == "return"  # (after `TYPE.` any identifier is one)


def test_and_counts_show_their_query_quoted() -> None:
    assert quoted_list(["my q[left]", "b[both]", "c d"]) == "`my q`[left], b[both], `c d`"


def test_a_query_named_as_a_count_of_an_and_query() -> None:
    """An AND query `a` runs as counts named a[left], a[right] and a[both]; a query of that name
    would take one's place and change `a`'s result."""
    assert_error(
        "a: RETURN COUNT(*) PATTERN SEQ(A, B) AND SEQ(C, D) WITHIN 1 min;\n"
        "`a[both]`: RETURN COUNT(*) PATTERN SEQ(A, C+) WITHIN 1 min",
        query="a[both]",
        line=2,
        column=1,
        contains=("'a[both]' is the name of a count that the AND query 'a' runs as",),
    )
    assert len(parse_workload("`a[left]`: RETURN COUNT(*) PATTERN A WITHIN 1 s")) == 1


def test_messages_quote_the_query_name_as_the_language_does():
    """'query my q, line 1, ...' read as a query 'my' and more; a name such as
    `q, line 1, column 1` made the message's place ambiguous."""
    err = error("`my q`: RETURN COUNT(*) PATTERN SEQ(A, B WITHIN 1 s")
    assert err.query == "my q"
    assert str(err).startswith("query `my q`, line 1, column 42: expected")
    err = error("`q, line 1, column 1`: RETURN COUNT(*) PATTERN SEQ(A, B WITHIN 1 s")
    assert str(err).startswith("query `q, line 1, column 1`, line 1, column 57:")


try:
    from strategies import workload_cases
except ImportError:  # pragma: no cover
    from tests.strategies import workload_cases


@settings(max_examples=200, deadline=None)
@given(case=workload_cases(general=True) | workload_cases(adjacent=True), names=NAMES)
def test_every_parsed_workload_reads_back_from_its_text(case, names):
    """`query_text` is what the parser reads back as the very query (every pattern, filter,
    NEXT condition, [equivalence], GROUPBY and window the generators make, and names that need
    quoting): a Workload object passes `checked`, which the APIs apply to every one given."""
    text, _ = case
    wl = parse_workload(text)
    renamed = Workload(tuple(replace(q, name=f"{names}{i}") for i, q in enumerate(wl)))
    for w in (wl, renamed):
        assert checked(w) is w
        assert parse_workload(";".join(map(query_text, w))).queries == w.queries


def test_a_workload_built_by_hand_gets_the_parsers_checks():
    """Workload, Query and Aggregate are public; a Workload of them ran unchecked: MEDIAN was
    added as a SUM, WITHIN 0 divided by zero, COUNT(Z) of a type not in the pattern raised
    KeyError, SLIDE > WITHIN ran, two queries of one name gave one table."""
    count = Aggregate("COUNT", None, None, "count")

    def wl(**changes) -> Workload:
        fields = dict(name="q", pattern=(PatternElement("A"), PatternElement("B", True)),
                      aggregates=(count,), within_ms=10 * S, slide_ms=10 * S)  # fmt: skip
        return Workload((Query(**{**fields, **changes}),))

    for bad, said in [
        (wl(within_ms=0, slide_ms=0), "WITHIN must be a positive duration"),
        (wl(aggregates=(Aggregate("MEDIAN", "A", "x", "m"),)), "unknown aggregate function"),
        (wl(slide_ms=20 * S), "SLIDE 20 s is longer than WITHIN 10 s"),
        (Workload(wl().queries * 2), "duplicate query name 'q'"),
        (wl(aggregates=(Aggregate("COUNT", "Z", None, "c"),)), "'Z', which is not in the pattern"),
        (wl(group_items=("g",)), "GROUPBY"),
        (wl(equivalence=("k", "k")), "equivalence is not what its text reads as"),
        # (a float equal to the int read back; a list, which no Workload can be hashed with:
        # both raised bare TypeErrors later, a helper's review)
        (wl(within_ms=10.0 * S, slide_ms=10.0 * S), "within_ms, slide_ms is not what its text"),
        (wl(aggregates=[count]), "aggregates is a list, which the language cannot have built"),
    ]:
        with pytest.raises(WorkloadError, match=said) as info:
            checked(bad)
        assert info.value.query == "q"
    assert checked(wl()) == parse_workload("q: RETURN COUNT(*) PATTERN SEQ(A, B+) WITHIN 10 s")
    with pytest.raises(TypeError, match="a Workload holds Query objects, not dict"):
        checked(Workload(({"name": "q"},)))  # type: ignore[arg-type]


def test_numbers_past_any_column_are_read_in_no_time():
    """1e999997 s, a SLIDE of 10^5000 s and 1e-999999999 s raised decimal.Overflow or
    ValueError (no query, no line), or took seconds; 29 significant digits were rounded to 28
    (0.99999999999999999999999999999 s read as 1000 ms)."""
    for window, said in [
        ("WITHIN 1e999997 s", "WITHIN 1e999997 s is longer than any time column holds"),
        ("WITHIN 1 s SLIDE 1e5000 s", "SLIDE 1e5000 s is longer than any time column holds"),
        ("WITHIN 1e-999999999 s", "not a whole number of milliseconds"),
        ("WITHIN 0.99999999999999999999999999999 s", "not a whole number of milliseconds"),
        ("WITHIN 1.0000000000000000000000000001 s", "not a whole number of milliseconds"),
    ]:
        e = error(f"RETURN COUNT(*) PATTERN A {window}")
        assert said in str(e) and (e.query, e.line) == ("q1", 1), str(e)
    assert one("RETURN COUNT(*) PATTERN A WITHIN 10000000000000000000000000001 ms").within_ms == (
        10**28 + 1
    )


def test_lexical_faults_name_the_query_they_are_in():
    """A fault right after ';' was blamed on the query before; spaces the language does not
    have (no-break space, vertical tab, line separator) were read as spaces, and line
    numbers after a line separator were off."""
    e = error("first: RETURN COUNT(*) PATTERN A WITHIN 1 s;\n@second: RETURN COUNT(*) PATTERN A")
    assert (e.query, e.line, e.column) == ("q2", 2, 1)
    for space in ("\u00a0", "\x0b", "\u2028", "\u3000"):
        e = error(f"RETURN COUNT(*){space}PATTERN A WITHIN 1 s")
        assert (e.line, e.column) == (1, 16) and "a space other than space, tab or newline" in str(
            e
        )
    assert one("RETURN COUNT(*)\r\n\tPATTERN A WITHIN 1 s").within_ms == S
