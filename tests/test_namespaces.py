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
