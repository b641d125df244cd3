"""ssl.principal.mapping.rules against Kafka's own examples (SslPrincipalMapperTest), and RFC 2253 subjects."""

from __future__ import annotations

import pytest

from barnabas.config import ConfigError
from barnabas.security import NoMatchingRuleError, SslPrincipalMapper, distinguished_name

# Kafka's testValidRules.
VALID = [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
]

# Kafka's testInvalidRules.
INVALID = [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
]

# Kafka's testRulesSplitting: (how the parsed rules print, the rules as written).
SPLITTING = [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    # empty rules are ignored
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    # escape sequences
    (r"[RULE:\/\\\(\)\n\t/\/\/]", r"RULE:\/\\\(\)\n\t/\/\//"),
    (r"[RULE:\**\/+/*/L, RULE:\/*\**/**]", r"RULE:\**\/+/*/L,RULE:\/*\**/**/"),
    # rules rule
    (
        r"[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
        r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
    ),
]


@pytest.mark.parametrize("rules", VALID)
def test_kafkas_valid_rules_parse(rules: str) -> None:
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", INVALID)
def test_kafkas_invalid_rules_are_one_line_config_errors(rules: str) -> None:
    with pytest.raises(ConfigError, match=r"^ssl\.principal\.mapping\.rules: invalid rule") as caught:
        SslPrincipalMapper(rules)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("expected", "rules"), SPLITTING)
def test_rules_split_as_kafka_splits_them(expected: str, rules: str) -> None:
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_kafkas_mapping_examples() -> None:
    mapper = SslPrincipalMapper(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_kafkas_comma_with_whitespace_example() -> None:
    mapper = SslPrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_default_rules_keep_the_name_and_no_rule_is_an_error() -> None:
    assert SslPrincipalMapper(None).name("CN=a,O=b") == "CN=a,O=b"
    with pytest.raises(NoMatchingRuleError, match="no rule applies to 'O=b'"):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=b")


@pytest.mark.parametrize(
    ("replacement", "expected"),
    [
        ("$1", "a"),
        ("$2-$1", "b-a"),
        ("$12", "a2"),  # two groups: $12 is group 1, then "2" (Java's Matcher takes digits while a group exists)
        ("$3x", "$3x"),  # past the groups: literal (Kafka's escapeLiteralBackReferences)
        (r"\$1", "$1"),
        (r"a\\b", r"a\b"),
        ("$0!", "a,b!"),
    ],
)
def test_replacements_follow_javas_syntax(replacement: str, expected: str) -> None:
    assert SslPrincipalMapper(f"RULE:^(.*),(.*)$/{replacement}/").name("a,b") == expected


def test_an_optional_group_that_did_not_match_is_empty() -> None:
    assert SslPrincipalMapper("RULE:^CN=(\\w+)(,OU=(\\w+))?$/$1:$3/").name("CN=duke") == "duke:"


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ("RULE:^CN=(.*$/$1/", "pattern does not compile"),
        ("RULE:^CN=.*$/$1/", "refers to group 1, the pattern has none"),
        ("RULE:^CN=(.*)$/${name}/", "named group references are not supported"),
        ("RULE:^CN=(.*)$/$x/", "a '[$]' not followed by a group number"),
    ],
)
def test_rules_that_cannot_apply_are_refused_at_start(rules: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SslPrincipalMapper(rules)


def test_a_subject_reads_as_java_writes_it_rfc_2253() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Sun, Inc."),),
        (("organizationalUnitName", "Java"), ("userId", "42")),
        (("commonName", " Duke+Co "),),
    )
    assert distinguished_name(subject) == r"CN=\ Duke\+Co\ ,OU=Java+UID=42,O=Sun\, Inc.,C=US"
