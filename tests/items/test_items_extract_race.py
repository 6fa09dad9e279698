"""Memory OFF while an extraction's model call runs: nothing may be written after it (found
by the hattack review).

``extract_items`` checked the memory switch in a first transaction, called the model (seconds),
then wrote in another transaction that never looked at the switch again: a user who switched
memory off during the model call got new auto items. The write now locks and re-reads the
switch row (``apply_changes``)."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from dbmemory.items import set_memory_switch
from item_fakes import USER, ItemModel, facts, run, texts


def _during_the_model_call(engine: Engine, action) -> ItemModel:  # type: ignore[no-untyped-def]
    def extract(_prompt: str) -> str:
        with engine.begin() as conn:  # the user acts while the model answers
            action(conn)
        return facts(("User lives in Lisbon", 0.95))

    return ItemModel(extract=extract)


def test_memory_switched_off_during_the_model_call_writes_no_item(engine: Engine) -> None:
    model = _during_the_model_call(engine, lambda c: set_memory_switch(c, USER, False, actor="user"))
    result = run(engine, model)
    assert texts(engine) == []
    assert result.outcome == "disabled"
