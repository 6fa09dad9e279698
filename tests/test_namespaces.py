"""The public packages show only their API in ``dir()``: no helper names they import."""

from __future__ import annotations

import importlib

import pytest

PUBLIC_PACKAGES = (
    "dbmemory",
    "dbmemory.agent",
    "dbmemory.agent.eval",
    "dbmemory.integrations.langgraph",
    "dbmemory.items",
    "dbmemory.profile",
    "dbmemory.tool",
)


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_dir_of_a_public_package_lists_its_api_only(name: str) -> None:
    module = importlib.import_module(name)
    shown = set(dir(module))
    assert shown == set(module.__all__), sorted(shown ^ set(module.__all__))
    for helper in ("Any", "TYPE_CHECKING", "annotations", "importlib"):
        assert helper not in shown


def test_dir_of_dbmemory_has_no_helper_even_after_every_lazy_name_is_used() -> None:
    import dbmemory

    for name in dbmemory.__all__:
        getattr(dbmemory, name)
    assert set(dir(dbmemory)) == set(dbmemory.__all__)
    with pytest.raises(AttributeError):
        dbmemory.Any  # noqa: B018 - the helper name is gone from the namespace


def test_dir_of_integrations_names_the_modules_to_import() -> None:
    integrations = importlib.import_module("dbmemory.integrations")
    assert dir(integrations) == ["anthropic_tool", "langgraph", "mcp_server"]
    for name in dir(integrations):
        importlib.import_module(f"dbmemory.integrations.{name}")


def test_dbmemory_items_exports_the_extraction_and_the_selection() -> None:
    from dbmemory import items
    from dbmemory.items.extract import extract_items
    from dbmemory.items.select import Selection, select_items

    assert items.extract_items is extract_items and items.select_items is select_items
    assert items.Selection is Selection
    chosen = items.select_items([], "anything")
    assert chosen.mode == "none" and chosen.items == ()


def test_rank_items_scores_every_item_at_any_count() -> None:
    pytest.importorskip("bm25s")
    from dbmemory.items import Item, rank_items

    fields = {f: None for f in Item.__dataclass_fields__}

    def item(n: int, text: str) -> Item:
        return Item(**{**fields, "item_id": n, "text": text})  # type: ignore[arg-type]

    tea, bike, cat = item(1, "User likes green tea"), item(2, "User rides a bike to work"), item(3, "User has a cat")
    ranked = rank_items([tea, bike, cat], "which tea does the user like")
    assert [i.item_id for i, _ in ranked][0] == 1 and len(ranked) == 3  # 3 items, far under 20
    assert ranked[0][1] > 0 and all(isinstance(score, float) for _, score in ranked)
    assert [i.item_id for i, _ in rank_items([tea, bike, cat], "bike", limit=1)] == [2]
    assert rank_items([], "x") == []
    with pytest.raises(Exception, match="limit"):
        rank_items([tea], "x", limit=0)
    scored = rank_items([tea, bike], "q", embedding_model="fake", embed=lambda m, t, timeout=None: [[1, 0], [0, 1], [1, 0]])
    assert [i.item_id for i, _ in scored] == [2, 1] and scored[0][1] == pytest.approx(1.0)
