"""§8.7 redaction (every example row, step-1 literals) and §9.2 URL userinfo masking."""

from __future__ import annotations

import pytest

from fetcher.crypto import REDACTED, Redactor, redact, redact_url

# (input, expected): the §8.7 example table, verbatim.
EXAMPLES = [
    (
        'connection to server at "10.1.2.3", port 5432 failed: Connection refused',
        "connection to server at [redacted], port 5432 failed: Connection refused",
    ),
    (
        "db.example.com:27017: [Errno -2] Name or service not known",
        "[redacted]: [Errno -2] Name or service not known",
    ),
    ("mongodb://app:s3cr3t@db:27017/x timed out", "[redacted] timed out"),
    (
        "dial tcp 10.0.0.5:5432: connect: connection refused",
        "dial tcp [redacted] connect: connection refused",
    ),
    (
        "server selection error, Addr: db-1:27017, timeout",
        "server selection error, Addr: [redacted] timeout",
    ),
    ("no route to fe80::1%eth0", "no route to [redacted]"),
    (
        'FATAL: password authentication failed for user "reader"',
        'FATAL: password authentication failed for user "reader"',
    ),
    (
        'could not translate host name "db.example.com" to address: Name or service not known',
        "could not translate host name [redacted] to address: Name or service not known",
    ),
    (
        "Access denied for user 'reader'@'10.0.0.9' (using password: YES)",
        "Access denied for user 'reader'@'[redacted]' (using password: YES)",
    ),
    (
        "Can't connect to MySQL server on 'db.example.com' ([Errno 111] Connection refused)",
        "Can't connect to MySQL server on [redacted] ([Errno 111] Connection refused)",
    ),
    (
        'DPY-6005: cannot connect to database. Connection failed with "[Errno 111] Connection '
        'refused"',
        'DPY-6005: cannot connect to database. Connection failed with "[Errno 111] Connection '
        'refused"',
    ),
    (
        "DPY-6000: cannot connect to database. Listener refused connection at host "
        "db.example.com port 1521",
        "DPY-6000: cannot connect to database. Listener refused connection at host [redacted] "
        "port 1521",
    ),
    (
        "[Errno 111] Connect call failed ('10.0.0.5', 5432)",
        "[Errno 111] Connect call failed ([redacted])",
    ),
    ("server closed the connection unexpectedly", "server closed the connection unexpectedly"),
    ("invalid dsn: password=hunter22 host=x", "invalid dsn: password=[redacted] host=x"),
]

# Every address that appears in the examples, for the "whether or not step 1 knows" clause.
EXAMPLE_HOSTS = ["10.1.2.3", "db.example.com", "db-1", "fe80::1", "10.0.0.5", "10.0.0.9"]


