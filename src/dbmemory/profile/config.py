"""Settings of the user profile and the rule that switches it on.

Example:
    >>> from dbmemory.profile.config import UserMemoryConfig, memory_enabled
    >>> UserMemoryConfig().max_tokens
    2000
    >>> memory_enabled(company_feature_enabled=True, space_memory_enabled=None,
    ...                web_search_enabled=False, company_allows_memory_with_web_search=False,
    ...                user_opted_out=False)
    True
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dbmemory.core.keys import validate_component
from dbmemory.errors import InvalidScopeError

__all__ = ["UserMemoryConfig", "memory_enabled", "MIN_MAX_TOKENS", "MAX_MAX_TOKENS"]

MIN_MAX_TOKENS = 500
"""Smallest allowed profile budget, in tokens."""

MAX_MAX_TOKENS = 8000
"""Largest allowed profile budget, in tokens."""


class UserMemoryConfig(BaseModel):
    """How user profiles are stored, budgeted and consolidated.

    Raises:
        pydantic.ValidationError: ``max_tokens`` outside 500..8000, a ``root_folder`` that is
            not a valid store-key component, or ``use_orchestrator_language_model=False``
            without a ``language_model``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    max_tokens: int = Field(default=2000, ge=MIN_MAX_TOKENS, le=MAX_MAX_TOKENS)
    """Budget of one profile, in tokens of the effective model's tokenizer (whole file text)."""

    root_folder: str = "user-memory"
    """Namespace of the profile stores: store key ``reserved:profile:<root_folder>:<id>``;
    at most 200 characters of ``[A-Za-z0-9_.-]``."""

    use_orchestrator_language_model: bool = True
    """Consolidate with the model that answered the turn (the orchestrator's)."""

    language_model: str | None = None
    """litellm model name used for consolidation when ``use_orchestrator_language_model`` is
    False, e.g. ``"gpt-4o-mini"``."""

    gate_enabled: bool = True
    """Ask a cheap UPDATE/NOOP question before the rewrite (errors fail open)."""

    deadline_s: float = Field(default=120.0, gt=0, le=3600)
    """Wall-clock limit of one consolidation, model calls included, in seconds (0 < s <= 3600).
    Each model call waits at most the time left, whether or not the model honours its
    ``timeout``; at the deadline the consolidation gives up (outcome ``error``, reason
    ``deadline``, counted) and the old profile stays."""

    section_order: Literal["keep", "current", "older"] = "keep"
    """Order of the Follow-ups and Recent Topics sections a rewrite writes: ``"keep"`` the
    stored profile's order (a new profile gets the current one), ``"current"`` the current
    reference format (Follow-ups, then Recent Topics), ``"older"`` the older one (Recent Topics,
    then Follow-ups)."""

    follow_up_stale_days: int = Field(default=30, ge=1, le=3650)
    """A Follow-ups bullet whose newest date (``YYYY-MM-DD``) lies more than this many days
    before the rewrite is stale and removed (:mod:`dbmemory.profile.rules`); 1..3650."""

    @field_validator("root_folder")
    @classmethod
    def _root_folder_is_a_key_component(cls, value: str) -> str:
        try:
            return validate_component(value, "root_folder")
        except InvalidScopeError as exc:
            raise ValueError(exc.message) from exc

    @model_validator(mode="after")
    def _model_when_not_orchestrator(self) -> UserMemoryConfig:
        if not self.use_orchestrator_language_model and not self.language_model:
            raise ValueError(
                "language_model is required when use_orchestrator_language_model is False: "
                "name a litellm model such as 'gpt-4o-mini'"
            )
        return self

    def effective_model(self, orchestrator_model: str | None) -> str | None:
        """The model used for the tokenizer and every consolidation call.

        Args:
            orchestrator_model: the model that answers the turn.

        Returns:
            ``orchestrator_model`` when ``use_orchestrator_language_model`` (the default), else
            ``language_model``.
        """
        return orchestrator_model if self.use_orchestrator_language_model else self.language_model


def memory_enabled(
    *,
    company_feature_enabled: bool,
    space_memory_enabled: bool | None,
    web_search_enabled: bool,
    company_allows_memory_with_web_search: bool,
    user_opted_out: bool,
) -> bool:
    """Whether user memory is active for one turn (pure; all four conditions must hold).

    Args:
        company_feature_enabled: the company's feature flag for user memory.
        space_memory_enabled: the space's setting; None (absent) means enabled.
        web_search_enabled: web search is on in the space.
        company_allows_memory_with_web_search: the company allows memory and web search together.
        user_opted_out: the user turned memory off (see :func:`dbmemory.profile.optout`).

    Returns:
        True when the flag is on, the space does not disable it, web search is off or allowed
        together with memory, and the user has not opted out.
    """
    return (
        company_feature_enabled
        and space_memory_enabled is not False
        and (not web_search_enabled or company_allows_memory_with_web_search)
        and not user_opted_out
    )
