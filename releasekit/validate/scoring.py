"""GSM8K answer extraction and matching, the way lm-eval's ``flexible-extract`` filter scores it.

lm-eval's gsm8k task: the filter takes the *last* match of
``(-?[$0-9.,]{2,})|(-?[0-9]+)`` in the model output (group_select -1; when the
match came from the second group, that group's text), then ``exact_match`` with
``ignore_case``, ``ignore_punctuation=False`` and ``regexes_to_ignore`` ``,``,
``\\$``, ``(?s).*#### `` and ``\\.$`` applied to both prediction and reference.
Matching it exactly is what makes our accuracy comparable with published numbers.
"""

from __future__ import annotations

import re

_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
_IGNORE = (re.compile(","), re.compile(r"\$"), re.compile(r"(?s).*#### "), re.compile(r"\.$"))
# What lm-eval reports when nothing matched: it can never equal a normalised reference.
NO_MATCH = "[invalid]"


def flexible_extract(text: str) -> str:
    matches = _FLEXIBLE.findall(text)
    if not matches:
        return NO_MATCH
    first, second = matches[-1]
    # findall gives a tuple per match; lm-eval keeps the first non-empty group.
    return first or second


def strict_extract(text: str) -> str:
    matches = _STRICT.findall(text)
    return matches[0] if matches else NO_MATCH


def normalise(text: str) -> str:
    for pattern in _IGNORE:
        text = pattern.sub("", text)
    return text.lower()


def exact_match(prediction: str, reference: str) -> bool:
    return normalise(prediction) == normalise(reference)


def score(output: str, reference: str, filter_name: str = "flexible-extract") -> tuple[str, bool]:
    """(extracted answer, correct?) for one model output against the dataset's answer field."""
    extracted = flexible_extract(output) if filter_name == "flexible-extract" else strict_extract(output)
    return extracted, exact_match(extracted, reference)
