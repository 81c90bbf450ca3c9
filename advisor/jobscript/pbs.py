"""`#PBS` directives as sbatch 22.05 reads them: translated into sbatch options that win over the script's
`#SBATCH` lines and lose to the environment and the command line (checked against the real sbatch).

Only what decides where and how long a job runs is translated: ``-q`` (partition), ``-l walltime=``,
``-l nodes=N[:ppn=M]``, ``-N`` (job name) and ``-A`` (account). Other PBS options are left to sbatch.
"""

from __future__ import annotations

from advisor.jobscript.errors import ScriptError
from advisor.jobscript.lexer import read_directives
from advisor.jobscript.options import Option

PREFIX = "#PBS"
_SIMPLE = {"-q": "partition", "-N": "job-name", "-A": "account"}
_TAKES_VALUE = frozenset("aAcCeIjJlmMNoOpqrSuvW")
"""qsub's options that take a value: skipped with it when not translated."""


def pbs_options(script: str, where: str) -> list[Option]:
    options: list[Option] = []
    for directive in read_directives(script, PREFIX, where):
        place = f"{where}:{directive.line}"
        words = list(directive.args)
        while words:
            word = words.pop(0)
            flag, value = (word[:2], word[2:]) if len(word) > 2 else (word, "")
            if not flag.startswith("-") or flag[1:] not in _TAKES_VALUE:
                continue
            if not value:
                if not words:
                    raise ScriptError(place, f"#PBS {flag} needs a value")
                value = words.pop(0)
            if flag in _SIMPLE:
                options.append(Option(_SIMPLE[flag], value, place))
            elif flag == "-l":
                options += _resources(value, place)
    return options


def _resources(text: str, place: str) -> list[Option]:
    options: list[Option] = []
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key == "walltime":
            options.append(Option("time", value, place))
        elif key == "nodes":
            count, _, rest = value.partition(":")
            options.append(Option("nodes", count, place))
            for part in rest.split(":"):
                if part.startswith("ppn="):
                    options.append(Option("ntasks-per-node", part.removeprefix("ppn="), place))
    return options
