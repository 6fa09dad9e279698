"""Moving trees of text files in and out of a store: ``dbmemory.store.trees`` and
``dbmemory files import/export``, on every backend."""

from __future__ import annotations

import json
import os
import stat
import unicodedata
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

from dbmemory.cli import app
from dbmemory.core.model import StoreRef
from dbmemory.errors import DbMemoryError, InvalidArgumentError
from dbmemory.store.agents import set_store_caps
from dbmemory.store.files import create_file
from dbmemory.store.locks import find_store_id
from dbmemory.store.reads import get_file, list_files
from dbmemory.store.resolve import shared_store
from dbmemory.store.trees import export_tree, import_tree, scan_tree

KEY = "shared:TREES"


def store() -> StoreRef:
    return shared_store("TREES")


def contents(engine: Engine, key: str = KEY) -> dict[str, str]:
    with engine.connect() as conn:
        store_id = find_store_id(conn, key)
        if store_id is None:
            return {}
        return {f.path: get_file(conn, store_id, f.path).text for f in list_files(conn, store_id)}


def write(root: Path, files: dict[str, bytes]) -> Path:
    for relative, data in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


TREE = {
    "notes.md": b"Line 1\r\nLine 2\r\n",
    "prefs/tea.md": "I prefer tea \u2014 caf\u00e9 no.\n".encode(),
    "bom.md": b"\xef\xbb\xbfwith a BOM",
    "empty.md": b"",
    ".hidden/x.md": b"hidden files travel too",
}
EXPECTED = {"/memories/" + k: v.decode("utf-8") for k, v in TREE.items()}


def test_a_plain_tree_maps_onto_memories(engine: Engine, tmp_path: Path) -> None:
    write(tmp_path / "src", TREE)
    with engine.begin() as conn:
        report = import_tree(conn, store(), tmp_path / "src", actor="test")
    assert sorted(report.created) == sorted(EXPECTED) and report.skipped == []
    assert contents(engine) == EXPECTED


def test_an_sdk_base_directory_maps_its_memories_directory(engine: Engine, tmp_path: Path) -> None:
    write(tmp_path / "base" / "memories", TREE)
    write(tmp_path / "base", {"stray.txt": b"beside memories"})
    with engine.begin() as conn:
        report = import_tree(conn, store(), tmp_path / "base")
    assert contents(engine) == EXPECTED
    assert [(s.source.endswith("stray.txt"), "outside the memories directory" in s.reason) for s in report.skipped] == [
        (True, True)
    ]


def test_export_then_import_round_trips_bytes_and_suits_the_sdk_tool(engine: Engine, tmp_path: Path) -> None:
    write(tmp_path / "src", TREE)
    with engine.begin() as conn:
        import_tree(conn, store(), tmp_path / "src")
    with engine.connect() as conn:
        report = export_tree(conn, find_store_id(conn, KEY), tmp_path / "out")
    assert len(report.written) == len(TREE)
    for relative, data in TREE.items():
        exported = tmp_path / "out" / "memories" / relative
        assert exported.read_bytes() == data
        assert stat.S_IMODE(exported.stat().st_mode) == 0o600
    with engine.begin() as conn:
        again = import_tree(conn, store(), tmp_path / "out")
    assert sorted(again.unchanged) == sorted(EXPECTED) and again.created == again.skipped == []
    anthropic = pytest.importorskip("anthropic.tools.memory")
    sdk = anthropic.BetaLocalFilesystemMemoryTool(str(tmp_path / "out"))
    assert sdk.call({"command": "view", "path": "/memories/notes.md"}).endswith("     2\tLine 2\r\n     3\t")


def test_symlinks_non_utf8_nul_and_bad_names_are_refused_with_a_line_each(engine: Engine, tmp_path: Path) -> None:
    src = write(tmp_path / "src", {"good.md": b"ok", "latin1.md": b"caf\xe9", "nul.md": b"a\x00b", "zw\u200b.md": b"x"})
    os.symlink(src / "good.md", src / "link.md")
    os.symlink(tmp_path, src / "linkdir")
    os.mkfifo(src / "fifo")
    with engine.begin() as conn:
        report = import_tree(conn, store(), src)
    reasons = {Path(s.source).name: s.reason for s in report.skipped}
    assert set(reasons) == {"latin1.md", "nul.md", "zw\u200b.md", "link.md", "linkdir", "fifo"}
    assert "not UTF-8" in reasons["latin1.md"] and "bad byte at offset 3" in reasons["latin1.md"]
    assert "NUL" in reasons["nul.md"] and "U+200B" in reasons["zw\u200b.md"]
    assert "symbolic link" in reasons["link.md"] and "symbolic link" in reasons["linkdir"]
    assert "not a regular file" in reasons["fifo"]
    assert contents(engine) == {"/memories/good.md": "ok"}


def test_two_local_names_for_one_store_path_are_both_refused(tmp_path: Path) -> None:
    nfc, nfd = unicodedata.normalize("NFC", "caf\u00e9.md"), unicodedata.normalize("NFD", "caf\u00e9.md")
    write(tmp_path, {nfc: b"one", nfd: b"two", "other.md": b"x"})
    found, refused, _root = scan_tree(tmp_path)
    assert [f.path for f in found] == ["/memories/other.md"]
    assert len(refused) == 2 and all("2 local files map onto /memories/caf\u00e9.md" in r.reason for r in refused)


