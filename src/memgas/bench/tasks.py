"""Generated task families whose answers are checked exactly by code, for the Buffer-of-Thoughts benchmark.

Four families (:data:`FAMILIES`):

* ``game24``: four numbers 1-13 to combine with ``+ - * /`` and parentheses into 24 (only solvable sets
  are generated); the answer is an expression.
* ``word_sort``: a list of words to sort alphabetically; the answer is the sorted words.
* ``arithmetic``: a start value and three to four operations applied in order; the answer is the integer.
* ``date``: a date and a number of days to add or subtract; the answer is the date, ``YYYY-MM-DD``.

Each problem carries a worked reference solution written by code (for learning templates from correct
solutions) and the data its checker needs. Generation is deterministic per ``(family, split, seed)``;
:func:`split` makes disjoint training and test problems.

No model-written code is ever executed: a ``game24`` expression is parsed with :mod:`ast` and only number
literals, the four operators and parentheses are evaluated here, in exact fractions; every other checker
compares parsed values.
"""

from __future__ import annotations

import ast
import itertools
import random
import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable

from memgas.core.errors import InvalidInputError

__all__ = ["FAMILIES", "Problem", "generate", "split", "check", "solve_24"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One generated problem: its family, the text shown to the model, a reference solution, the
    reference answer, and the data its checker uses."""

    family: str
    text: str
    solution: str
    answer: str
    data: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- game of 24

_OPS: dict[type, Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


@lru_cache(maxsize=None)
def solve_24(numbers: tuple[int, ...]) -> str | None:
    """An expression over ``numbers`` (each once) that equals 24, or ``None`` (exhaustive search)."""
    def search(items: tuple[tuple[Fraction, str], ...]) -> str | None:
        if len(items) == 1:
            return items[0][1] if items[0][0] == 24 else None
        for i, j in itertools.permutations(range(len(items)), 2):
            (a, ea), (b, eb) = items[i], items[j]
            rest = tuple(items[k] for k in range(len(items)) if k not in (i, j))
            options = [(a + b, f"({ea} + {eb})"), (a - b, f"({ea} - {eb})"), (a * b, f"({ea} * {eb})")]
            if b != 0:
                options.append((a / b, f"({ea} / {eb})"))
            for value, text in options:
                found = search(rest + ((value, text),))
                if found:
                    return found
        return None

    found = search(tuple((Fraction(n), str(n)) for n in numbers))
    return found[1:-1] if found else None  # the outer parentheses add nothing


def _evaluate(node: ast.AST, used: list[int]) -> Fraction:
    """The exact value of a parsed expression of integer literals and ``+ - * /``; other syntax is refused."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, used)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        used.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left, used), _evaluate(node.right, used))
    raise ValueError("not an arithmetic expression")


def _check_24(answer: str, data: dict[str, Any]) -> bool:
    expression = answer.split("=")[0].replace("×", "*").replace("÷", "/").replace("x", "*").strip()
    try:
        used: list[int] = []
        value = _evaluate(ast.parse(expression, mode="eval"), used)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return False
    return value == 24 and sorted(used) == sorted(data["numbers"])


def _gen_24(rng: random.Random) -> Problem:
    while True:
        numbers = tuple(rng.randint(1, 13) for _ in range(4))
        expression = solve_24(tuple(sorted(numbers)))
        if expression:
            break
    shown = " ".join(map(str, numbers))
    return Problem(
        "game24", f"Use the numbers {shown} exactly once each, with + - * / and parentheses, to make 24.",
        f"Try pairs of numbers and operations, keeping intermediate results that can still reach 24 with the "
        f"remaining numbers; check that every number is used once. {expression} = 24.",
        expression, {"numbers": list(numbers)})


# ----------------------------------------------------------------------------- word sorting

_WORDS = (
    "apple river stone garden window silver candle forest market yellow bridge pocket summer orange "
    "ladder copper button island rabbit mirror velvet harbor pencil thunder basket meadow lantern violin "
    "saddle falcon tunnel marble cactus dragon anchor blanket cotton desert engine feather glacier hammer "
    "jacket kettle lemon magnet needle oyster parrot quartz ribbon shadow tiger umbrella valley walnut zebra"
).split()


def _words_of(answer: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Za-z]+", answer)]


def _check_sort(answer: str, data: dict[str, Any]) -> bool:
    return _words_of(answer) == sorted(data["words"])


def _gen_sort(rng: random.Random) -> Problem:
    words = rng.sample(_WORDS, rng.randint(5, 7))
    ordered = sorted(words)
    return Problem(
        "word_sort", f"Sort these words alphabetically: {' '.join(words)}.",
        "Compare the words letter by letter from the first letter; a word that is a prefix of another comes "
        f"first. Sorted: {' '.join(ordered)}.", " ".join(ordered), {"words": words})


# ----------------------------------------------------------------------------- multi-step arithmetic


def _first_integer(answer: str) -> int | None:
    match = re.search(r"-?\d[\d,]*", answer)
    return None if match is None else int(match.group().replace(",", ""))


def _check_integer(answer: str, data: dict[str, Any]) -> bool:
    return _first_integer(answer) == data["value"]


def _gen_arithmetic(rng: random.Random) -> Problem:
    value = rng.randint(2, 30)
    start = value
    steps, work = [], []
    for _ in range(rng.randint(3, 4)):
        op, n = rng.choice(("add", "subtract", "multiply by")), rng.randint(2, 12)
        new = value + n if op == "add" else value - n if op == "subtract" else value * n
        steps.append(f"{op} {n}")
        work.append(f"{value} {'+' if op == 'add' else '-' if op == 'subtract' else '*'} {n} = {new}")
        value = new
    return Problem(
        "arithmetic", f"Start with {start}, then {', then '.join(steps)}. What is the result?",
        f"Apply the operations one at a time, in order, carrying the running value: {'; '.join(work)}. "
        f"The result is {value}.", str(value), {"value": value})


# ----------------------------------------------------------------------------- date arithmetic

_ISO = re.compile(r"\d{4}-\d{2}-\d{2}")


def _check_date(answer: str, data: dict[str, Any]) -> bool:
    match = _ISO.search(answer)
    return match is not None and match.group() == data["date"]


def _gen_date(rng: random.Random) -> Problem:
    start = date(2020, 1, 1) + timedelta(days=rng.randint(0, 5 * 365))
    days = rng.randint(3, 60)
    later = rng.random() < 0.6
    end = start + timedelta(days=days if later else -days)
    word = "after" if later else "before"
    return Problem(
        "date", f"What date is {days} days {word} {start.isoformat()}? Answer as YYYY-MM-DD.",
        f"Count {'forward' if later else 'backward'} {days} days from {start.isoformat()} month by month, using "
        f"each month's length (February has 29 days in leap years): the date is {end.isoformat()}.",
        end.isoformat(), {"date": end.isoformat()})


#: Family name → (generator, checker).
FAMILIES: dict[str, tuple[Callable[[random.Random], Problem], Callable[[str, dict[str, Any]], bool]]] = {
    "game24": (_gen_24, _check_24),
    "word_sort": (_gen_sort, _check_sort),
    "arithmetic": (_gen_arithmetic, _check_integer),
    "date": (_gen_date, _check_date),
}


def _family(name: str) -> tuple[Callable[[random.Random], Problem], Callable[[str, dict[str, Any]], bool]]:
    if name not in FAMILIES:
        raise InvalidInputError(f"unknown task family {name!r}; choose from {', '.join(FAMILIES)}")
    return FAMILIES[name]


def generate(family: str, n: int, seed: int = 0, *, part: str = "train") -> list[Problem]:
    """``n`` distinct problems of ``family``, the same for the same ``(family, part, seed)``.

    Raises:
        InvalidInputError: an unknown family, or ``n`` < 0.
    """
    if n < 0:
        raise InvalidInputError(f"n must be at least 0, got {n}")
    make = _family(family)[0]
    rng = random.Random(f"{family}/{part}/{seed}")
    out: dict[str, Problem] = {}
    while len(out) < n:
        problem = make(rng)
        out.setdefault(problem.text, problem)
    return list(out.values())


def split(family: str, n_train: int, n_test: int, seed: int = 0) -> tuple[list[Problem], list[Problem]]:
    """Disjoint training and test problems of ``family`` (test problems never repeat a training one)."""
    train = generate(family, n_train, seed, part="train")
    seen = {p.text for p in train}
    pool = generate(family, n_test + n_train, seed, part="test")
    return train, [p for p in pool if p.text not in seen][:n_test]


def check(problem: Problem, answer: str) -> bool:
    """Whether ``answer`` solves ``problem`` (by its family's checker; see the module notes)."""
    return _family(problem.family)[1](answer, problem.data)
