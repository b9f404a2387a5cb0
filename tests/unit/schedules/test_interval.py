"""The interval rules (daemon/schedules/interval.py): empty is the built-in default, ASCII
sentinels and zero are external, look-alikes never count, bounds clamp with a warning, and the
raw value stays out of every warning."""

from __future__ import annotations

import dataclasses
import math
import secrets

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.schedules.duration import format_duration, parse_duration
from daemon.schedules.interval import IntervalDecision, parse_interval
from tests.unit.schedules.lookalikes import (
    ARABIC_INDIC_FIVE,
    CYRILLIC_O,
    DOTTED_I,
    FF_LIGATURE,
    FULLWIDTH_OFF,
    FULLWIDTH_ONE,
    FULLWIDTH_ZERO,
    LONG_S,
)


@pytest.mark.parametrize("raw", [None, "", " ", "\t\n", "  \r\n "])
def test_empty_means_builtin_default(raw: str | None) -> None:
    assert parse_interval(raw) == IntervalDecision("builtin", 3600.0, ())
    assert parse_interval(raw, default_s=90.0) == IntervalDecision("builtin", 90.0, ())


@pytest.mark.parametrize(
    "raw", ["off", "OFF", "Off", "oFf", " off ", "disabled", "DISABLED", "DiSaBlEd", "\tdisabled\n"]
)
def test_ascii_sentinels_mean_external(raw: str) -> None:
    assert parse_interval(raw) == IntervalDecision("external", None, ())
    assert parse_interval(raw, zero_as_once=True).mode == "external"


LOOK_ALIKES = [
    f"o{FF_LIGATURE}",
    f"O{FF_LIGATURE}",
    f"d{DOTTED_I}sabled",
    f"di{LONG_S}abled",
    f"DI{LONG_S}ABLED",
    FULLWIDTH_OFF,
    "\N{FULLWIDTH LATIN SMALL LETTER O}\N{FULLWIDTH LATIN SMALL LETTER F}"
    "\N{FULLWIDTH LATIN SMALL LETTER F}",
    f"{CYRILLIC_O}ff",
    "disab\N{LATIN SMALL LETTER DOTLESS I}ed",
    "of\N{ZERO WIDTH SPACE}f",
    "off\N{NO-BREAK SPACE}",
]


def _fell_back(decision: IntervalDecision, default_s: float) -> str:
    """The one warning of ``decision``, which fell back to the built-in default."""
    assert (decision.mode, decision.interval_s) == ("builtin", default_s)
    (warning,) = decision.warnings
    return warning


@pytest.mark.parametrize("raw", LOOK_ALIKES)
def test_unicode_look_alikes_are_not_sentinels(raw: str) -> None:
    warning = _fell_back(parse_interval(raw), 3600.0)
    assert repr(raw) in warning
    assert "not a valid duration" in warning


def test_casefold_would_have_matched_the_look_alikes() -> None:
    # Why the rule says "ASCII lower-case only": casefold() maps these to sentinels.
    assert f"o{FF_LIGATURE}".casefold() == "off"
    assert f"di{LONG_S}abled".casefold() == "disabled"
    assert FULLWIDTH_OFF.lower() != "off"  # and lower() leaves fullwidth letters alone


@pytest.mark.parametrize("raw", ["0", "0s", "-0", "+0", "0ms", "0h0m", "0.000s", " 0 "])
def test_zero_means_external_or_once(raw: str) -> None:
    assert parse_interval(raw) == IntervalDecision("external", None, ())
    assert parse_interval(raw, zero_as_once=True) == IntervalDecision("once", None, ())


@pytest.mark.parametrize(
    "raw", [FULLWIDTH_ZERO, f"{FULLWIDTH_ZERO}s", f"{ARABIC_INDIC_FIVE}s", f"{FULLWIDTH_ONE}h"]
)
def test_unicode_digits_are_unparseable_not_zero_or_positive(raw: str) -> None:
    _fell_back(parse_interval(raw, default_s=120.0, zero_as_once=True), 120.0)


@pytest.mark.parametrize("raw", ["-5m", "-1ns", "-1h30m", " -2s "])
def test_negative_means_default_with_a_warning(raw: str) -> None:
    warning = _fell_back(parse_interval(raw, default_s=600.0), 600.0)
    assert "negative" in warning
    assert repr(raw) in warning
    assert "10m" in warning


@pytest.mark.parametrize("raw", ["soon", "5", "1x", "1h-5m", "nan", "inf", "300000000h", "on"])
def test_unparseable_means_default_with_a_warning(raw: str) -> None:
    warning = _fell_back(parse_interval(raw), 3600.0)
    assert repr(raw) in warning
    assert "default interval 1h" in warning


