"""``dbmemory items``, ``settings``, ``org-memory``, ``audit`` and ``users`` through typer's
CliRunner on a temporary SQLite file (each command opens its own engine)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from dbmemory.cli import app


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{(tmp_path / 'items.db').as_posix()}"
    result = CliRunner().invoke(app, ["db", "upgrade", "--url", url])
    assert result.exit_code == 0, result.output
    return url


def run(url: str, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=input, env={"DBMEMORY_URL": url}, prog_name="dbmemory")


def ok(result: Result) -> Result:
    assert result.exit_code == 0, f"exit {result.exit_code}\n{result.output}"
    return result


def error(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def listing(url: str, user: str = "u-1", *extra: str) -> list[dict[str, object]]:
    return json.loads(ok(run(url, "items", "list", user, "--json", *extra)).stdout)


def test_items_add_list_edit_rm_restore_clear_purge(url: str) -> None:
    assert ok(run(url, "items", "add", "u-1", "User prefers tea")).stdout == (
        "Added item 1 of u-1 (manual, standard)\n"
    )
    ok(run(url, "items", "add", "u-1", "On leave until May", "--class", "temporary"))
    ok(run(url, "items", "add", "u-1", "Org-only fact", "--org", "acme"))
    assert [(i["item_id"], i["retention_class"], i["is_auto"]) for i in listing(url)] == [
        (1, "standard", False), (2, "temporary", False),
    ]
    table = ok(run(url, "items", "list", "u-1")).stdout
    assert "User prefers tea" in table and "manual" in table and "temporary" in table
    assert [i["text"] for i in listing(url, "u-1", "--org", "acme")] == ["Org-only fact"]
    ok(run(url, "items", "edit", "u-1", "1", "User prefers green tea"))
    assert ok(run(url, "items", "rm", "u-1", "2")).stdout.startswith("Deleted item 2 (restorable")
    assert [i["item_id"] for i in listing(url)] == [1]
    assert [i["item_id"] for i in listing(url, "u-1", "--deleted")] == [1, 2]
    ok(run(url, "items", "restore", "u-1", "2"))
    assert [i["text"] for i in listing(url)] == ["User prefers green tea", "On leave until May"]
    assert "add --yes to confirm" in error(run(url, "items", "clear", "u-1"), 2)
    assert len(listing(url)) == 2
    assert ok(run(url, "items", "clear", "u-1", "--yes")).stdout == (
        "Deleted 2 items of u-1 (restorable until purged)\n"
    )
    assert ok(run(url, "items", "purge")).stdout == "Purged 0 deleted items\n"
    assert json.loads(ok(run(url, "items", "purge", "--user", "u-1", "--now", "--json")).stdout)["purged"] == 2
    assert listing(url, "u-1", "--deleted") == []


def test_item_errors_are_one_line_with_the_rule(url: str) -> None:
    assert "item text is empty" in error(run(url, "items", "add", "u-1", " "), 2)
    assert "retention class 'forever'" in error(run(url, "items", "add", "u-1", "x", "--class", "forever"), 2)
    assert "organisation id 'a b'" in error(run(url, "items", "add", "u-1", "x", "--org", "a b"), 2)
    assert "memory item 9 of user 'u-1'" in error(run(url, "items", "rm", "u-1", "9"), 1)


def test_settings_show_and_set(url: str) -> None:
    shown = json.loads(ok(run(url, "settings", "show", "--json")).stdout)
    assert shown["grace_days"] == 30 and shown["org_id"] == "default"
    assert ok(run(url, "settings", "set", "grace_days", "7", "--org", "acme", "--admin")).stdout == (
        "grace_days = 7 for organisation acme\n"
    )
    assert "changed" in ok(run(url, "settings", "show", "--org", "acme")).stdout
    assert json.loads(ok(run(url, "settings", "show", "--json")).stdout)["grace_days"] == 30
    assert "setting 'nope' is unknown" in error(run(url, "settings", "set", "nope", "1", "--admin"), 2)
    line = error(run(url, "settings", "set", "org_memory_token_budget", "1"), 1)
    assert "only an administrator" in line and "pass --admin" in line
    assert json.loads(ok(run(url, "settings", "show", "--json")).stdout)["org_memory_token_budget"] == 1000


def test_org_memory_edit_needs_admin_and_reads_a_file_or_stdin(url: str, tmp_path: Path) -> None:
    line = error(run(url, "org-memory", "edit", input="ACME sells anvils.\n"), 1)
    assert "only an administrator" in line
    assert "pass --admin" in line  # the CLI's remedy, not the library's is_admin=True
    ok(run(url, "org-memory", "edit", "--admin", input="ACME sells anvils.\n"))
    assert ok(run(url, "org-memory", "show")).stdout == "ACME sells anvils.\n"
    source = tmp_path / "org.md"
    source.write_text("Acme Ltd: be polite.", encoding="utf-8")
    out = ok(run(url, "org-memory", "edit", "--admin", "--from-file", str(source), "--org", "acme")).stdout
    assert out.startswith("Organisation memory of acme: 20 characters")
    assert json.loads(ok(run(url, "org-memory", "show", "--org", "acme", "--json")).stdout)["text"] == (
        "Acme Ltd: be polite."
    )
    ok(run(url, "settings", "set", "org_memory_token_budget", "3", "--admin"))
    assert "budget of organisation 'default' is 3 tokens" in error(
        run(url, "org-memory", "edit", "--admin", input="far too many words for three tokens"), 2
    )


def test_audit_command_filters_and_never_prints_memory_text(url: str) -> None:
    ok(run(url, "items", "add", "u-1", "Secret fact one"))
    ok(run(url, "items", "add", "u-2", "Secret fact two"))
    ok(run(url, "items", "rm", "u-1", "1"))
    events = json.loads(ok(run(url, "audit", "--user", "u-1", "--json")).stdout)
    assert [e["action"] for e in events] == ["item_delete", "item_add"]
    assert [e["user_id"] for e in json.loads(ok(run(url, "audit", "--action", "item_add", "--json")).stdout)] == [
        "u-2", "u-1",
    ]
    assert json.loads(ok(run(url, "audit", "--since", "2999-01-01", "--json")).stdout) == []
    text = ok(run(url, "audit")).stdout
    assert "item_add" in text and "Secret" not in text
    one = ok(run(url, "audit", "--action", "item_delete")).stdout
    assert "1 audit event" in one and "1 audit events" not in one
    assert "is not a date" in error(run(url, "audit", "--since", "yesterday"), 2)


def test_users_export_then_forget(url: str, tmp_path: Path) -> None:
    ok(run(url, "items", "add", "u-1", "Ann likes tea"))
    out = tmp_path / "u-1.json"
    assert ok(run(url, "users", "export", "u-1", "--output", str(out))).stdout == f"Wrote {out} (1 item, 0 stores)\n"
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [i["text"] for i in data["items"]] == ["Ann likes tea"]
    assert json.loads(ok(run(url, "users", "export", "u-1")).stdout)["user_id"] == "u-1"
    assert "add --yes" in error(run(url, "users", "forget", "u-1"), 2)
    assert ok(run(url, "users", "forget", "u-1", "--yes")).stdout == (
        "Forgot u-1: 1 item, 0 stores, 0 switches, 0 episodes deleted; 0 audit events redacted "
        "(file names cleared)\n"
    )
    assert listing(url, "u-1", "--deleted") == []
    events = json.loads(ok(run(url, "audit", "--user", "u-1", "--json")).stdout)
    assert events[0]["action"] == "user_forget"
    assert "Ann likes tea" not in json.dumps(events)


def test_items_list_says_why_it_shows_nothing(url: str, set_clock) -> None:
    ok(run(url, "items", "add", "u-1", "Ann likes tea", "--class", "temporary"))
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=61)
    set_clock(lambda: later)
    text = ok(run(url, "items", "list", "u-1")).stdout
    assert "No memory items for u-1" in text and "1 expired by their retention class" in text
    # the rule, with its setting; no promise of a restore, which an expired item refuses
    assert "temporary items expire 60 days after their last change or use (retention_temporary_days)" in text
    assert "an expired item stays expired" in text and "items restore" not in text
    assert "an expired item stays expired" in error(run(url, "items", "restore", "u-1", "1"), 2)
    assert "expired" in ok(run(url, "items", "list", "u-1", "--deleted")).stdout
    ok(run(url, "items", "add", "u-1", "Ann likes coffee"))
    ok(run(url, "items", "rm", "u-1", "2"))
    text = ok(run(url, "items", "list", "u-1")).stdout
    assert "1 deleted: 'items restore u-1 ID' brings one back until the grace period (30 days) ends" in text
    assert "No memory items for u-9 in organisation default\n" == ok(run(url, "items", "list", "u-9")).stdout


def test_users_memory_switch_and_opt_out_commands(url: str) -> None:
    assert ok(run(url, "users", "memory", "u-1")).stdout == "Memory switch of u-1 (default): on; not opted out\n"
    assert "off" in ok(run(url, "users", "memory", "u-1", "off")).stdout
    state = json.loads(ok(run(url, "users", "memory", "u-1", "--json")).stdout)
    assert state == {"user_id": "u-1", "org_id": "default", "memory_switch": False, "opted_out": False}
    assert "'on' or 'off'" in error(run(url, "users", "memory", "u-1", "maybe"), 2)
    ok(run(url, "users", "memory", "u-1", "on"))
    ok(run(url, "profile", "edit", "u-1", "--text", "## Identity\n- Name: Ann\n"))
    assert "add --yes" in error(run(url, "users", "opt-out", "u-1"), 2)
    assert ok(run(url, "users", "opt-out", "u-1", "--yes")).stdout == "Opted u-1 out; the profile was deleted\n"
    assert json.loads(ok(run(url, "users", "memory", "u-1", "--json")).stdout)["opted_out"] is True
    assert "has no profile" in error(run(url, "profile", "show", "u-1"), 1)
    assert ok(run(url, "users", "opt-in", "u-1")).stdout == "Opted u-1 in: a new profile starts empty\n"
    actions = [e["action"] for e in json.loads(ok(run(url, "audit", "--user", "u-1", "--json")).stdout)]
    assert actions.count("optout_set") == 2 and "Ann" not in json.dumps(actions)
