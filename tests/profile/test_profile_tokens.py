"""Offline tokenizer: bundled encodings, model mapping, fallback, no network (C12)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbmemory.profile import tokens
from dbmemory.profile.tokens import count_tokens, encoding_name_for_model, estimate_tokens


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Sockets refuse to connect, tiktoken's cache is an empty folder, encodings reload."""

    def refuse(self: socket.socket, address: object) -> None:
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    tokens.reset_cache_for_tests()
    yield
    tokens.reset_cache_for_tests()


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("openai/gpt-4o-mini", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("azure/o3-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-oss-20b", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("anthropic/claude-3-5-haiku-latest", "cl100k_base"),
        ("ollama/llama3.1", "cl100k_base"),
        (None, "cl100k_base"),
    ],
)
def test_encoding_is_picked_from_the_model_name(model: str | None, encoding: str) -> None:
    assert encoding_name_for_model(model) == encoding


def test_counting_works_offline_from_the_bundled_files(no_network: None) -> None:
    text = "Hello world, café 🍕 " * 50
    started = time.monotonic()
    o200k = count_tokens(text, "gpt-4o")
    cl100k = count_tokens(text, "gpt-4")
    assert time.monotonic() - started < 30
    assert tokens.get_encoding("o200k_base") is not None
    assert tokens.get_encoding("cl100k_base") is not None
    assert 0 < o200k < len(text) and 0 < cl100k < len(text)
    assert o200k != estimate_tokens(text)


def test_without_any_encoding_file_the_character_estimate_is_used(
    no_network: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens, "bundled_tokenizer_dir", lambda: None)
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", "")
    monkeypatch.setattr(tokens.tempfile, "gettempdir", lambda: "/nonexistent-dbmemory-test")
    text = "x" * 3001
    assert count_tokens(text, "gpt-4o") == 1001
    assert count_tokens("", "gpt-4o") == 0


def test_a_corrupt_encoding_file_falls_back_without_raising(
    no_network: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "tok"
    fake.mkdir()
    for name in ("o200k_base", "cl100k_base"):
        for path in tokens.candidate_files(name):
            (fake / path.name).write_bytes(b"garbage")
    monkeypatch.setattr(tokens, "bundled_tokenizer_dir", lambda: fake)
    monkeypatch.setattr(tokens.tempfile, "gettempdir", lambda: "/nonexistent-dbmemory-test")
    assert count_tokens("abcdef", "gpt-4o") == 2


def test_special_token_text_is_counted_as_ordinary_text() -> None:
    assert count_tokens("<|endoftext|> and <|endofprompt|>", "gpt-4o") > 2


def test_token_counting_never_imports_litellm_or_changes_the_cache_variable() -> None:
    code = (
        "import os, sys\n"
        "from dbmemory.profile.tokens import count_tokens\n"
        "before = os.environ.get('TIKTOKEN_CACHE_DIR')\n"
        "assert count_tokens('hello world', 'gpt-4o') == 2\n"
        "assert 'litellm' not in sys.modules\n"
        "assert os.environ.get('TIKTOKEN_CACHE_DIR') == before\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse every socket connection except to the local test database servers."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else None
        if self.family == getattr(socket, "AF_UNIX", None) or host in ("127.0.0.1", "::1", "localhost"):
            return real_connect(self, address)
        raise OSError(f"network disabled in this test: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", guarded)


def test_c12_update_of_a_long_profile_stays_within_budget_offline(
    engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from _profile_fakes import FakeModel, body_with, user_settings_table
    from dbmemory.profile import UserMemoryConfig, UserMemoryPostprocessor, load_user_memory
    from dbmemory.profile.budget import TRUNCATION_MARKER
    from dbmemory.profile.store import read_profile, write_profile

    _loopback_only(monkeypatch)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    tokens.reset_cache_for_tests()
    bullets = [f"2026-06-{1 + i % 28:02d} 10:{i % 60:02d} UTC: topic {i} about databases" for i in range(260)]
    long_body = body_with({"Identity": ["Name: Lee"], "Recent Topics": bullets})
    assert len(long_body) >= 10_000
    config = UserMemoryConfig(max_tokens=2000)
    with user_settings_table(engine):
        with engine.begin() as conn:
            write_profile(conn, "lee", long_body, expected_version=0)
        with engine.begin() as conn:
            state = load_user_memory(conn, "lee", config=config, model="gpt-4o")
        assert state.truncated and state.token_count <= 2000
        fake = FakeModel(rewrite=long_body.replace("Name: Lee", "Name: Lee, DBA"), condense="sorry")
        started = time.monotonic()
        result = UserMemoryPostprocessor(
            engine, config, "gpt-4o", "lee", state, complete=fake
        ).run("I am a DBA now", "Noted")
        assert time.monotonic() - started < 60
        assert result.outcome == "updated" and result.truncated
        with engine.begin() as conn:
            stored = read_profile(conn, "lee").text
    assert count_tokens(stored, "gpt-4o") <= 2000
    assert stored.rstrip().endswith(TRUNCATION_MARKER)
    assert "Name: Lee, DBA" in stored
    assert tokens.get_encoding("o200k_base") is not None  # the real tokenizer, not the estimate
    tokens.reset_cache_for_tests()


def test_a_text_counted_again_is_not_encoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from dbmemory.profile import tokens

    encoding = tokens.get_encoding("o200k_base")
    if encoding is None:
        pytest.skip("no offline o200k_base file")
    calls: list[str] = []
    real = type(encoding).encode

    def counting(self: object, text: str, **kwargs: object) -> list[int]:
        calls.append(text)
        return real(self, text, **kwargs)

    monkeypatch.setattr(type(encoding), "encode", counting)
    text = "a profile text counted twice in one turn " * 20
    first = tokens.count_tokens(text, "gpt-4o")
    assert tokens.count_tokens(text, "openai/gpt-4o") == first
    assert calls == [text]
    assert tokens.count_tokens(text + ".", "gpt-4o") >= first and len(calls) == 2