@pytest.mark.parametrize(
    ("raw", "interval_s"), [("90s", 90.0), ("1h30m", 5400.0), ("250ms", 0.25), ("1ns", 1e-9)]
)
def test_positive_means_that_cadence(raw: str, interval_s: float) -> None:
    assert parse_interval(raw) == IntervalDecision("builtin", interval_s, ())


def test_bounds_clamp_with_a_warning() -> None:
    below = parse_interval("30s", min_s=60.0, max_s=7200.0)
    assert below.interval_s == 60.0
    assert below.warnings == ("interval '30s' is below the minimum 1m; using the minimum",)
    above = parse_interval("5h", min_s=60.0, max_s=7200.0)
    assert above.interval_s == 7200.0
    assert above.warnings == ("interval '5h' is above the maximum 2h; using the maximum",)
    inside = parse_interval("45m", min_s=60.0, max_s=7200.0)
    assert inside == IntervalDecision("builtin", 2700.0, ())
    on_edges = [parse_interval(raw, min_s=60.0, max_s=7200.0) for raw in ("1m", "2h")]
    assert [d.warnings for d in on_edges] == [(), ()]


def test_swapped_bounds_are_normalised() -> None:
    for raw in ("30s", "5h", "45m", "", "junk"):
        straight = parse_interval(raw, min_s=60.0, max_s=7200.0)
        swapped = parse_interval(raw, min_s=7200.0, max_s=60.0)
        assert swapped == straight


def test_default_is_clamped_too() -> None:
    decision = parse_interval("", default_s=7200.0, max_s=60.0)
    assert decision.interval_s == 60.0
    assert decision.warnings == (
        "the default interval 2h is above the maximum 1m; using the maximum",
    )
    negative = parse_interval("-1s", default_s=1.0, min_s=5.0)
    assert negative.interval_s == 5.0
    assert len(negative.warnings) == 2


