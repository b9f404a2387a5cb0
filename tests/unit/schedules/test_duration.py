"""Go-style durations (daemon/schedules/duration.py): what parses, to the exact decimal value
rounded once, what is refused and named, and the text a duration is written back as."""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from daemon.schedules.duration import MAX_DURATION_S, DurationError, format_duration, parse_duration
from tests.unit.schedules.lookalikes import (
    ARABIC_INDIC_FIVE,
    DEVANAGARI_ONE,
    FULLWIDTH_ONE,
    FULLWIDTH_S,
    FULLWIDTH_ZERO,
    GREEK_MU,
    MICRO,
)

MAX_NS = 2**63 - 1


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("1.5h", 5400.0),
        ("2h45m30.5s", 9930.5),
        ("0", 0.0),
        ("-0", 0.0),
        ("+0", 0.0),
        ("0s", 0.0),
        ("0h0m0.000s", 0.0),
        ("+5s", 5.0),
        ("-1h30m", -5400.0),
        (".5s", 0.5),
        ("5.s", 5.0),
        ("0.1s", 0.1),
        ("1ns", 1e-9),
        ("1us", 1e-6),
        (f"1{MICRO}s", 1e-6),
        (f"1{GREEK_MU}s", 1e-6),
        ("1.5ms", 0.0015),
        ("1h0m0s", 3600.0),
        ("1m1m", 120.0),
        ("100000h", 3.6e8),
        ("  90s\n", 90.0),
        ("2562047h47m16.854775807s", MAX_DURATION_S),
    ],
)
def test_parse_duration_accepts_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        ".",
        "1",
        "s",
        "-",
        "+",
        "--1s",
        "+-1s",
        "1x",
        "1hm",
        "1 h",
        "1h 30m",
        "1h-30m",
        "1.2.3s",
        ".s",
        "1e5s",
        "1S",
        "1H",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "infinity",
        "0x10s",
        "1_000s",
        "2562048h",
        "2562047h47m16.854775808s",
        "99999999999999999999999999h",
        "9" * 5000 + "s",
        f"{FULLWIDTH_ONE}s",
        f"1{FULLWIDTH_S}",
        f"{ARABIC_INDIC_FIVE}s",
        f"{DEVANAGARI_ONE}m",
        f"{FULLWIDTH_ZERO}",
        "1h\N{NO-BREAK SPACE}",
        "\N{NO-BREAK SPACE}1h",
        "1\N{MICRO SIGN}",
    ],
)
def test_parse_duration_rejects_bad_text_and_names_it(text: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration(text)
    assert isinstance(caught.value, ValueError)
    assert repr(text) in str(caught.value)
    assert caught.value.text == text


def test_duration_error_reason_never_contains_the_text() -> None:
    secret = "pw" + secrets.token_hex(8)
    for text in (secret, f"1{secret}", f"5m{secret}", f"-{secret}", f"9{secret}9s"):
        with pytest.raises(DurationError) as caught:
            parse_duration(text)
        assert secret not in caught.value.reason
        assert caught.value.reason


@given(st.characters(categories=["Nd"]).filter(lambda char: not char.isascii()))
def test_parse_duration_rejects_every_non_ascii_digit(digit: str) -> None:
    assert digit.isdigit()  # what str.isdigit() would have let through
    for text in (f"{digit}s", f"1{digit}s", f"{digit}", f"1.{digit}s"):
        with pytest.raises(DurationError):
            parse_duration(text)


@given(st.text())
def test_parse_duration_fuzz_only_raises_value_error(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except ValueError:
        return
    assert math.isfinite(seconds)
    assert abs(seconds) <= MAX_DURATION_S


@given(
    st.integers(0, 2_562_047),
    st.integers(0, 10_000),
    st.integers(0, 10_000),
    st.integers(0, 999),
)
def test_parse_duration_sums_components(
    hours: int, minutes: int, seconds: int, millis: int
) -> None:
    assume(hours * 3600 + minutes * 60 + seconds < 9_223_372_036)
    text = f"{hours}h{minutes}m{seconds}s{millis}ms"
    expected = Fraction(hours * 3600 + minutes * 60 + seconds) + Fraction(millis, 1000)
    assert parse_duration(text) == float(expected)
    assert parse_duration("-" + text) == -parse_duration(text)


_UNIT_NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def _exact_ns(whole: str, fraction: str, unit: str) -> Fraction:
    kept = fraction[:30]
    value = Fraction(int(whole or "0")) + Fraction(int(kept or "0"), 10 ** len(kept))
    return value * _UNIT_NS[unit]


@given(
    st.lists(
        st.tuples(
            st.text("0123456789", max_size=12),
            st.none() | st.text("0123456789", max_size=40),
            st.sampled_from(sorted(_UNIT_NS)),
        ).filter(lambda part: bool(part[0] or part[1])),
        min_size=1,
        max_size=4,
    )
)
def test_parse_duration_is_the_exact_decimal_value_rounded_once(
    parts: list[tuple[str, str | None, str]],
) -> None:
    """Any decimal components (more than 30 fraction digits are cut, as they cannot change a
    nanosecond) give the float nearest their exact sum, or out of range past Go's int64."""
    text = "".join(w + ("" if f is None else "." + f) + unit for w, f, unit in parts)
    exact_ns = sum(_exact_ns(whole, fraction or "", unit) for whole, fraction, unit in parts)
    if exact_ns > MAX_NS:
        with pytest.raises(ValueError, match="out of range"):
            parse_duration(text)
    else:
        assert parse_duration(text) == float(exact_ns / 10**9)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (-0.0, "0s"),
        (1e-9, "1ns"),
        (1e-6, f"1{MICRO}s"),
        (1.5e-6, f"1.5{MICRO}s"),
        (0.25, "250ms"),
        (0.0015, "1.5ms"),
        (1.0, "1s"),
        (90.0, "1m30s"),
        (3600.0, "1h"),
        (3601.0, "1h1s"),
        (5400.0, "1h30m"),
        (3600.5, "1h0.5s"),
        (9930.5, "2h45m30.5s"),
        (-5400.0, "-1h30m"),
        (86400.0, "24h"),
        (MAX_DURATION_S, "2562047h47m16.854775807s"),
        (1 / 1024, f"976.562{MICRO}s"),  # 976562.5 ns exactly: the tie goes to even
        (3 / 1024, "2.929688ms"),  # 2929687.5 ns
        (-1 / 1024, f"-976.562{MICRO}s"),
    ],
)
def test_format_duration_is_go_like(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seconds", [math.nan, math.inf, -math.inf, 1e10, -1e10, 1e300])
def test_format_duration_rejects_non_finite_and_out_of_range(seconds: float) -> None:
    with pytest.raises(ValueError, match="duration"):
        format_duration(seconds)


@given(st.integers(-MAX_NS, MAX_NS))
def test_duration_round_trip_for_whole_nanoseconds(total_ns: int) -> None:
    seconds = total_ns / 10**9
    assert parse_duration(format_duration(seconds)) == seconds


@given(st.floats(-MAX_DURATION_S, MAX_DURATION_S, allow_nan=False, allow_infinity=False))
def test_duration_round_trip_for_any_float_is_within_half_a_nanosecond(seconds: float) -> None:
    text = format_duration(seconds)
    back = parse_duration(text)
    assert abs(back - seconds) <= 0.5e-9 + math.ulp(seconds)
    assert format_duration(back) == text  # the text form is canonical


@given(st.floats(-MAX_DURATION_S, MAX_DURATION_S, allow_nan=False, allow_infinity=False))
def test_format_duration_rounds_the_exact_value_half_to_even(seconds: float) -> None:
    nanoseconds = max(-MAX_NS, min(MAX_NS, round(Fraction(seconds) * 10**9)))
    assert parse_duration(format_duration(seconds)) == nanoseconds / 10**9
