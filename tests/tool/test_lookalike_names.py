"""Look-alike names on every backend (issue 21): the ten spellings of ``/memories/prefs.md``
that once made ten files leave one file, through the MEMORY tool and the Python file API; a
rename onto a look-alike is refused and loses nothing."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.engine import Connection

from dbmemory.errors import InvalidPathError
from dbmemory.store import files
from dbmemory.store.locks import get_or_create_store
from dbmemory.store.reads import list_files

Run = Callable[..., str]

SPELLINGS = [
    "/memories/prefs.md",
    "/memories/\uff50refs.md",  # fullwidth p
    "/memories/\uff50\uff52\uff45\uff46\uff53\uff0e\uff4d\uff44",  # fullwidth name
    "/memories/\U0001d429refs.md",  # mathematical bold p
    "/memories/\U0001d429\U0001d42b\U0001d41e\U0001d41f\U0001d42c.md",
    "/memories/prefs\u2024md",  # one-dot leader
    "/memories/\u0440refs.md",  # Cyrillic er
    "/memories/pr\u0435fs.md",  # Cyrillic ie
    "/memories/pref\u0455.md",  # Cyrillic dze
    "/memories/prefs.\u0307md",  # a combining dot on the dot
]


def test_ten_look_alike_spellings_leave_one_file_through_the_tool(conn: Connection, run: Run) -> None:
    answers = [run("create", path=p, file_text=f"v{n}") for n, p in enumerate(SPELLINGS)]
    assert answers[0].startswith("File created")
    refused = [a for a in answers if "looks like" in a or "mixes the scripts" in a
               or "combining mark" in a]
    existing = [a for a in answers if "already exists" in a]
    assert len(refused) == 4 and len(existing) == 5, answers
    listing = run("view", path="/memories")
    assert listing.count("prefs.md") == 1, listing
    assert run("view", path="/memories/\uff50refs.md") == run("view", path="/memories/prefs.md")
    assert "v0" in run("view", path="/memories/prefs.md")


def test_the_file_api_folds_or_refuses_the_same_spellings(conn: Connection) -> None:
    sid = get_or_create_store(conn, "shared:LOOK", scope="shared", store_code="LOOK")
    outcomes = []
    for n, path in enumerate(SPELLINGS):
        try:
            files.put_file(conn, sid, path, f"v{n}")
            outcomes.append("written")
        except InvalidPathError:
            outcomes.append("refused")
    assert outcomes.count("refused") == 4
    assert [f.path for f in list_files(conn, sid)] == ["/memories/prefs.md"]


def test_a_rename_onto_a_look_alike_is_refused_and_loses_nothing(conn: Connection, run: Run) -> None:
    assert run("create", path="/memories/notes.md", file_text="keep").startswith("File created")
    answer = run("rename", old_path="/memories/notes.md", new_path="/memories/n\u043etes.md")
    assert "mixes the scripts Cyrillic and Latin" in answer
    assert "keep" in run("view", path="/memories/notes.md")
