"""The path rule of ``run_command`` (``_tool_path`` of the in-database API) against Python's
:func:`~dbmemory.core.paths.normalize_path` with the MEMORY tool's message, path by path: the
look-alike spellings of rule 5 (NFKC fold) and rule 11 (:mod:`dbmemory.core.lookalikes`) give
the same key or the same error text, byte for byte, on PostgreSQL and MariaDB."""

from __future__ import annotations

import random

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dbmemory.core.paths import normalize_path
from dbmemory.errors import InvalidPathError
from dbmemory.sqlgen.api_common import API_NAME
from dbmemory.tool.messages import ERROR_MARKER
from sql_api_client import SqlApi

LOOKALIKES = [
    # rule 5: compatibility characters fold into their plain forms, separators are refused
    "\uff50\uff52\uff45\uff46\uff53.md", "\U0001d429refs.md", "\ufb01le.md", "prefs\u2024md", "\u2025",
    "\u2024", "a\u2100c.md", "50\uff05.md", "\u00bd.md", "x\u00b2.md", "\u2460.md", "\u3392.md",
    "\u00a8a.md", "a\u00a8.md", "\u00b4", "\u1e9b\u0323.md", "\u2026.md", "\uff21\u0301.md", "\u212b.md",
    "\u2126.md", "\uff76\uff9e.md", "\u3131\u314f.md", "\ufe64.md", "\uff0e\uff0e", "a\u2044b.md",
    # rule 11: marks on ASCII, mixed scripts, whole-script confusables
    "x\u0301.md", "prefs.\u0307md", "s\u0308.md", "\u0301a", ".\u0307md", "\u0440refs.md", "\u0440.md",
    "\u0430\u0441\u0435.md", "\u0430\u0441\u0435", "\u0441\u043e\u0440\u0443.md", "\u0391\u0392\u0395.md",
    "\u043f\u0440\u0438\u0432\u0435\u0442.md", "\u0437\u0430\u043c\u0435\u0442\u043a\u0438.md",
    "\u0394\u03b5\u03bb\u03c4\u03b1.md", "\u65e5\u672c\u8a9e\u306e\u30e1\u30e2.md", "\u6f22a.md",
    "k\u0131rm\u0131z\u0131.md", "\u03b1\u0440.md", "\u0430\u0301.md", "\u0435\u0308.md", "e\u0301.md",
    "\u0430b\u0441.md", "\u13a0\u13a1.md", "\ud55c\uae00.md", "\u0661\u0662.md", "a1\u0430.md",
    "\u0410\u0412\u0421-\u0430\u0441\u0435", "\U0001d41a\u0441\u0435.md", "\uff41\u0441\u0435.md",
    "\u0430\u0441\u0435/x.md", "dir/\u0440refs/a.md", "\u0456\u0455.md", "\u04cf.md", "\u0261.md",
    # rule 5: a fold that completes a percent-escape is refused (it would decode next time)
    "%a\ufb01", "%\uff41f.md", "%2\U0001d41e.md", "%%\uff12\uff45", "%\uff47g.md",
]


def sample_paths(seed: int, count: int) -> list[str]:
    """``count`` random paths built from the look-alike spellings above and plain names."""
    rng = random.Random(seed)
    plain = ["a", "notes", "md", ".", "-", "_", "1", " ", "\u00e9", "\u0301", "%41", "\u0440", "\u0430"]
    pieces = [p for name in LOOKALIKES for p in (name, name[:2], name[-3:])] + plain
    paths = ["/memories/" + name for name in LOOKALIKES]
    while len(paths) < count:
        segments = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 3)))
                    for _ in range(rng.randint(1, 3))]
        paths.append(("/memories/" if rng.random() < 0.95 else "/other/") + "/".join(segments))
    return paths


def _python(raw: str) -> str:
    try:
        return normalize_path(raw)
    except InvalidPathError as exc:
        return ERROR_MARKER + str(exc)


def _sql(engine: Engine, server_name: str, paths: list[str]) -> list[str]:
    out: list[str] = []
    with engine.connect() as conn:
        for raw in paths:
            if server_name == "postgres":
                row = conn.execute(sa.text(f"SELECT path, error FROM {API_NAME}._tool_path(:raw, 'path')"),
                                   {"raw": raw}).one()
                out.append(row.path if row.error is None else row.error)
            else:
                out.append(conn.execute(sa.text(f"SELECT {API_NAME}__tool_path(:raw, 'path')"),
                                        {"raw": raw}).scalar_one())
    return out


@pytest.mark.parametrize("seed", [1])
def test_lookalike_paths_match_python(api: SqlApi, server_engine: Engine, server_name: str, seed: int) -> None:
    if server_name == "oracle":
        pytest.skip("Oracle's API has no run_command")
    paths = sample_paths(seed, 400)
    got = _sql(server_engine, server_name, paths)
    differences = [(raw, _python(raw), answer) for raw, answer in zip(paths, got, strict=True) if answer != _python(raw)]
    assert differences == [], f"{len(differences)} of {len(paths)} paths differ, e.g. {differences[:3]}"
