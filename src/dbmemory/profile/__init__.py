"""User profile memory: one ``memory.md`` per user, in the package's reserved namespace.

Loaded before each turn within a token budget and injected into the system prompt; consolidated
by a model after the turn (gate, rewrite, scrub, deterministic checks, fit, compare-and-set
write). Stored as an ordinary file through :mod:`dbmemory.store.files` in the store
``reserved:profile:<root_folder>:<encoded id>`` (scope ``reserved``: no agent configuration or
MEMORY tool call can name it) at ``/memories/memory.md``.

Example:
    >>> from dbmemory.profile import (UserMemoryConfig, UserMemoryPostprocessor,
    ...                               load_user_memory, memory_prompt_section)
    >>> config = UserMemoryConfig()
    >>> with engine.begin() as conn:                                              # doctest: +SKIP
    ...     state = load_user_memory(conn, "u-123", config=config, model="gpt-4o-mini")
    >>> system_prompt = base_prompt + memory_prompt_section(state)                # doctest: +SKIP
    >>> # ... the turn runs and produces `answer` ...
    >>> UserMemoryPostprocessor(engine, config, "gpt-4o-mini", "u-123", state).run(
    ...     user_text, answer)                                                    # doctest: +SKIP

No module here imports litellm; model calls go through :func:`dbmemory.llm.complete` (lazy) or
the ``complete`` callable a caller injects.
"""

from __future__ import annotations

from dbmemory.errors import MissingDependencyError, extra_hint

try:  # the profile extra: pip install -e ".[profile]"
    import prometheus_client as _prometheus_client  # noqa: F401
    import stdnum as _stdnum  # noqa: F401
    import yaml as _yaml  # noqa: F401
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        f"user profiles need {_exc.name or 'a library'} (pyyaml, python-stdnum, "
        "prometheus-client): " + extra_hint("profile")
    ) from _exc

from dbmemory.profile.budget import TRUNCATION_MARKER, FitResult, fit_profile, hard_truncate
from dbmemory.profile.calls import ConsolidationResult, ModelCall
from dbmemory.profile.config import UserMemoryConfig, memory_enabled
from dbmemory.profile.consolidate import UserMemoryPostprocessor
from dbmemory.profile.detectors import OwnContacts, ScanResult, scan
from dbmemory.profile.events import (
    LOADING,
    REVIEW,
    UPDATING,
    NullStepLogger,
    RecordingStepLogger,
    StepLogger,
)
from dbmemory.profile.format import (
    SECTIONS,
    UserProfile,
    new_profile,
    parse_profile,
    profile_body,
    render_profile,
)
from dbmemory.profile.load import UserMemoryState, load_user_memory, memory_prompt_section
from dbmemory.profile.metrics import ProfileMetrics, default_metrics
from dbmemory.profile.optout import is_user_memory_enabled, set_user_memory_enabled
from dbmemory.profile.policy import CONTENT_POLICY
from dbmemory.profile.store import (
    PROFILE_PATH,
    decode_user_id,
    delete_profile,
    encode_user_id,
    profile_store_key,
    read_profile,
    write_profile,
)
from dbmemory.profile.tokens import count_tokens, encoding_name_for_model
from dbmemory.profile.transfer import export_profiles, import_profiles, scan_profile_tree

__all__ = [
    # settings
    "UserMemoryConfig",
    "memory_enabled",
    "is_user_memory_enabled",
    "set_user_memory_enabled",
    # load and inject
    "UserMemoryState",
    "load_user_memory",
    "memory_prompt_section",
    # consolidate
    "UserMemoryPostprocessor",
    "ConsolidationResult",
    "ModelCall",
    "CONTENT_POLICY",
    "OwnContacts",
    "ScanResult",
    "scan",
    "fit_profile",
    "hard_truncate",
    "FitResult",
    "TRUNCATION_MARKER",
    # format
    "SECTIONS",
    "UserProfile",
    "parse_profile",
    "render_profile",
    "profile_body",
    "new_profile",
    # storage
    "PROFILE_PATH",
    "encode_user_id",
    "decode_user_id",
    "profile_store_key",
    "read_profile",
    "write_profile",
    "delete_profile",
    "import_profiles",
    "export_profiles",
    "scan_profile_tree",
    # tokens
    "count_tokens",
    "encoding_name_for_model",
    # observability
    "StepLogger",
    "NullStepLogger",
    "RecordingStepLogger",
    "LOADING",
    "UPDATING",
    "REVIEW",
    "ProfileMetrics",
    "default_metrics",
]


def __dir__() -> list[str]:
    # the public API only, never the helper names this module imports
    return sorted(__all__)
