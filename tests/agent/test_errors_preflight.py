"""Errors a user can act on: the model preflight (missing key, unknown name, refused local
server) before any long work, litellm's errors mapped to one line with a remedy, the remedy
worded for the surface (Python names in exceptions, CLI options on the command line), and
``--model scripted`` wherever a model is taken.

No network: the provider keys are unset with monkeypatch, and a refused local server is a
closed loopback port.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

pytest.importorskip("litellm")

from dbmemory import llm  # noqa: E402
from dbmemory.errors import DbMemoryError, ModelError  # noqa: E402

PROVIDER_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_API_BASE", "DBMEMORY_MODEL")


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_VARS:
        monkeypatch.delenv(name, raising=False)


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _app() -> typer.Typer:
    from dbmemory.cli import app

    return app


@pytest.fixture
def url(tmp_path: Path) -> str:
    from dbmemory.db.engine import create_engine
    from dbmemory.db.migrate import upgrade

    url = f"sqlite:///{(tmp_path / 'preflight.db').as_posix()}"
    engine = create_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


# -- the preflight -----------------------------------------------------------------------------


def test_a_missing_provider_key_is_named_with_both_remedies() -> None:
    with pytest.raises(ModelError) as caught:
        llm.check_model("gpt-4o-mini")
    err = caught.value
    assert err.code == "model_missing_key"
    assert "OPENAI_API_KEY" in err.message and "complete=ScriptedModel()" in err.message
    assert "--model" not in err.message
    assert err.cli_message is not None
    assert "set OPENAI_API_KEY, or pass --model scripted" in err.cli_message
    assert "ScriptedModel" not in err.cli_message


@pytest.mark.parametrize(
    ("model", "variable"),
    [("gpt-4o-mini", "OPENAI_API_KEY"), ("o3-mini", "OPENAI_API_KEY"), ("claude-haiku-4-5", "ANTHROPIC_API_KEY"),
     ("anthropic/claude-3-5-haiku-latest", "ANTHROPIC_API_KEY"), ("gemini/gemini-1.5-flash", "GEMINI_API_KEY")],
)
def test_a_missing_key_of_a_certain_provider_is_refused_before_litellm_is_imported(model: str, variable: str) -> None:
    code = (
        "import os, sys\n"
        f"os.environ.pop({variable!r}, None)\n"
        "from dbmemory import llm\n"
        "try:\n"
        f"    llm.check_model({model!r})\n"
        "except Exception as exc:\n"
        "    print(exc.code, 'litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["model_missing_key", "False"], out.stdout + out.stderr


def test_a_given_key_or_a_set_variable_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    llm.check_model("gpt-4o-mini", api_key="sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    llm.check_model("anthropic/claude-3-5-haiku-latest")


def test_an_unknown_model_name_is_refused_with_the_closest_name() -> None:
    with pytest.raises(ModelError) as caught:
        llm.check_model("gpt-4o-minii")
    assert caught.value.code == "model_unknown"
    assert "did you mean 'gpt-4o-mini'" in caught.value.message


def test_a_refused_local_server_names_the_url_and_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    port = _closed_port()
    monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{port}")
    with pytest.raises(ModelError) as caught:
        llm.check_model("ollama/llama3.1")
    err = caught.value
    assert err.code == "model_unreachable"
    assert f"http://127.0.0.1:{port}" in err.message and "OLLAMA_API_BASE" in err.message
    assert "connection refused" in err.message


def test_an_explicit_loopback_api_base_is_checked_too() -> None:
    port = _closed_port()
    with pytest.raises(ModelError) as caught:
        llm.check_model("openai/my-local-model", api_key="x", api_base=f"http://127.0.0.1:{port}/v1")
    assert caught.value.code == "model_unreachable"


def test_a_test_fake_or_the_scripted_model_is_not_checked() -> None:
    from dbmemory.agent import ScriptedModel

    llm.preflight("gpt-4o-mini", ScriptedModel())  # no key needed
    llm.preflight("gpt-4o-mini", None, model_kwargs={"mock_response": "hi"})
    with pytest.raises(ModelError):
        llm.preflight("gpt-4o-mini", llm.complete)


# -- litellm's errors mapped ----------------------------------------------------------------------


def _litellm_errors() -> list[tuple[BaseException, str]]:
    import litellm

    m, p = "gpt-4o-mini", "openai"
    return [
        (litellm.AuthenticationError("bad key", llm_provider=p, model=m), "model_auth"),
        (litellm.NotFoundError("no such model", model=m, llm_provider=p), "model_unknown"),
        (litellm.RateLimitError("slow down", llm_provider=p, model=m), "model_rate_limit"),
        (litellm.Timeout("too slow", model=m, llm_provider=p), "model_timeout"),
        (litellm.APIConnectionError("refused", llm_provider=p, model=m), "model_unreachable"),
        (litellm.ContextWindowExceededError("too long", model=m, llm_provider=p), "model_context_window"),
        (litellm.BadRequestError("bad param", model=m, llm_provider=p), "model_refused"),
        (litellm.InternalServerError("boom", llm_provider=p, model=m), "model_unavailable"),
    ]


def test_each_litellm_error_class_maps_to_one_line_with_a_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the key is there: an auth error is a bad key
    for exc, code in _litellm_errors():
        mapped = llm.model_error(exc, "gpt-4o-mini")
        assert mapped is not None, type(exc)
        assert mapped.code == code, (type(exc).__name__, mapped.code)
        assert "\n" not in mapped.message and ": " in mapped.message
        assert mapped.cli_message and "\n" not in mapped.cli_message
    assert llm.model_error(ValueError("not litellm's"), "gpt-4o-mini") is None


def test_an_auth_error_without_a_key_says_which_variable_to_set() -> None:
    import litellm

    exc = litellm.InternalServerError("Missing credentials. Please pass an api_key", llm_provider="openai", model="gpt-4o-mini")
    mapped = llm.model_error(exc, "gpt-4o-mini")
    assert mapped is not None and mapped.code == "model_missing_key"
    assert "OPENAI_API_KEY" in mapped.message


def test_complete_raises_a_model_error_chained_to_litellms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    port = _closed_port()
    with pytest.raises(ModelError) as caught:
        llm.complete(
            "gpt-4o-mini", [{"role": "user", "content": "hi"}],
            api_base=f"http://127.0.0.1:{port}/v1", num_retries=0, max_retries=0, timeout=5,
        )
    assert caught.value.code in ("model_unreachable", "model_unavailable")
    assert type(caught.value.__cause__).__module__.startswith("litellm")


# -- run_turn: a DbMemoryError with the Python remedy, before any work --------------------------


def test_run_turn_without_a_key_raises_before_any_model_call(url: str) -> None:
    from dbmemory.agent import run_turn
    from dbmemory.db.engine import create_engine

    engine = create_engine(url)
    try:
        with pytest.raises(DbMemoryError) as caught:
            run_turn(
                engine, agent_code="SUPPORT", user_id="u-1",
                messages=[{"role": "user", "content": "hi"}], model="gpt-4o-mini",
            )
    finally:
        engine.dispose()
    err = caught.value
    assert isinstance(err, ModelError) and err.code == "model_missing_key"
    assert "OPENAI_API_KEY" in str(err) and "ScriptedModel" in str(err)


def test_arun_turn_checks_the_model_the_same_way(url: str) -> None:
    import asyncio

    from dbmemory.agent import arun_turn
    from dbmemory.db.engine import create_engine

    engine = create_engine(url)
    try:
        with pytest.raises(ModelError):
            asyncio.run(
                arun_turn(
                    engine, agent_code="SUPPORT", user_id="u-1",
                    messages=[{"role": "user", "content": "hi"}], model="gpt-4o-mini",
                )
            )
    finally:
        engine.dispose()


# -- the command line: one line naming the flag, before any long work ----------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["replay", "--model", "gpt-4o-mini"],
        ["chat", "--agent", "A", "--user", "u-1", "--model", "gpt-4o-mini"],
        ["profile", "consolidate", "u-1", "--user-text", "hi", "--assistant-text", "hello", "--model", "gpt-4o-mini"],
    ],
    ids=["replay", "chat", "profile-consolidate"],
)
def test_cli_commands_refuse_a_model_without_its_key_in_one_line(url: str, args: list[str]) -> None:
    result = CliRunner().invoke(_app(), [*args, "--url", url], input="/quit\n")
    assert result.exit_code == 1, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: ") and "OPENAI_API_KEY" in line and "--model scripted" in line
    assert "Replaying" not in result.stdout and "Chat with" not in result.stdout


def test_with_json_the_model_error_is_json_with_its_code(url: str) -> None:
    result = CliRunner().invoke(_app(), ["replay", "--model", "gpt-4o-mini", "--json", "--url", url])
    assert result.exit_code == 1
    data: dict[str, Any] = json.loads(result.stdout)
    assert data["error"]["code"] == "model_missing_key"
    assert "--model scripted" in data["error"]["message"]


def test_profile_consolidate_takes_the_scripted_model(url: str) -> None:
    result = CliRunner().invoke(
        _app(),
        ["profile", "consolidate", "u-5", "--user-text", "My name is Ann Lee.", "--assistant-text", "Hi Ann",
         "--model", "scripted", "--json", "--url", url],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["outcome"] in ("updated", "noop", "unchanged"), data
    assert all(not call["error"] for call in data["calls"])


@pytest.mark.parametrize(
    "command",
    [
        ["replay", "conversation.jsonl", "--model", "gpt-4o-mini"],
        ["chat", "--model=anthropic/claude-3-5-haiku-latest"],
        ["eval", "locomo", "locomo10.json", "--model", "gpt-4o-mini"],
    ],
)
def test_the_cli_refuses_a_missing_key_before_it_imports_the_agent_or_litellm(
    command: list[str], tmp_path: Path
) -> None:
    """The refusal answers from the command line alone: neither ``dbmemory.agent`` nor litellm
    is imported (their import is the seconds a cold start spends), and no file is opened."""
    probe = (
        "import sys\n"
        "from dbmemory.cli import main\n"
        f"sys.argv = ['dbmemory', *{command!r}, '--url', 'sqlite:///{tmp_path}/m.db']\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    code = exit.code\n"
        "heavy = sorted(m for m in ('dbmemory.agent', 'litellm') if m in sys.modules)\n"
        "print(code, heavy)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.stdout.strip() == "1 []", (done.stdout, done.stderr)
    assert "needs" in done.stderr and "_API_KEY, which is not set" in done.stderr, done.stderr
    assert not (tmp_path / "m.db").exists()
