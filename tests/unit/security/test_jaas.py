"""sasl.jaas.config parsed as Kafka parses it: the cases of Kafka's JaasContextTest, valid and invalid."""

from __future__ import annotations

import pytest

from barnabas.config import ConfigError
from barnabas.security.jaas import ControlFlag, LoginModule, parse_jaas_config


def one(text: str) -> LoginModule:
    (module,) = parse_jaas_config(text)
    return module


def test_no_options() -> None:  # testConfigNoOptions
    assert one("test.testConfigNoOptions required;") == LoginModule("test.testConfigNoOptions", ControlFlag.REQUIRED)


@pytest.mark.parametrize("flag", ["required", "requisite", "sufficient", "optional", "REQUIRED", "Optional"])
def test_every_control_flag_in_any_case(flag: str) -> None:  # testControlFlag
    module = one(f"test.testControlFlag {flag} propName=propValue;")
    assert module.flag is ControlFlag(flag.lower())
    assert module.options == {"propName": "propValue"}


def test_multiple_options() -> None:  # testMultipleOptions
    options = " ".join(f"propName{i}=propValue{i}" for i in range(10))
    module = one(f"test.testMultipleOptions sufficient {options};")
    assert module.options == {f"propName{i}": f"propValue{i}" for i in range(10)}


def test_quoted_option_values_and_names() -> None:  # testQuotedOptionValue, testQuotedOptionName
    module = one('test.testQuotedOptionValue required propName="prop value" propName2="value1 = 1, value2 = 2";')
    assert module.options == {"propName": "prop value", "propName2": "value1 = 1, value2 = 2"}
    assert one('test.testQuotedOptionName required "prop name"=propValue;').options == {"prop name": "propValue"}


def test_numeric_option_with_quotes() -> None:  # testNumericOptionWithQuotes
    assert one('test.testNumericOptionWithQuotes required option1="3";').options == {"option1": "3"}


def test_multiple_login_modules() -> None:  # testMultipleLoginModules
    text = " ".join(f"test.Module{i} required index=Index{i} module=Module{i};" for i in range(3))
    modules = parse_jaas_config(text)
    assert [(m.name, m.options) for m in modules] == [
        (f"test.Module{i}", {"index": f"Index{i}", "module": f"Module{i}"}) for i in range(3)
    ]


def test_kafkas_plain_and_scram_examples() -> None:
    plain = one(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
    )
    assert plain.options == {
        "username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"
    }  # fmt: skip
    scram = one("org.apache.kafka.common.security.scram.ScramLoginModule required;")
    assert scram.name == "org.apache.kafka.common.security.scram.ScramLoginModule" and scram.options == {}


def test_words_take_dashes_dollars_and_underscores_and_comments_are_skipped() -> None:
    module = one("// a comment\n x.Y required /* another */ user_bob=bob-secret$1 'single quoted'='a\\tb\\\"c\\101';")
    assert module.options == {"user_bob": "bob-secret$1", "single quoted": 'a\tb"cA'}


def test_a_later_option_replaces_an_earlier_one() -> None:
    assert one("m required a=x a=y;").options == {"a": "y"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("  required option1=value1;", "is not a control flag", id="testMissingLoginModule"),
        pytest.param("test.loginModule option1=value1;", "'option1' is not a control flag",
                     id="testMissingControlFlag"),
        pytest.param("loginModule required option1;", "value not specified for key 'option1'",
                     id="testMissingOptionValue"),
        pytest.param("test.testMissingSemicolon required option1=value1", "does not end with ';'",
                     id="testMissingSemicolon"),
        pytest.param("test.testNumericOptionWithoutQuotes required option1=3;", "value not specified for key 'option1'",
                     id="testNumericOptionWithoutQuotes"),
        pytest.param("test.testInvalidControlFlag { option1=3;", "has no control flag", id="testInvalidControlFlag"),
        pytest.param("", "no login module", id="empty"),
        pytest.param("3module required;", "must start with a login module class name", id="numeric module"),
        pytest.param('m required a="unterminated;', "quoted string is not closed", id="unterminated quote"),
        pytest.param("m required a=b /* open", "comment is not closed", id="unterminated comment"),
        pytest.param('m required a "=" b;', "value not specified for key 'a'", id="quoted equals"),
    ],
)  # fmt: skip
def test_invalid_configs_are_one_line_errors_that_never_repeat_a_value(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_jaas_config(text)
    assert message in str(caught.value)
    assert "value1" not in str(caught.value) and "\n" not in str(caught.value)
