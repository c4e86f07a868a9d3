"""The sections of ``privfed reproduce``: one entry per table or figure of the three seed papers.

Each :class:`Section` is data: the paper's words (quoted, with its table or figure), the
``privfed`` commands that measure ours (full and ``--quick``; one per pipeline when the paper's
pipeline and ours need separate runs), the per-seed numbers read from each command's
``report.json`` (:class:`~privfed.deploy.reproduce_rules.Quantity`), the claims tested, and the
reference lines drawn beside every claim (chance, the paper's non-private pipeline).

Every section runs the **paper's own pipeline** and, where privfed's default differs, **ours**
beside it: each :class:`Claim` names its pipeline and lists, next to its number, every way it
differs from the paper (basis, classifier, encoding, labels, ε scaling, data size). Verdicts come
from confidence intervals over seeds (:mod:`privfed.deploy.reproduce_stats`).

The sections themselves live in one module per paper: :mod:`~privfed.deploy.reproduce_seed002`
(seed 002, Wang & Chang, *Privacy-Preserving Boosting in the Local Setting*),
:mod:`~privfed.deploy.reproduce_seed004` (seed 004, Wang et al., *Differentially Private Support
Vector Machines with Knowledge Aggregation*, CMC 2024) and :mod:`~privfed.deploy.reproduce_seed003`
(seed 003, Xu et al., *Enhancing the Privacy of Predictors*, AAAI 2017).
"""

from __future__ import annotations

from collections.abc import Sequence

from privfed.deploy.reproduce_rules import Section, check_section
from privfed.deploy.reproduce_seed002 import SECTIONS_002
from privfed.deploy.reproduce_seed003 import SECTIONS_003
from privfed.deploy.reproduce_seed004 import SECTIONS_004
from privfed.deploy.reproduce_tabular import SECTIONS_TABULAR

#: Statuses of a section besides its verdicts: run and read (ok), not runnable in this build, an
#: experiment failed (non-zero exit or timeout), or a report lacks a number read.
OK, NOT_AVAILABLE, FAILED, NO_NUMBER = "ok", "not available", "failed", "no number"


def check_unique(sections: Sequence[Section]) -> None:
    """Raise ValueError when two sections share a key (their anchors and run directories) or a
    section is inconsistent (:func:`check_section`)."""
    keys = [s.key for s in sections]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"duplicate reproduce section keys: {dupes}")
    for s in sections:
        problems = check_section(s)
        if problems:
            raise ValueError(f"reproduce section {s.key}: {'; '.join(problems)}")


SECTIONS: tuple[Section, ...] = (*SECTIONS_002, *SECTIONS_004, *SECTIONS_003, *SECTIONS_TABULAR)