@pytest.mark.parametrize(("text", "expected"), EXAMPLES)
def test_contract_examples(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(("text", "expected"), EXAMPLES)
def test_contract_examples_with_known_hosts(text: str, expected: str) -> None:
    assert Redactor(secrets=["s3cr3t", "hunter22"], hosts=EXAMPLE_HOSTS).redact(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # step 2: any scheme
        ("failed postgres://u:p@h:5432/db?sslmode=x", "failed [redacted]"),
        ("see amqp://guest:guest@rabbit/ now", "see [redacted] now"),
        # step 3: userinfo without a scheme
        ("reader:pw@db.internal/x refused", "[redacted]/x refused"),
        # step 4: password key/value, quoted and unquoted; YES/NO survive
        ("PWD='a b' ok", "PWD=[redacted] ok"),
        ('passwd : "x y"; next', "passwd=[redacted]; next"),
        ("password: NO", "password: NO"),
        ("password=NOPE", "password=[redacted]"),
        # step 5
        ("Addr:db:1", "Addr: [redacted]"),
        # step 6: operand rule (digit, inner . or :, quoted, bracketed)
        ("could not connect to server", "could not connect to server"),
        ("lookup db.internal: no such host", "lookup [redacted] no such host"),
        ("connecting to [::1]:5432 failed", "connecting to [redacted] failed"),
        ("host localhost is down", "host localhost is down"),
        ("host node7 is down", "host [redacted] is down"),
        # step 7
        ("peer [2001:db8::1]:5432 reset", "peer [redacted] reset"),
        # step 8
        ("from 192.168.0.1 and 10.0.0.1:99", "from [redacted] and [redacted]"),
        # step 9
        ("redis-1:6379 closed", "[redacted] closed"),
        ("at 12:30 done", "at 12:30 done"),
        # step 10
        ("failed ( 'db' , 5432 )", "failed ([redacted])"),
        # step 11: bare IPv6 with wrappers
        ("addr (2001:db8::2), gone", "addr ([redacted]), gone"),
        ("addr 2001:db8::7%eth1 gone", "addr [redacted] gone"),
        # step 8 runs before step 11, as the table orders them
        ("addr ::ffff:1.2.3.4 gone", "addr ::ffff:[redacted] gone"),
        ("Foo::Bar is not an address", "Foo::Bar is not an address"),
        # ordinary text survives
        ("", ""),
        ('relation "users" does not exist', 'relation "users" does not exist'),
    ],
)
def test_steps(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_step1_literal_secrets() -> None:
    redactor = Redactor(secrets=["Tr1cky pass", "abc"])
    assert redactor.redact("auth failed for Tr1cky pass!") == "auth failed for [redacted]!"
    # Literal match is case-sensitive for secrets.
    assert redactor.redact("tr1cky pass") == "tr1cky pass"
    # Values shorter than 4 characters are skipped.
    assert redactor.redact("abc") == "abc"


def test_step1_longest_first() -> None:
    redactor = Redactor(secrets=["pass", "password123"])
    assert redactor.redact("x password123 y pass") == "x [redacted] y [redacted]"
    assert "123" not in redactor.redact("token password123")


def test_step1_overlapping_values_leave_no_fragment() -> None:
    redactor = Redactor(secrets=["abcdef", "defghi"])
    assert redactor.redact("xabcdefghiy") == "x[redacted]y"


def test_step1_hosts_case_insensitive_with_port() -> None:
    redactor = Redactor(hosts=["Warehouse", "172.16.9.9"])
    assert redactor.redact("cannot reach WAREHOUSE:5432 now") == "cannot reach [redacted] now"
    assert redactor.redact("warehouse refused") == "[redacted] refused"
    assert redactor.redact("172.16.9.9:1433 timeout") == "[redacted] timeout"
    # A following colon without digits is not part of the address.
    assert redactor.redact("warehouse: refused") == "[redacted]: refused"


def test_step1_regex_metacharacters_are_literal() -> None:
    redactor = Redactor(secrets=["a.b*c(d)"])
    assert redactor.redact("x a.b*c(d) y") == "x [redacted] y"
    assert redactor.redact("x aXbbbcd y") == "x aXbbbcd y"


def test_step1_ipv6_host() -> None:
    redactor = Redactor(hosts=["fd00::17", "fe80::2%eth0"])
    assert redactor.redact("timeout fd00::17 after 10s") == "timeout [redacted] after 10s"
    assert redactor.redact("timeout FD00::17%eth0:5432 x") == "timeout [redacted] x"
    assert redactor.redact("via fe80::2%eth0:1 x") == "via [redacted] x"


def test_with_values_extends_and_keeps_original() -> None:
    base = Redactor(secrets=["first-secret"])
    extended = base.with_values(secrets=["second-secret"], hosts=["internal-db"])
    text = "first-secret second-secret internal-db"
    assert extended.redact(text) == "[redacted] [redacted] [redacted]"
    assert base.redact(text) == "[redacted] second-secret internal-db"
    assert extended(text) == extended.redact(text)


def test_repr_hides_values() -> None:
    shown = repr(Redactor(secrets=["topsecret-value"], hosts=["hidden-host"]))
    assert "topsecret" not in shown
    assert "hidden-host" not in shown


def test_empty_values_are_ignored() -> None:
    assert Redactor(secrets=["", "  "], hosts=[""]).redact("a  b") == "a  b"


def test_redacted_constant() -> None:
    assert REDACTED == "[redacted]"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgres://user:pw@db:5432/app", "postgres://[redacted]@db:5432/app"),
        ("amqp://guest:guest@rabbit:5672/%2f", "amqp://[redacted]@rabbit:5672/%2f"),
        (
            "postgresql://u:p%40ss@h/db?sslmode=require",
            "postgresql://[redacted]@h/db?sslmode=require",
        ),
        ("postgres://u:p@ss@h/db", "postgres://[redacted]@h/db"),
        ("postgres://u:pa/ss@h/db", "postgres://[redacted]@h/db"),
        ("https://example.com/a@b", "https://example.com/a@b"),
        ("http://host:8080/path", "http://host:8080/path"),
        ("s3.amazonaws.com", "s3.amazonaws.com"),
        ("user:pw@host", "[redacted]@host"),
        ("", ""),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected
