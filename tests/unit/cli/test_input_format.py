"""`produce --format` templates: records read back exactly as a template would have written them."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barnabas.cli.errors import CliError
from barnabas.cli.input_format import ParsedRecord, parse_template, read_records


def records_of(template: str, data: bytes) -> list[ParsedRecord]:
    return list(read_records(io.BytesIO(data), parse_template(template)))


# Keys and values that never contain the template's delimiters (" " and "\n"), as any user's would not.
fields = st.binary(max_size=30).filter(lambda b: b" " not in b and b"\n" not in b)


@given(st.lists(st.tuples(fields, fields), max_size=20), st.booleans())
def test_keys_and_values_come_back_exactly(pairs: list[tuple[bytes, bytes]], final_newline: bool) -> None:
    text = b"\n".join(key + b" " + value for key, value in pairs) + (b"\n" if final_newline and pairs else b"")
    parsed = records_of("%k %v\\n", text)
    assert [(r.key, r.value) for r in parsed] == pairs


def test_partition_headers_and_literals_around_them() -> None:
    (first, second) = records_of("<%p> %h | %v;", b"<2> a=1,b= | one;<0>  | two;")
    assert (first.partition, first.headers, first.value, first.key) == (2, [("a", b"1"), ("b", b"")], b"one", None)
    assert (second.partition, second.headers, second.value) == (0, [], b"two")


def test_a_template_without_a_final_delimiter_reads_the_rest_as_the_value() -> None:
    (record,) = records_of("%k:%v", b"key:value\nwith lines\n")
    assert (record.key, record.value) == (b"key", b"value\nwith lines\n")


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("%k", "no %v"),
        ("%k%v", "need text between them"),
        ("%v %v", "appears twice"),
        ("%x %v", "unknown token %x"),
    ],
)
def test_bad_templates_are_one_clear_error(template: str, message: str) -> None:
    with pytest.raises(CliError, match=message):
        parse_template(template)


@pytest.mark.parametrize(
    ("template", "data", "message"),
    [
        ("%k %v\\n", b"no-space\n", "record 1 ends before its %k"),
        ("%k %v\\n", b"a b\nno-space\n", "record 2 ends before its %k"),
        ("%p %h %v\\n", b"x 0 v\n", "record 1 has partition 'x', not a number"),
        ("%p %h %v\\n", b"-1 0 v\n", "negative partition"),
        ("%p %h %v\\n", b"1 novalue v\n", "header 'novalue', not KEY=VALUE"),
        ("[%v]\\n", b"[a]\nb]\n", "record 2 does not continue with '\\[' as expected"),
    ],
)
def test_input_that_does_not_follow_the_template_names_the_record(template: str, data: bytes, message: str) -> None:
    with pytest.raises(CliError, match=message):
        records_of(template, data)
