"""A LangGraph graph whose long-term memory lives in your database (runs offline, no model).

Two nodes: ``remember`` keeps what the user says they like as an item of the namespace
("preferences", <user id>); ``answer`` searches that namespace (ranked by the words of the
question) and replies from what it finds. Each user's preferences are one dbmemory store
(``shared:lg.preferences.<user id>``), each item a JSON file, capped and audited like any file.

Run:  python examples/langgraph_store.py
Uses DBMEMORY_URL when set (e.g. postgresql://user@host/db; run `dbmemory db upgrade` first, or
let store.setup() do it), else a SQLite file in a temporary folder.
Needs: pip install -e ".[langgraph]" (from a clone, as the README installs)
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from dbmemory.db.engine import create_engine
from dbmemory.integrations.langgraph import DbMemoryStore


class State(TypedDict):
    user_id: str
    message: str
    reply: str


def remember(state: State, *, store: BaseStore) -> dict:
    """Keep "I like X" as an item; a real graph would ask a model here."""
    namespace = ("preferences", state["user_id"])
    for thing in re.findall(r"\bI like ([\w ]+?)(?:[.,!]|$)", state["message"]):
        store.put(namespace, thing.strip().lower(), {"likes": thing.strip()})
    return {}


def answer(state: State, *, store: BaseStore) -> dict:
    found = store.search(("preferences", state["user_id"]), query=state["message"], limit=3)
    if not found:
        return {"reply": "I don't know your tastes yet."}
    return {"reply": "You like " + ", ".join(item.value["likes"] for item in found) + "."}


def build(store: BaseStore):
    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_node("answer", answer)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "answer")
    graph.add_edge("answer", END)
    return graph.compile(store=store)


def main() -> None:
    url = os.environ.get("DBMEMORY_URL") or f"sqlite:///{tempfile.mkdtemp()}/langgraph.db"
    engine = create_engine(url)
    store = DbMemoryStore(engine)  # each batch commits; pass a Connection to join your transaction
    store.setup()  # dbmemory's schema, once
    app = build(store)
    for message in ["I like green tea.", "I like hiking, I like jazz!", "Which tea do I like?"]:
        result = app.invoke({"user_id": "u-42", "message": message, "reply": ""})
        print(f"user: {message}\nbot:  {result['reply']}")
    print("namespaces:", store.list_namespaces())
    engine.dispose()


if __name__ == "__main__":
    main()
