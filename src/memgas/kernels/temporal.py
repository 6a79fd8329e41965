"""Time windows named by a question ("last weekend", "in April", "two weeks ago"), as a pure function.

:func:`parse_time_window` turns the first clear time expression of an English question into a
half-open interval ``[start, end)`` relative to the question's own time ``now``, so that a retriever
can favour the sessions stored inside it. Rules only: compiled regular expressions and calendar
arithmetic, no model, no third-party parser.

Conventions:

* Datetimes are naive. An aware ``now`` (or ``t`` given to :class:`TimeWindow`) is converted to
  naive UTC first (:func:`memgas.core.validate.naive_utc`, memgas's one rule for comparing times), so
  stored timestamps with a zone compare with those without.
* A window that would leave ``datetime``'s range (years 1-9999), as "five years ago" asked in
  year 3 would, is no window; :meth:`TimeWindow.widened` stops at the range's ends.
* Windows are about the past: memories are in the past. A month, season or date without a year is
  the most recent occurrence whose window starts before ``now`` ("in June" asked on 2023-05-30 is
  June 2022). Future expressions ("tomorrow", "next week") are not recognised.
* Weeks run Monday to Sunday (ISO 8601); a weekend is Saturday 00:00 to Monday 00:00.
* ``last`` + a calendar unit is the previous calendar unit ("last week", "last month", "last year");
  ``past`` / ``the last`` + a unit, with or without a count, is a rolling span ending at ``now``
  ("the past week" = the 7 days before ``now``, "the last two months", "the past few weeks").
* "N units ago" is a window centred on the day ``N`` units before today, widened by a tolerance
  (:data:`AGO_TOLERANCE_DAYS`), since people round.
* Numeric dates are ``YYYY-MM-DD``, ``YYYY/MM/DD`` or US-order ``MM/DD/YYYY``; a four-digit year
  is required, so fractions and scores ("3/4", "10/20") are not dates.
* Count words are digits, "one" … "twelve", "a"/"an" (1), "a couple (of)" (2) and "a few" (3).
* Expressions tied to an unknown event ("the first week of training", "the last time I …") give no
  window. "may" and "march" in lower case after "this"/"last"/"since", after a bare day number or
  second in a month range are read as the verbs ("this may be", "3 may help", "in April or may
  not"); in any case they are months after "in"/"during" and next to a day ("may 3").
"""

from __future__ import annotations

import re
import string
from calendar import monthrange
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable

from memgas.core.errors import InvalidInputError
from memgas.core.validate import naive_utc

__all__ = ["AGO_TOLERANCE_DAYS", "TimeWindow", "parse_time_window"]

#: Half-width, in days, of an "N <unit> ago" window around its centre day.
AGO_TOLERANCE_DAYS: dict[str, int] = {"day": 1, "week": 3, "month": 15, "year": 45}

_DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A half-open time interval named by a query.

    Attributes:
        start: first instant inside the window (inclusive), naive.
        end: first instant after the window (exclusive), naive.
        expression: the text of the query that named it, e.g. ``"last weekend"``.
    """

    start: datetime
    end: datetime
    expression: str

    def __post_init__(self) -> None:
        if self.start.tzinfo is not None or self.end.tzinfo is not None:
            raise InvalidInputError("TimeWindow start and end must be naive datetimes (UTC)")
        if not self.start < self.end:
            raise InvalidInputError(f"TimeWindow start {self.start} is not before end {self.end}")

    def contains(self, t: datetime) -> bool:
        """Whether ``start <= t < end``; an aware ``t`` is compared as naive UTC."""
        t = naive_utc(t)
        return self.start <= t < self.end

    def distance_days(self, t: datetime) -> float:
        """Days from ``t`` to the window: 0 inside (and at ``end``), else to the nearest edge.

        An aware ``t`` is compared as naive UTC.
        """
        t = naive_utc(t)
        if t < self.start:
            return (self.start - t).total_seconds() / 86400.0
        if t > self.end:
            return (t - self.end).total_seconds() / 86400.0
        return 0.0

    def widened(self, before: timedelta, after: timedelta) -> TimeWindow:
        """The window extended by ``before`` at its start and ``after`` at its end (both >= 0).

        The ends stop at ``datetime.min`` / ``datetime.max`` instead of overflowing.
        """
        start = self.start - before if self.start - datetime.min > before else datetime.min
        end = self.end + after if datetime.max - self.end > after else datetime.max
        return TimeWindow(start, end, self.expression)


# -- vocabulary ------------------------------------------------------------------------------

_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTH_NUM = {name: i + 1 for i, name in enumerate(_MONTHS)}
_MONTH_NUM.update({name[:3]: i + 1 for i, name in enumerate(_MONTHS)})
_MONTH_NUM["sept"] = 9
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_COUNT_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_ORDINAL_WEEK = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3}
#: Month words that are also common English verbs; see the module notes.
_VERB_MONTHS = frozenset({"may", "march"})

# Full month names only where a bare word could be read as a month; abbreviations only next to a day.
_MONTH_WORD = r"(?:" + "|".join(_MONTHS) + r")"
_MONTH = _MONTH_WORD + r"(?![\w-])"
_MONTH_ANY = r"(?:" + "|".join(_MONTHS) + r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?(?![\w-])"
_WEEKDAY = r"(?:" + "|".join(_WEEKDAYS) + r")"
_SEASON = r"(?:spring|summer|fall|autumn|winter)"
_NUM = (
    r"(?:\d{1,3}|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few"
    r"|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|an?)"
)
_UNIT = r"(?:day|week|month|year)s?\b"
_YEAR = r"(?:19|20)\d\d\b"
_ORD = r"(?:st|nd|rd|th)"
_PART = r"(?:early|mid|late|the\s+beginning\s+of|the\s+start\s+of|the\s+middle\s+of|the\s+end\s+of)"
_NOT_OF = r"(?!\s+of\b)"  # "the last week of training": relative to an unknown event


# -- calendar arithmetic ---------------------------------------------------------------------

_Span = tuple[datetime, datetime]


def _add_months(t: datetime, n: int) -> datetime:
    """``t`` moved by ``n`` calendar months, the day clamped to the target month's length."""
    y, m = divmod(t.month - 1 + n, 12)
    year, month = t.year + y, m + 1
    return t.replace(year=year, month=month, day=min(t.day, monthrange(year, month)[1]))


def _shift(t: datetime, unit: str, n: int) -> datetime:
    if unit == "day":
        return t + n * _DAY
    if unit == "week":
        return t + 7 * n * _DAY
    return _add_months(t, n if unit == "month" else 12 * n)


def _month_span(year: int, month: int, part: str | None = None) -> _Span:
    """A calendar month, or its early (1st-15th), mid (8th-22nd) or late (16th-end) part."""
    start = datetime(year, month, 1)
    end = _add_months(start, 1)
    if part == "early":
        return start, start.replace(day=16)
    if part == "mid":
        return start.replace(day=8), start.replace(day=23)
    if part == "late":
        return start.replace(day=16), end
    return start, end


def _latest(span: Callable[[int], _Span], now: datetime, *, completed: bool = False) -> _Span | None:
    """The most recent yearly occurrence ``span(year)`` that has started (or ended) by ``now``.

    ``span`` may raise ``ValueError`` for years without such a date (29 February); those are skipped.
    Returns ``None`` when no year in the last nine qualifies (an impossible date such as 30 February).
    """
    for year in range(now.year, now.year - 9, -1):
        try:
            start, end = span(year)
        except ValueError:
            continue
        if (end <= now) if completed else (start < now):
            return start, end
    return None


def _count(text: str) -> int:
    words = text.lower().split()
    if words[0].isdigit():
        return int(words[0])
    if "couple" in words:
        return 2
    if "few" in words:
        return 3
    return _COUNT_WORDS[words[0]]


