"""``profile import`` and ``profile export`` refuse what would lose or mix profiles (issue 8, section 7).

Trees are built under ``tmp_path``; the database is every backend of the ``engine`` fixture.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from _profile_fakes import body_with, user_settings_table
from dbmemory.profile import read_profile, write_profile
from dbmemory.profile.format import parse_profile, read_frontmatter_strict
from dbmemory.profile.transfer import (
    export_profiles,
    folder_name_for,
    import_profiles,
    list_profile_user_ids,
)

FULL = body_with({"Identity": ["Name: Dana"], "Skills & Expertise": ["SQL"]})


@pytest.fixture
def db(engine: Engine) -> Iterator[Engine]:
    with user_settings_table(engine):
        yield engine


def _put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _profile_file(tree: Path, folder_id: str) -> Path:
    return tree / f"home-{folder_id}" / "user-memory" / "memory.md"


def _stored(engine: Engine, user_id: str) -> str | None:
    with engine.begin() as conn:
        record = read_profile(conn, user_id)
    return None if record is None else record.text


def _import(engine: Engine, tree: Path):
    with engine.begin() as conn:
        return import_profiles(conn, tree)


def _skip_reason(report, path: Path) -> str:
    reasons = [why for item, why in report.skipped if item == str(path)]
    assert reasons, report.skipped
    return reasons[0]


# ----------------------------------------------------------------------------- import


def test_import_never_follows_a_symbolic_link_out_of_the_folder(db: Engine, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    secret = _put(outside / "user-memory" / "memory.md", '---\nuser_id: "eve"\n---\n' + FULL)
    tree = tmp_path / "tree"
    tree.mkdir()
    os.symlink(outside, tree / "home-eve")  # a folder link out of the tree
    linked_file = _profile_file(tree, "mallory")
    linked_file.parent.mkdir(parents=True)
    os.symlink(secret, linked_file)  # a file link out of the tree
    inside = _put(tree / "shared" / "ann.md", '---\nuser_id: "ann"\n---\n' + FULL)
    ann = _profile_file(tree, "ann")
    ann.parent.mkdir(parents=True)
    os.symlink(inside, ann)  # a link that stays inside the tree is fine
    report = _import(db, tree)
    assert report.done == ["ann"]
    for path in (_profile_file(tree, "eve"), linked_file):
        assert "symbolic link" in _skip_reason(report, path)
    assert _stored(db, "eve") is None and _stored(db, "mallory") is None


@pytest.mark.parametrize(
    "frontmatter",
    [
        '---\nuser_id: [not closed\n---\n',
        '---\nuser_id: "victim"\nturn_count: 3\n',  # never closed
        "---\n- a\n- list\n---\n",
        '---\nuser_id: ""\n---\n',
        "---\nuser_id: {a: 1}\n---\n",
    ],
    ids=["bad-yaml", "not-closed", "not-a-mapping", "empty-user-id", "user-id-not-text"],
)
def test_a_broken_frontmatter_is_refused_and_the_folder_name_is_not_used(
    db: Engine, tmp_path: Path, frontmatter: str
) -> None:
    tree = tmp_path / "tree"
    path = _put(_profile_file(tree, "victim"), frontmatter + FULL)
    report = _import(db, tree)
    assert report.done == []
    reason = _skip_reason(report, path)
    assert "frontmatter" in reason and "folder name" in reason
    assert _stored(db, "victim") is None


def test_a_file_without_frontmatter_still_takes_the_folder_name(db: Engine, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    _put(_profile_file(tree, "u-1"), FULL)
    assert _import(db, tree).done == ["u-1"]
    assert parse_profile(_stored(db, "u-1") or "").user_id == "u-1"


@pytest.mark.parametrize(
    "text",
    ["", "just some notes about Dana\n", '---\nuser_id: "u-1"\n---\n', "Intro line\n" + FULL],
    ids=["empty-file", "no-headings", "frontmatter-only", "text-before-the-sections"],
)
def test_import_never_replaces_a_profile_with_an_empty_one(db: Engine, tmp_path: Path, text: str) -> None:
    with db.begin() as conn:
        before = write_profile(conn, "u-1", FULL, expected_version=0).text
    tree = tmp_path / "tree"
    path = _put(_profile_file(tree, "u-1"), text)
    report = _import(db, tree)
    assert report.done == []
    assert "section" in _skip_reason(report, path)
    assert _stored(db, "u-1") == before


# ----------------------------------------------------------------------------- export


def _seed(engine: Engine, *user_ids: str) -> None:
    with engine.begin() as conn:
        for user_id in user_ids:
            write_profile(conn, user_id, f'---\nuser_id: "{user_id}"\n---\n' + FULL, expected_version=0)


def test_ids_that_differ_only_in_case_are_never_exported_to_one_folder(db: Engine, tmp_path: Path) -> None:
    _seed(db, "Ann", "ann", "bob")
    out = tmp_path / "out"
    with db.begin() as conn:
        report = export_profiles(conn, out)
    assert report.done == [str(_profile_file(out, "bob"))]
    skipped = dict(report.skipped)
    assert set(skipped) == {"Ann", "ann"}
    assert "case" in skipped["Ann"] and "--user" in skipped["Ann"]
    assert not (out / "home-Ann").exists() and not (out / "home-ann").exists()
    # one at a time, into folders of their own, they export
    with db.begin() as conn:
        assert export_profiles(conn, tmp_path / "one", user_ids=["Ann"]).done
        assert export_profiles(conn, tmp_path / "two", user_ids=["ann"]).done


def test_an_id_that_looks_like_another_ids_encoding_gets_its_own_folder(db: Engine, tmp_path: Path) -> None:
    # "J_C3_BCrgen" is the store-key encoding of "Jürgen": the folder names must still differ
    _seed(db, "Jürgen", "J_C3_BCrgen", "first_last")
    assert len({folder_name_for(u) for u in ("Jürgen", "J_C3_BCrgen")}) == 2
    out = tmp_path / "out"
    with db.begin() as conn:
        report = export_profiles(conn, out)
        assert sorted(list_profile_user_ids(conn)) == sorted(["Jürgen", "J_C3_BCrgen", "first_last"])
    assert len(report.done) == 3 and report.skipped == []
    owners = {read_frontmatter_strict(Path(p).read_text(encoding="utf-8"))["user_id"] for p in report.done}
    assert owners == {"Jürgen", "J_C3_BCrgen", "first_last"}
    # and the export imports back, each profile to its own user
    with db.begin() as conn:
        back = import_profiles(conn, out)
    assert sorted(back.done) == sorted(["Jürgen", "J_C3_BCrgen", "first_last"]) and back.skipped == []


def test_export_never_overwrites_another_users_profile_or_follows_a_link_out(db: Engine, tmp_path: Path) -> None:
    _seed(db, "bob", "carol")
    out = tmp_path / "out"
    theirs = _put(_profile_file(out, "bob"), '---\nuser_id: "mallory"\n---\n' + FULL)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "home-carol")
    with db.begin() as conn:
        report = export_profiles(conn, out)
    skipped = dict(report.skipped)
    assert "mallory" in skipped["bob"]
    assert "symbolic link" in skipped["carol"]
    assert read_frontmatter_strict(theirs.read_text(encoding="utf-8"))["user_id"] == "mallory"
    assert list(elsewhere.iterdir()) == []
    # exporting the same user again into its own folder is fine
    with db.begin() as conn:
        again = export_profiles(conn, tmp_path / "fresh", user_ids=["bob"])
        twice = export_profiles(conn, tmp_path / "fresh", user_ids=["bob"])
    assert again.done == twice.done and twice.skipped == []
