"""The profile content policy, in one place.

:data:`CONTENT_POLICY` is embedded verbatim in every write-path prompt (rewrite, scrub, condense;
see :mod:`dbmemory.profile.prompts`), and a test checks that it is. Change the policy here only.
The deterministic detectors (:mod:`dbmemory.profile.detectors`) back it up after the scrub.
"""

from __future__ import annotations

__all__ = ["CONTENT_POLICY", "POLICY_VERSION"]

POLICY_VERSION = 1
"""Bumped whenever :data:`CONTENT_POLICY` changes meaning."""

CONTENT_POLICY = """\
CONTENT POLICY for the user memory (applies to every line you keep or write):
1. Keep personal data of the signed-in user only: their name, role, team, preferences, skills,
   working habits, their own commitments and the topics they discussed.
2. Never keep client-identifying data, and never keep personal data of anyone else: other users,
   colleagues, clients, prospects, patients, counterparties, family members. No names, e-mail
   addresses, phone numbers, account or contract numbers or addresses of other people or
   organisations that are clients.
3. Facts about the user's work that involve a client are kept only in de-identified form, e.g.
   "prepares quarterly reports for a retail client", never the client's name or identifiers.
4. Never keep, for anyone (the user included): credentials (passwords, API keys, tokens,
   secrets, PINs, private keys), payment data (card numbers, bank account numbers, IBANs),
   health records or medical details, and government identifiers (national id, social security,
   passport, tax or driving-licence numbers).
5. Keep only what the user said or plainly showed; never invent, guess or infer sensitive traits.
"""