def _part(text: str | None) -> str | None:
    if not text:
        return None
    t = text.lower()
    if "beginning" in t or "start" in t or t == "early":
        return "early"
    if "middle" in t or t == "mid":
        return "mid"
    return "late"


def _verb_month(word: str) -> bool:
    """Whether a matched month word, as written, is more likely the verb ("may", "march")."""
    return word in _VERB_MONTHS  # case-sensitive on purpose: "May" is the month


# -- one handler per form: (match, now, today) -> (start, end) or None to reject --------------


def _day_words(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    w = " ".join(m.group(0).lower().split())
    if w == "the day before yesterday":
        return today - 2 * _DAY, today - _DAY
    if w == "yesterday":
        return today - _DAY, today
    if w == "today":
        return today, today + _DAY
    if w == "last night":
        return today - _DAY + timedelta(hours=18), today + timedelta(hours=6)
    if w == "this morning":
        return today, today + timedelta(hours=12)
    if w == "this afternoon":
        return today + timedelta(hours=12), today + timedelta(hours=18)
    return today + timedelta(hours=18), today + _DAY  # this evening, tonight


def _iso_date(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    try:
        day = datetime(int(m["y"]), int(m["mo"]), int(m["d"]))
    except ValueError:
        return None
    return day, day + _DAY


def _named_date(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    month_word = m["m"].rstrip(".")
    month, d = _MONTH_NUM[month_word.lower()], int(m["d"])
    if m["dayfirst"] and not (m["ord"] or m["of"] or m["y"]) and _verb_month(month_word):
        return None  # "3 may help"
    if m["y"]:
        try:
            day = datetime(int(m["y"]), month, d)
        except ValueError:
            return None
        return day, day + _DAY
    return _latest(lambda y: (datetime(y, month, d), datetime(y, month, d) + _DAY), now)


def _ago(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    n, unit = _count(m["n"]), m["u"].lower().rstrip("s")
    if n == 0:
        return None
    centre = _shift(today, unit, -n)
    tol = AGO_TOLERANCE_DAYS[unit] * _DAY
    return centre - tol, centre + _DAY + tol


def _rolling(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    unit = m["u"].lower()
    if m["n"] is None and unit.endswith("s"):
        return None  # "in past years": no span given
    n = 1 if m["n"] is None else _count(m["n"])
    if n == 0:
        return None
    return _shift(now, unit.rstrip("s"), -n), now


def _calendar(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    back = 1 if m["rel"].lower() == "last" else 0
    unit = m["u"].lower()
    if unit == "week":
        monday = today - today.weekday() * _DAY - 7 * back * _DAY
        return monday, monday + 7 * _DAY
    if unit == "month":
        first = _add_months(today.replace(day=1), -back)
        return first, _add_months(first, 1)
    first = datetime(today.year - back, 1, 1)
    return first, first.replace(year=first.year + 1)


def _weekend(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    rel = " ".join(m["rel"].lower().split())
    if rel == "this":  # the weekend of the current week, as "this week" is the current week
        saturday = today + (5 - today.weekday()) * _DAY
        return saturday, saturday + 2 * _DAY
    since_saturday = (today.weekday() - 5) % 7  # 0 on Saturday, 1 on Sunday, 2 on Monday …
    if rel != "over the" and since_saturday < 2:
        since_saturday += 7  # "last weekend" is one that is over: on a weekend, the one before
    saturday = today - since_saturday * _DAY
    return saturday, saturday + 2 * _DAY


def _weekday(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    if _DATE_AFTER.match(m.string, m.end()):
        return None  # "on Saturday, May 3": the date, found next, names the day
    target = _WEEKDAYS.index(m["wd"].lower())
    if m["rel"].lower() == "this":
        day = today + (target - today.weekday()) * _DAY  # that day of the current week
    else:
        day = today - ((today.weekday() - target) % 7 or 7) * _DAY  # strictly before today
    return day, day + _DAY


def _week_of_month(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    month = _MONTH_NUM[m["m"].lower()]
    which = m["ord"].lower()

    def span(year: int) -> _Span:
        start, end = _month_span(year, month)
        if which == "last":
            return end - 7 * _DAY, end
        first = start + 7 * _ORDINAL_WEEK[which] * _DAY
        return first, first + 7 * _DAY

    return span(int(m["y"])) if m["y"] else _latest(span, now)


def _month_range(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    if _verb_month(m["m2"]):
        return None  # "in April or may not"; the single month form then reads "in April"
    m1, m2 = _MONTH_NUM[m["m1"].lower()], _MONTH_NUM[m["m2"].lower()]
    if m["y"]:
        end_month_start = datetime(int(m["y"]), m2, 1)
    else:
        end_month_start = _latest(lambda y: _month_span(y, m2), now)[0]  # type: ignore[index]
    y1 = end_month_start.year - (m1 > m2)  # "December to February" crosses the new year
    return datetime(y1, m1, 1), _add_months(end_month_start, 1)


def _month(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    word = m["m"]
    month = _MONTH_NUM[word.lower()]
    prep = (m["prep"] or "").lower()
    if prep in ("this", "last", "since") and _verb_month(word):
        return None  # "this may be"
    part = _part(m["part"] or m["part2"])
    if m["y"]:
        span = _month_span(int(m["y"]), month, part)
    elif prep == "this":
        span = _month_span(now.year, month, part)
    else:
        found = _latest(lambda y: _month_span(y, month, part), now, completed=prep == "last")
        if found is None:
            return None
        span = found
    if prep == "since":
        return (span[0], now) if span[0] < now else None
    return span


def _year(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    start = datetime(int(m["y"]), 1, 1)
    if m["prep"].lower() == "since":
        return (start, now) if start < now else None
    return start, start.replace(year=start.year + 1)


def _season(m: re.Match[str], now: datetime, today: datetime) -> _Span | None:
    word = (m["s"] or m["s2"]).lower()
    first = _SEASON_START[word]

    def span(year: int) -> _Span:
        start = datetime(year, first, 1)
        return start, _add_months(start, 3)

    if m["y"]:
        return span(int(m["y"]))  # winter 2022 = December 2022 to February 2023
    rel = " ".join(m["rel"].lower().split())
    return _latest(span, now, completed=rel != "this")


# -- the forms, in priority order at equal start positions ----------------------------------

# Every form starts at a word boundary (added once, below). "on Saturday mornings" is a habit.
_HABIT = r"(?:morning|afternoon|evening|night)s\b"
_DATE_AFTER = re.compile(
    rf",?\s+(?:the\s+)?(?:\d{{1,2}}{_ORD}?\s+(?:of\s+)?{_MONTH_ANY}|{_MONTH_ANY}\s+(?:the\s+)?\d)", re.IGNORECASE
)

_FORMS: tuple[tuple[str, Callable[[re.Match[str], datetime, datetime], _Span | None]], ...] = (
    (r"(?<![/.-])(?P<y>\d{4})[-/](?P<mo>\d{1,2})[-/](?P<d>\d{1,2})(?![\d/]|[.-]\d)", _iso_date),
    (r"(?<![/.-])(?P<mo>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})(?![\d/]|[.-]\d)", _iso_date),
    (
        rf"(?:the\s+)?(?P<dayfirst>(?P<d>\d{{1,2}})(?P<ord>{_ORD})?)\s+(?P<of>of\s+)?"
        rf"(?P<m>{_MONTH_ANY})(?:,?\s+(?P<y>{_YEAR}))?",
        _named_date,
    ),
    (
        rf"(?P<m>{_MONTH_ANY})\s+(?:the\s+)?(?P<d>\d{{1,2}})(?P<ord>{_ORD})?\b(?!:\d|[.,]\d)"
        rf"(?P<dayfirst>)(?P<of>)(?:,?\s+(?P<y>{_YEAR}))?",
        _named_date,
    ),
    (
        r"(?:the\s+day\s+before\s+yesterday|yesterday|today|tonight|last\s+night"
        r"|this\s+(?:morning|afternoon|evening))\b",
        _day_words,
    ),
    (rf"(?P<n>{_NUM})\s+(?P<u>{_UNIT})\s+ago\b", _ago),
    (
        r"(?P<rel>last|this\s+past|the\s+past|past|this|over\s+the)\s+weekend\b",
        _weekend,
    ),
    (
        rf"(?:the\s+)?(?P<ord>first|second|third|fourth|1st|2nd|3rd|4th|last)\s+week\s+of\s+"
        rf"(?P<m>{_MONTH})(?:,?\s+(?P<y>{_YEAR}))?",
        _week_of_month,
    ),
    (rf"(?:(?:the|this)\s+)?past\s+(?:(?P<n>{_NUM})\s+)?(?P<u>{_UNIT}){_NOT_OF}", _rolling),
    (rf"the\s+last\s+(?:(?P<n>{_NUM})\s+)?(?P<u>{_UNIT}){_NOT_OF}", _rolling),
    (rf"last\s+(?P<n>{_NUM})\s+(?P<u>{_UNIT}){_NOT_OF}", _rolling),
    (rf"(?P<rel>last|this)\s+(?P<u>week|month|year)\b{_NOT_OF}", _calendar),
    (rf"(?P<rel>last|past|this\s+past|this|on)\s+(?P<wd>{_WEEKDAY})\b(?!\s+{_HABIT})", _weekday),
    (
        rf"(?:in|during|between|from|throughout|over)\s+(?:the\s+months\s+of\s+)?(?P<m1>{_MONTH_WORD})\b\s*"
        rf"(?:and|or|to|through|thru|till|until|-|–)\s*(?P<m2>{_MONTH})(?:,?\s+(?P<y>{_YEAR}))?",
        _month_range,
    ),
    (
        rf"(?:(?P<prep>in|during|throughout|since|last|this)\s+(?:the\s+month\s+of\s+)?"
        rf"(?:(?P<part>{_PART})[\s-]+(?:of\s+)?)?|(?P<part2>{_PART})[\s-]+(?:of\s+|in\s+)?)"
        rf"(?P<m>{_MONTH})(?:,?\s+(?:of\s+)?(?P<y>{_YEAR}))?",
        _month,
    ),
    (rf"(?P<m>{_MONTH}),?\s+(?:of\s+)?(?P<y>{_YEAR})(?P<prep>)(?P<part>)(?P<part2>)", _month),
    (
        rf"(?:(?P<rel>last|this\s+past|the\s+past|past|this)\s+(?P<s>{_SEASON})\b"
        rf"|(?:in\s+)?(?:the\s+)?(?P<s2>{_SEASON})\s+(?:of\s+)?(?P<y>{_YEAR}))",
        _season,
    ),
    (rf"(?P<prep>in|during|throughout|since)\s+(?:the\s+year\s+)?(?P<y>{_YEAR})(?![/.-]\d)", _year),
)

# Each form's own pattern, case-insensitive, reads its groups from the original text.
_FORM_RES = tuple(re.compile(r"\b" + p, re.IGNORECASE) for p, _ in _FORMS)
# One leftmost-match scan over all forms on ASCII-lower-cased text (case folding in the scan costs
# more than the fold itself) with the group names dropped, since they repeat across forms.
_UNNAMED = (re.sub(r"\(\?P<\w+>", "(?:", p) for p, _ in _FORMS)
_ANY_RE = re.compile(r"\b(?:" + "|".join(f"(?P<f{i}>{p})" for i, p in enumerate(_UNNAMED)) + ")")
_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)  # keeps every offset
# Every form's match contains a digit or one of these, so a query without any has no window; the
# check costs a tenth of the scan and most questions fail it.
_ANCHORS = (
    *"0123456789", "day", "night", "morning", "afternoon", "evening", "week", "month", "year",
    *(name[:3] for name in _MONTHS), "spring", "summer", "fall", "autumn", "winter",
)  # fmt: skip


def parse_time_window(query: str, now: datetime) -> TimeWindow | None:
    """The time window named by the first clear time expression in ``query``, relative to ``now``.

    Parameters:
        query: an English question or statement, any case.
        now: when the query is asked. An aware datetime is converted to naive UTC first.

    Returns:
        The :class:`TimeWindow` of the leftmost recognised expression (an expression that names an
        impossible date, like "February 30", is skipped), or ``None`` when there is none. The
        forms and their exact meaning are listed in the module docstring and below:

        * "today", "yesterday", "the day before yesterday": that calendar day; "this morning"
          00-12 h, "this afternoon" 12-18 h, "this evening"/"tonight" 18-24 h of today, "last night"
          18 h yesterday to 6 h today.
        * "this/last week|month|year": the current/previous calendar unit (weeks from Monday).
        * "the past week", "past N days", "the last two months", "the past few weeks": rolling,
          ``now`` minus that span to ``now`` (months and years by calendar, the day clamped).
        * "last weekend", "the past weekend": the last Saturday-Sunday that is over (asked on a
          Saturday or Sunday, the one before); "over the weekend": the most recent weekend that has
          started; "this weekend": the weekend of the current week (ahead on Monday to Friday).
        * "last Monday", "on Monday", "past Monday": the most recent Monday strictly before today;
          "this Monday": the Monday of the current week.
        * "N days|weeks|months|years ago": the day N units before today, ± 1 day, ± 3 days, ± 15
          days or ± 45 days (:data:`AGO_TOLERANCE_DAYS`).
        * "in April", "during April", "April 2023", "in April of 2023", "this April": the month;
          "early/mid/late April" (also "the beginning/middle/end of April"): days 1-15, 8-22,
          16-end; "last April": the most recent April that is over; "since April": April 1 to
          ``now``; "in March and April", "from March to May": the months between, inclusive;
          "the first/second/third/fourth/last week of April": 7 days from the 1st/8th/15th/22nd,
          or the month's last 7 days.
        * "in 2022", "during 2022": that year; "since 2022": 1 January 2022 to ``now``.
        * "May 3", "on May 3rd, 2023", "3 May", "the 3rd of May", "2023-05-03", "2023/05/03",
          "05/03/2023" (month first): that day.
        * "last/this/past summer", "summer 2022", "the fall of 2022": meteorological northern
          seasons (spring March-May, summer June-August, fall September-November, winter
          December-February, named by the year it starts in); "last" is the most recent one over,
          "this" the most recent one started.

    Raises:
        InvalidInputError: ``query`` is not a string or ``now`` not a datetime (or an aware one
            outside the representable range in UTC).
    """
    if not isinstance(query, str):
        raise InvalidInputError(f"query must be a string, got {type(query).__name__}")
    if not isinstance(now, datetime):
        raise InvalidInputError(f"now must be a datetime, got {type(now).__name__}")
    now = naive_utc(now)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    folded, pos = query.translate(_LOWER), 0
    if not any(a in folded for a in _ANCHORS):
        return None
    while (hit := _ANY_RE.search(folded, pos)) is not None:
        at = hit.start()
        # The scan names the first form matching here; if its handler rejects the match, later forms
        # may still match at the same position ("in April or may not" → "in April").
        for i in range(int(hit.lastgroup[1:]), len(_FORMS)):  # type: ignore[index]
            m = _FORM_RES[i].match(query, at)
            try:
                span = _FORMS[i][1](m, now, today) if m is not None else None
            except (OverflowError, ValueError):
                span = None  # the window would leave datetime's years 1-9999: there is none to favour
            if span is not None:
                return TimeWindow(span[0], span[1], " ".join(m.group(0).split()))  # type: ignore[union-attr]
        pos = at + 1
    return None
