"""Go-style durations and the interval rules (daemon/schedules/duration.py and
interval.py)."""

from __future__ import annotations

import dataclasses
import math
import secrets
from fractions import Fraction

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from daemon.schedules.duration import MAX_DURATION_S, DurationError, format_duration, parse_duration
from daemon.schedules.interval import IntervalDecision, parse_interval

MAX_NS = 2**63 - 1
MICRO = "\N{MICRO SIGN}"
GREEK_MU = "\N{GREEK SMALL LETTER MU}"
FF_LIGATURE = "\N{LATIN SMALL LIGATURE FF}"
LONG_S = "\N{LATIN SMALL LETTER LONG S}"
DOTTED_I = "\N{LATIN CAPITAL LETTER I WITH DOT ABOVE}"
FULLWIDTH_OFF = (
    "\N{FULLWIDTH LATIN CAPITAL LETTER O}"
    "\N{FULLWIDTH LATIN CAPITAL LETTER F}"
    "\N{FULLWIDTH LATIN CAPITAL LETTER F}"
)
FULLWIDTH_ZERO = "\N{FULLWIDTH DIGIT ZERO}"
FULLWIDTH_ONE = "\N{FULLWIDTH DIGIT ONE}"
FULLWIDTH_S = "\N{FULLWIDTH LATIN SMALL LETTER S}"
ARABIC_INDIC_FIVE = "\N{ARABIC-INDIC DIGIT FIVE}"
DEVANAGARI_ONE = "\N{DEVANAGARI DIGIT ONE}"
CYRILLIC_O = "\N{CYRILLIC SMALL LETTER O}"


# --- parse_duration ---------------------------------------------------------------


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


# --- format_duration ----------------------------------------------------------------


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


# --- parse_interval: the rules --------------------------------------------------------


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


@pytest.mark.parametrize("raw", LOOK_ALIKES)
def test_unicode_look_alikes_are_not_sentinels(raw: str) -> None:
    decision = parse_interval(raw)
    assert decision.mode == "builtin"
    assert decision.interval_s == 3600.0
    assert len(decision.warnings) == 1
    assert repr(raw) in decision.warnings[0]
    assert "not a valid duration" in decision.warnings[0]


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
    decision = parse_interval(raw, default_s=120.0, zero_as_once=True)
    assert decision.mode == "builtin"
    assert decision.interval_s == 120.0
    assert len(decision.warnings) == 1


@pytest.mark.parametrize("raw", ["-5m", "-1ns", "-1h30m", " -2s "])
def test_negative_means_default_with_a_warning(raw: str) -> None:
    decision = parse_interval(raw, default_s=600.0)
    assert decision.mode == "builtin"
    assert decision.interval_s == 600.0
    assert len(decision.warnings) == 1
    assert "negative" in decision.warnings[0]
    assert repr(raw) in decision.warnings[0]
    assert "10m" in decision.warnings[0]


@pytest.mark.parametrize("raw", ["soon", "5", "1x", "1h-5m", "nan", "inf", "300000000h", "on"])
def test_unparseable_means_default_with_a_warning(raw: str) -> None:
    decision = parse_interval(raw)
    assert decision.mode == "builtin"
    assert decision.interval_s == 3600.0
    assert len(decision.warnings) == 1
    assert repr(raw) in decision.warnings[0]
    assert "default interval 1h" in decision.warnings[0]


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


# --- parse_interval: properties ---------------------------------------------------------

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
