"""Statements of the bounded directory listing (the MEMORY tool's ``view`` of a directory,
issue 19): an ordered, limited read of ``(path, size)`` rows from the prefix index
``ix_dbm_files_prefix`` (:class:`~dbmemory.db.dialect.types.PathKey`, binary order on every
backend), the size and file count of one subtree, a capped count of a range, and the store's
counters. Executed by :mod:`dbmemory.store.listing`.

Ranges are bounds on the indexed key (the first
:data:`~dbmemory.db.dialect.types.PATH_KEY_CHARS` characters of the path), given as
``:p_lo`` / ``:p_hi``; a path longer than the key is placed exactly by the executor (it
re-reads every row whose key ties at a batch's end, and :data:`SELECT_SUBTREE` also carries
the exact ``SUBSTR`` test), so no row is counted twice or missed.

Pure: nothing here touches a connection."""

from __future__ import annotations

import sqlalchemy as sa

from dbmemory.db.dialect.types import PathKey
from dbmemory.db.schema import files, stores
from dbmemory.store.statements.reads import bp, under_prefix

__all__ = [
    "SELECT_WALK",
    "SELECT_WALK_BY_KEY",
    "SELECT_WALK_TIE",
    "SELECT_SUBTREE",
    "SELECT_RANGE_CAPPED",
    "SELECT_STORE_TOTALS",
]

_KEY = PathKey(files.c.file_path)
_LO = bp("p_lo", type_=sa.String())
_HI = bp("p_hi", type_=sa.String())
_MINE = files.c.store_id == bp("p_sid")

SELECT_WALK = (
    sa.select(files.c.file_path, files.c.char_count)
    .where(_MINE, _KEY >= _LO, _KEY < _HI)
    .order_by(_KEY)
    .limit(bp("p_n", type_=sa.Integer()))
)
"""At most ``:p_n`` files (path, size) of store ``:p_sid`` with ``:p_lo <= key <
:p_hi``, in key order (an index range scan that stops at the limit)."""

SELECT_WALK_BY_KEY = (
    sa.select(files.c.file_path, files.c.char_count, files.c.store_id)
    .where(
        files.c.store_id
        == sa.select(stores.c.store_id).where(stores.c.store_key == bp("p_key")).scalar_subquery(),
        _KEY >= _LO,
        _KEY < _HI,
    )
    .order_by(_KEY)
    .limit(bp("p_n", type_=sa.Integer()))
)
""":data:`SELECT_WALK` of the store ``:p_key`` (its id as a scalar subquery), with the store id
as a third column: a view's first read, one round trip, also before the store id is known."""

SELECT_WALK_TIE = sa.select(files.c.file_path, files.c.char_count).where(
    _MINE, _KEY == bp("p_key", type_=sa.String())
)
"""Every file of store ``:p_sid`` whose key is ``:p_key`` (paths longer than the key that share
it, which a limited walk could cut in two)."""

SELECT_SUBTREE = sa.select(
    sa.func.count(), sa.func.coalesce(sa.func.sum(files.c.char_count), 0)
).where(_MINE, _KEY >= _LO, _KEY <= _HI, under_prefix())
"""``(files, characters)`` under the directory of :func:`~dbmemory.store.statements.reads.prefix_params`,
read from the index range ``:p_lo <= key <= :p_hi`` (the prefix and the prefix's successor,
cut to the key's length)."""

SELECT_RANGE_CAPPED = sa.select(sa.func.count()).select_from(
    sa.select(files.c.store_id)
    .where(_MINE, _KEY >= _LO, _KEY < _HI)
    .limit(bp("p_n", type_=sa.Integer()))
    .subquery("capped")
)
"""How many files of ``:p_sid`` lie in the key range, counting at most ``:p_n`` of them."""

SELECT_STORE_TOTALS = sa.select(stores.c.store_id, stores.c.file_count, stores.c.total_chars).where(
    stores.c.store_id == bp("p_sid")
)
"""The store's id and counters (files, characters: kept exact by every writer)."""
