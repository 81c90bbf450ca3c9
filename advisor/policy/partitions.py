"""The policy's partition names against the cluster's: a name Slurm lacks is valid TOML and a valid name,
so only the cluster can tell that ``[partitions.A100]`` prices nothing and leaves ``a100`` free."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence

from advisor.policy.schema import Policy
from advisor.tomlfile import Problem, key_lines, line_of


def partition_warnings(policy: Policy, text: str, cluster: Sequence[str]) -> list[Problem]:
    """Each name the policy (read from ``text``) gives that ``cluster`` lacks, at its line; and, where the
    policy prices partitions, each of the cluster's it leaves unpriced (free to the cost objective)."""
    lines = key_lines(text.removeprefix("\ufeff"))
    found = [
        Problem(line=line_of(lines, key), key=".".join(key), message=_unknown(name, cluster))
        for key, name in _named(policy)
        if name not in cluster
    ]
    found.sort(key=lambda problem: problem.line or 0)
    if any(rules.price_per_gpu_hour or rules.price_per_cpu_hour for rules in policy.partitions.values()):
        found += [
            Problem(
                line=line_of(lines, ("partitions",)),
                key="partitions",
                message=f"the cluster's partition {name!r} has no price: its jobs cost nothing "
                f"(add [partitions.{name}], with price 0 if it is free)",
            )
            for name in cluster
            if name not in policy.partitions
        ]
    return found


def _named(policy: Policy) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every partition name the policy writes, with the key it is written at."""
    for name in policy.partitions:
        yield ("partitions", name), name
    for layer, table in (("accounts", policy.accounts), ("users", policy.users)):
        for owner, rules in table.items():
            for index, name in enumerate(rules.partitions or ()):
                yield (layer, owner, "partitions", str(index)), name


def _unknown(name: str, cluster: Sequence[str]) -> str:
    by_case = {known.lower(): known for known in cluster}
    close = (
        [by_case[name.lower()]] if name.lower() in by_case else difflib.get_close_matches(name, cluster, 1)
    )
    hint = f"; did you mean {close[0]!r}?" if close else f" (it has {', '.join(cluster) or 'none'})"
    return f"{name!r} is not a partition of the cluster{hint}"
