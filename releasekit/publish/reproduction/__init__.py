"""Promote's last line: an independent reproduction, signed by a key of its own (``publish.require_reproduced``).

One file per check (given, signed, digest, rebuilt, runner); ``subject.py`` reads what they judge.

When the locked manifest says ``require_reproduced`` and promote moves a digest into the
manifest's stable channel, it reads the reproduce receipt given as ``--reproduced FILE``
(``releasekit reproduce --receipt``) and its envelope beside it (``sign --reproduce-receipt``)
and runs the checks below, composed with ``AllOf``. Each reports its own code; any finding
refuses the promotion (exit 1, nothing moved):

- ``REPRODUCTION_REQUIRED``: no receipt given, or the file is not a reproduce receipt;
- ``REPRODUCTION_UNSIGNED``: no envelope beside it;
- ``REPRODUCTION_UNTRUSTED``: the envelope is not by one of ``publish.reproducer_keys`` (the
  release key is never one), does not verify, or the receipt was edited after signing;
- ``REPRODUCTION_WRONG_DIGEST``: the receipt is about another digest or image;
- ``REPRODUCTION_DIFFERED``: the rebuild was not the published image, layer for layer;
- ``REPRODUCTION_SAME_RUNNER``: the reproducer is the runner the attached provenance says
  built the image, or the provenance names none.
"""

from __future__ import annotations

from releasekit.checks import AllOf
from releasekit.publish.reproduction.digest import ReceiptForThisDigest
from releasekit.publish.reproduction.given import ReceiptGiven
from releasekit.publish.reproduction.rebuilt import ReceiptReproduced
from releasekit.publish.reproduction.runner import ReproducerNotBuilder
from releasekit.publish.reproduction.signed import ReceiptSigned
from releasekit.publish.reproduction.subject import (
    CHECK_NAME,
    CODES,
    ReproductionPolicy,
    ReproductionSubject,
    add_reproduction_check,
    read_subject,
    reproducer_keys,
    reproduction_policy,
)

__all__ = [
    "CODES",
    "ReproductionPolicy",
    "ReproductionSubject",
    "add_reproduction_check",
    "read_subject",
    "reproducer_keys",
    "reproduction_checks",
    "reproduction_policy",
]


def reproduction_checks() -> AllOf[ReproductionSubject]:
    return AllOf(
        ReceiptGiven(),
        ReceiptSigned(),
        ReceiptForThisDigest(),
        ReceiptReproduced(),
        ReproducerNotBuilder(),
        name=CHECK_NAME,
    )
