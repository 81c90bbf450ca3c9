"""Admin policies: TOML files that say what the advisor may do, for whom, and where.

``schema`` and ``resolve`` are pure; ``load`` reads files, ``holder`` keeps the last good policy
for the service, ``cli`` is ``advisor policy check``.
"""

from advisor.policy.holder import PolicyHolder
from advisor.policy.load import PolicyError, load_policy, parse_policy
from advisor.policy.resolve import Effective, PartitionTerms, resolve
from advisor.policy.schema import Policy

__all__ = [
    "Effective",
    "PartitionTerms",
    "Policy",
    "PolicyError",
    "PolicyHolder",
    "load_policy",
    "parse_policy",
    "resolve",
]