def test_one_sided_bounds() -> None:
    assert parse_interval("1s", min_s=10.0).interval_s == 10.0
    assert parse_interval("100h", min_s=10.0).interval_s == 360000.0
    assert parse_interval("100h", max_s=10.0).interval_s == 10.0
    assert parse_interval("1s", max_s=10.0).interval_s == 1.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"default_s": 0.0},
        {"default_s": -1.0},
        {"default_s": math.nan},
        {"default_s": math.inf},
        {"default_s": 1e12},
        {"min_s": 0.0},
        {"min_s": -5.0},
        {"max_s": 0.0},
        {"max_s": math.inf},
    ],
)
def test_bad_caller_settings_raise(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be a positive, finite number of seconds"):
        parse_interval("90s", **kwargs)  # type: ignore[arg-type]


def test_redact_keeps_the_raw_value_out_of_every_warning() -> None:
    token = "zq" + secrets.token_hex(12)
    numbers = str(secrets.randbelow(10**9) + 10**9)
    cases: dict[str, dict[str, float]] = {
        token: {},  # unparseable
        f"-{numbers}ms": {},  # negative
        f"{numbers}ns": {"min_s": 60.0},  # clamped up
        f"{numbers}h": {"max_s": 60.0},  # out of range -> unparseable
        f"{numbers}s": {"max_s": 60.0},  # clamped down
    }
    for raw, bounds in cases.items():
        low, high = bounds.get("min_s"), bounds.get("max_s")
        shown = parse_interval(raw, min_s=low, max_s=high)
        hidden = parse_interval(raw, min_s=low, max_s=high, redact=True)
        assert shown.warnings, raw
        assert any(raw in warning for warning in shown.warnings)
        assert hidden.warnings
        assert (hidden.mode, hidden.interval_s) == (shown.mode, shown.interval_s)
        for warning in hidden.warnings:
            assert raw not in warning
            assert numbers not in warning
            assert token not in warning


seconds_bounds = st.none() | st.floats(1e-6, 1e8)


@given(
    raw=st.none() | st.text(),
    default_s=st.floats(1e-6, 1e8),
    min_s=seconds_bounds,
    max_s=seconds_bounds,
    zero_as_once=st.booleans(),
    redact=st.booleans(),
)
def test_parse_interval_never_raises_and_builtin_is_positive(
    raw: str | None,
    default_s: float,
    min_s: float | None,
    max_s: float | None,
    zero_as_once: bool,
    redact: bool,
) -> None:
    decision = parse_interval(
        raw,
        default_s=default_s,
        zero_as_once=zero_as_once,
        min_s=min_s,
        max_s=max_s,
        redact=redact,
    )
    assert isinstance(decision.warnings, tuple)
    if decision.mode == "builtin":
        assert decision.interval_s is not None
        assert math.isfinite(decision.interval_s)
        assert decision.interval_s > 0
        low, high = min_s, max_s
        if low is not None and high is not None and low > high:
            low, high = high, low
        assert low is None or decision.interval_s >= low
        assert high is None or decision.interval_s <= high
    else:
        assert decision.interval_s is None
        assert decision.warnings == ()
        if decision.mode == "once":
            assert zero_as_once


@given(st.text())
def test_parse_interval_external_only_for_ascii_sentinels_or_zero(raw: str) -> None:
    decision = parse_interval(raw)
    stripped = raw.strip(" \t\r\n\f\v")
    is_sentinel = stripped.isascii() and stripped.lower() in ("off", "disabled")
    try:
        is_zero = parse_duration(stripped) == 0
    except ValueError:
        is_zero = False
    assert (decision.mode == "external") == (is_sentinel or is_zero)


SENTINEL_SPELLINGS = {
    "o": ["o", "O", CYRILLIC_O, "\N{FULLWIDTH LATIN SMALL LETTER O}"],
    "f": ["f", "F", "\N{FULLWIDTH LATIN SMALL LETTER F}"],
    "d": ["d", "D"],
    "i": ["i", "I", DOTTED_I, "\N{LATIN SMALL LETTER DOTLESS I}"],
    "s": ["s", "S", LONG_S],
    "a": ["a", "A"],
    "b": ["b", "B"],
    "l": ["l", "L"],
    "e": ["e", "E"],
}


@st.composite
def sentinel_variants(draw: st.DrawFn) -> str:
    word = draw(st.sampled_from(["off", "disabled"]))
    letters = [draw(st.sampled_from(SENTINEL_SPELLINGS[letter])) for letter in word]
    text = "".join(letters)
    if draw(st.booleans()):
        text = text.replace("ff", FF_LIGATURE)
    return text


@given(sentinel_variants())
def test_sentinel_spellings_count_only_when_ascii(raw: str) -> None:
    decision = parse_interval(raw, zero_as_once=True)
    if raw.isascii():
        assert decision == IntervalDecision("external", None, ())
    else:
        assert decision.mode == "builtin"
        assert decision.interval_s == 3600.0
        assert len(decision.warnings) == 1


@given(total_ms=st.integers(1, 10**9), min_s=seconds_bounds, max_s=seconds_bounds)
def test_positive_durations_are_clamped_into_the_bounds(
    total_ms: int, min_s: float | None, max_s: float | None
) -> None:
    raw = format_duration(total_ms / 1000)
    decision = parse_interval(raw, min_s=min_s, max_s=max_s)
    low, high = min_s, max_s
    if low is not None and high is not None and low > high:
        low, high = high, low
    expected = total_ms / 1000
    if low is not None:
        expected = max(expected, low)
    if high is not None:
        expected = min(expected, high)
    assert decision.mode == "builtin"
    assert decision.interval_s == expected
    assert len(decision.warnings) == (0 if expected == total_ms / 1000 else 1)


@st.composite
def distinctive_raw_values(draw: st.DrawFn) -> str:
    """Raw values long and odd enough that no fixed warning text can contain them."""
    kind = draw(st.sampled_from(["junk", "negative", "small", "large"]))
    if kind == "junk":
        return "zq" + draw(st.text(min_size=6)) + "zq"
    hours, minutes = draw(st.integers(1000, 2000)), draw(st.integers(10, 59))
    millis = draw(st.integers(101, 999))
    if kind == "negative":
        return f"-{hours}h{minutes}m{millis}ms"
    if kind == "small":
        return f"{millis}ms{draw(st.integers(101, 999))}us"
    return f"{hours}h{minutes}m{millis}ms"


@given(distinctive_raw_values())
def test_redact_property(raw: str) -> None:
    decision = parse_interval(raw, min_s=1.0, max_s=3600.0, redact=True)
    assert decision.mode == "builtin"
    assert decision.warnings  # every case here warns: junk, negative, below or above
    for warning in decision.warnings:
        assert raw not in warning
        assert raw.strip() not in warning


def test_interval_decision_enforces_its_invariants() -> None:
    for mode, interval_s in [
        ("builtin", None),
        ("builtin", 0.0),
        ("builtin", -1.0),
        ("builtin", math.nan),
        ("builtin", math.inf),
        ("external", 5.0),
        ("once", 5.0),
        ("sometimes", None),
    ]:
        with pytest.raises(ValueError, match=r"interval|mode"):
            IntervalDecision(mode, interval_s)  # type: ignore[arg-type]
    decision = IntervalDecision("builtin", 5.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.interval_s = 6.0  # type: ignore[misc]
