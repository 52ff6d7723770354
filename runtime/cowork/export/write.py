"""Writing an export: the episodes of rollouts as one file of the chosen format, replaced atomically.

``cowork export RESULTS --format {openai-sft,trl-sft,rl} --out FILE`` is this call (see
:mod:`cowork.cli.commands`); docs/exports.md gives the formats, the curation rules and the
reward modes.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ..errors import CoworkError
from .curation import CurationReport
from .records import Source, pooled_records
from .rl import rl_examples, write_rl_parquet
from .sft import sft_examples, write_trl_parquet

log = logging.getLogger(__name__)

#: The formats :func:`export` writes.
FORMATS = ("openai-sft", "trl-sft", "rl")


def export(source: Source, fmt: str, out: str | os.PathLike, *, reward: str = "score", curate: bool = True,
           max_turns: int | None = None, min_score: float | None = None,
           as_format: str | None = None) -> CurationReport:
    """Write the episodes of ``source`` as ``fmt`` to ``out`` and say what was kept.

    Args:
        source: Rollout output folders, results files or :class:`EpisodeRecord` objects (one
            or several; their episodes are pooled, so duplicates across runs are found).
        fmt: ``openai-sft`` (JSONL), ``trl-sft`` or ``rl`` (JSONL or Parquet).
        out: The file to write (replaced atomically); ``.jsonl`` or ``.parquet`` unless
            ``as_format`` says which.
        reward: ``rl`` only: one of :data:`cowork.rollouts.rewards.MODES`.
        curate: SFT only: keep only graded, safe, passing, complete, unique episodes.
        max_turns: SFT only: leave out episodes of more assistant turns.
        min_score: SFT only: leave out episodes scored below this.
        as_format: ``jsonl`` or ``parquet`` whatever ``out`` ends with.

    Raises:
        ValueError: an unknown format or reward mode, or SFT filters given for ``rl``.
        CoworkError: a source that does not load (``file:line``), an output kind the
            format cannot take, or Parquet without pyarrow (or, for trl-sft, datasets >= 4.7).
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "rl" and (max_turns is not None or min_score is not None):
        raise ValueError("--max-turns and --min-score curate SFT data; an rl export keeps every graded episode "
                         "(filtering by score would bias the policy gradient)")
    out = Path(out)
    kind = _output_kind(out, as_format, fmt)
    records = pooled_records(source)
    if fmt == "rl":
        rows, report = rl_examples(records, reward)
    else:
        rows, report = sft_examples(records, fmt, curate=curate, max_turns=max_turns, min_score=min_score)
    report.out = str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        if kind == "jsonl":
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.writelines(json.dumps(row) + "\n" for row in rows)
        elif fmt == "rl":
            write_rl_parquet(rows, tmp, turn=reward == "turn")
        else:
            write_trl_parquet(rows, tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("export %s: kept %d of %d episodes -> %s", fmt, report.kept, report.total, out)
    return report


def _output_kind(out: Path, as_format: str | None, fmt: str) -> str:
    kind = as_format or {".jsonl": "jsonl", ".parquet": "parquet"}.get(out.suffix.lower())
    if kind not in ("jsonl", "parquet"):
        raise CoworkError(f"{out}: say which file to write: end the name in .jsonl or .parquet, or pass --as "
                          "jsonl|parquet")
    if fmt == "openai-sft" and kind != "jsonl":
        raise CoworkError(f"{out}: OpenAI fine-tuning takes JSONL only; write a .jsonl file")
    return kind


__all__ = ["FORMATS", "export"]
