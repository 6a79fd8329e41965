"""Cutting texts to a budget: a text's head at a word boundary, fair shares of a budget for several texts,
and the most texts that fit a token budget.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

__all__ = ["word_head", "fair_heads", "fit_texts", "context_tokens", "chars_tokens", "lines_within"]


def word_head(text: str, n: int) -> str:
    """The first ``n`` characters of ``text``, without a word cut in half when the head has several words.

    >>> word_head("I finally hiked the Timberline Trail", 20)
    'I finally hiked the'
    """
    if len(text) <= n:
        return text
    head = text[:n]
    if not text[n].isspace() and not head[-1:].isspace():
        words = head.rsplit(maxsplit=1)
        head = words[0] if len(words) == 2 else head
    return head.rstrip()


def fair_heads(texts: Sequence[str], budget: int) -> list[str]:
    """Cut texts to a total of at most ``budget`` characters, each keeping its head.

    Water-filling: every text gets an equal share; texts shorter than their share keep all of it and
    leave the rest to the longer ones. Cuts fall back to a word boundary.
    """
    lengths = sorted(len(t) for t in texts)
    if sum(lengths) <= budget:
        return list(texts)
    remaining, cap = budget, 0
    for k, length in enumerate(lengths):
        share = remaining // (len(lengths) - k)
        if length > share:
            cap = share
            break
        remaining -= length
    return [word_head(text, cap) for text in texts]


def fit_texts(texts: Sequence[str], budget_tokens: int, count_tokens: Callable[[str], int]) -> list[str]:
    """Cut ``texts`` so that joined by newlines they take at most about ``budget_tokens`` tokens.

    Every text keeps a fair share of the characters, its head (water-filling, see
    :func:`memgas.kernels.text.fair_heads`): short texts stay whole, long ones are cut. Characters per
    token vary, so the cut is aimed from the measured ratio, measured again, and aimed lower while
    over (a few rounds; it stops at 5% of the text).

    Examples:
        With one token per word and room for four:

        >>> fit_texts(["one two", "three four five", "six"], 4, lambda text: len(text.split()))
        ['one', 'three', 'six']
    """
    out = list(texts)
    text = "\n".join(out)
    n = count_tokens(text)
    shrink = 1.0
    while n > budget_tokens and shrink > 0.05:
        shrink *= 0.9 * budget_tokens / n
        out = fair_heads(list(texts), int(len(text) * shrink))
        n = count_tokens("\n".join(out))
    return out


def context_tokens(text: str) -> int:
    """The token count a context block (:mod:`memgas.context`) budgets with: one per four characters, rounded up
    (about what GPT-style tokenizers give for English; no model needed, the same on every machine).

    >>> context_tokens("abcde")
    2
    """
    return chars_tokens(len(text))


def chars_tokens(chars: int) -> int:
    """:func:`context_tokens` of a text of ``chars`` characters (what a context counts for a line it has not made).

    >>> chars_tokens(5)
    2
    """
    return -(-chars // 4)


def lines_within(header: str, lines: Iterable[str], max_tokens: int) -> str:
    """``header``, then ``lines`` in order while they fit ``max_tokens`` (:func:`context_tokens`, and one for each
    line's break); the first that does not fit is cut at a word to what is left (when 20 tokens or more are) and
    ends the block. ``""`` when no line is taken. ``lines`` is read only as far as the budget goes.

    >>> lines_within("Memories:", ["[1] a short one", "[2] " + "long words " * 40], 30).splitlines()
    ['Memories:', '[1] a short one', '[2] long words long words long words long words long words long words long…']
    """
    out = [header]
    left = max_tokens - context_tokens(header) - 1
    for line in lines:
        cost = context_tokens(line) + 1
        if cost > left:
            if left >= 20:
                out.append(word_head(line, 4 * (left - 1) - 1) + "…")
            break
        out.append(line)
        left -= cost
    return "\n".join(out) if len(out) > 1 else ""