def test_caps_skip_the_files_that_break_them_and_keep_the_rest(engine: Engine, tmp_path: Path) -> None:
    with engine.begin() as conn:
        set_store_caps(conn, store(), max_files=2, max_file_chars=10)
    write(tmp_path, {"a.md": b"a", "b.md": b"x" * 11, "c.md": b"c", "d.md": b"d"})
    with engine.begin() as conn:
        report = import_tree(conn, store(), tmp_path)
    assert report.created == ["/memories/a.md", "/memories/c.md"]
    assert [(Path(s.source).name, s.path) for s in report.skipped] == [("b.md", "/memories/b.md"), ("d.md", "/memories/d.md")]
    assert contents(engine) == {"/memories/a.md": "a", "/memories/c.md": "c"}


def test_existing_files_are_kept_unless_replace_and_shapes_are_checked(engine: Engine, tmp_path: Path) -> None:
    with engine.begin() as conn:
        create_file(conn, store(), "/memories/same.md", "same")
        create_file(conn, store(), "/memories/other.md", "old")
        create_file(conn, store(), "/memories/f", "a file")
    write(tmp_path, {"same.md": b"same", "other.md": b"new", "f/under.md": b"x"})
    with engine.begin() as conn:
        report = import_tree(conn, store(), tmp_path)
    assert report.unchanged == ["/memories/same.md"] and report.created == report.replaced == []
    assert {s.path for s in report.skipped} == {"/memories/other.md", "/memories/f/under.md"}
    with engine.begin() as conn:
        report = import_tree(conn, store(), tmp_path, replace=True)
    assert report.replaced == ["/memories/other.md"]
    assert contents(engine)["/memories/other.md"] == "new"


def test_an_import_is_one_transaction_of_the_caller(engine: Engine, tmp_path: Path) -> None:
    write(tmp_path, {"a.md": b"a", "b.md": b"b", "c.md": b"c"})
    with engine.connect() as conn:
        conn.begin()
        import_tree(conn, store(), tmp_path)
        conn.rollback()
    assert contents(engine) == {}

    def interrupt(source: str) -> None:
        if source.endswith("b.md"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), engine.begin() as conn:
        import_tree(conn, store(), tmp_path, on_file=interrupt)
    assert contents(engine) == {}


def test_export_refuses_to_replace_without_force_and_never_writes_through_a_link(
    engine: Engine, tmp_path: Path
) -> None:
    with engine.begin() as conn:
        create_file(conn, store(), "/memories/a.md", "store text")
        create_file(conn, store(), "/memories/d/b.md", "b")
    out = write(tmp_path / "out" / "memories", {"a.md": b"local text"}).parent
    with engine.connect() as conn:
        store_id = find_store_id(conn, KEY)
        with pytest.raises(DbMemoryError, match="would be replaced") as refused:
            export_tree(conn, store_id, out)
        assert refused.value.code == "would_overwrite"
        assert not (out / "memories" / "d").exists()
        report = export_tree(conn, store_id, out, force=True)
        assert (out / "memories" / "a.md").read_text() == "store text" and len(report.written) == 2
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (out / "memories" / "d" / "b.md").unlink()
        (out / "memories" / "d").rmdir()
        os.symlink(elsewhere, out / "memories" / "d")
        report = export_tree(conn, store_id, out, force=True)
        assert [s.path for s in report.skipped] == ["/memories/d/b.md"] and os.listdir(elsewhere) == []
        os.symlink(elsewhere, tmp_path / "linked")
        with pytest.raises(InvalidArgumentError, match="symbolic link"):
            export_tree(conn, store_id, tmp_path / "linked")


# -- the CLI -----------------------------------------------------------------------------------


@pytest.fixture
def cli_url(engine: Engine, backend_name: str) -> str:
    if backend_name == "sqlite-memory":
        pytest.skip("the CLI opens its own engine: an in-memory database is not shared")
    return engine.url.render_as_string(hide_password=False)


def cli(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["files", *args, "--url", url], prog_name="dbmemory")
    return result.exit_code, result.stdout + result.stderr


def test_cli_import_dry_run_import_and_export(engine: Engine, cli_url: str, tmp_path: Path) -> None:
    src = write(tmp_path / "src", {"a.md": b"alpha", "sub/b.md": b"beta", "bad.md": b"\xff"})
    code, out = cli(cli_url, "import", str(src), "--store", KEY, "--dry-run")
    assert code == 1 and "skipped" in out and "bad.md: not UTF-8 text" in out and "nothing written" in out
    assert contents(engine) == {}
    code, out = cli(cli_url, "import", str(src), "--store", KEY, "--json")
    data = json.loads(out[: out.rindex("}") + 1])
    assert code == 1 and data["created"] == ["/memories/a.md", "/memories/sub/b.md"] and data["dry_run"] is False
    assert [Path(s["source"]).name for s in data["skipped"]] == ["bad.md"]
    assert contents(engine) == {"/memories/a.md": "alpha", "/memories/sub/b.md": "beta"}
    (src / "bad.md").unlink()
    code, out = cli(cli_url, "import", str(src), "--store", KEY)
    assert code == 0 and "Imported 0 files" in out and "2 unchanged" in out
    code, out = cli(cli_url, "export", str(tmp_path / "out"), "--store", KEY)
    assert code == 0 and "Exported 2 files" in out
    assert (tmp_path / "out" / "memories" / "sub" / "b.md").read_bytes() == b"beta"
    (tmp_path / "out" / "memories" / "a.md").write_bytes(b"changed locally")
    code, out = cli(cli_url, "export", str(tmp_path / "out"), "--store", KEY)
    assert code == 1 and "would be replaced" in out
    code, out = cli(cli_url, "export", str(tmp_path / "out"), "--store", KEY, "--force", "--json")
    assert code == 0 and json.loads(out)["written"][0].endswith("a.md")
    code, out = cli(cli_url, "export", str(tmp_path / "x"), "--store", "shared:NONE")
    assert code == 1 and "no store has the key" in out
