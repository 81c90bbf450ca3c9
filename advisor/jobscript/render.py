"""Write a request back as ``#SBATCH`` lines that sbatch (and build_request) reads as the same request.

Values go in ``--name="value"`` form: quoting keeps blanks and ``#``, the ``=`` form keeps an empty value
(an empty quoted argument would end sbatch's line) and values that start with ``-``.
"""

from __future__ import annotations

from advisor.jobscript.lexer import SBATCH_PREFIXES, body_start, header_lines
from advisor.jobscript.request import JobRequest


def render_directives(request: JobRequest) -> str:
    """One ``#SBATCH`` line per effective option; a hetjob's later components cannot be expressed."""
    if request.het_components != 1:
        raise ValueError("a heterogeneous job's components cannot be rendered from one request")
    return "".join(f"#SBATCH {_option(name, value)}\n" for name, value in request.options.items())


def render_script(request: JobRequest) -> str:
    """The request's script with its directive block replaced; other header lines and the body stay."""
    script = request.script
    kept = [line for line in header_lines(script)[1:] if not line.startswith(SBATCH_PREFIXES)]
    shebang = script.split("\n", 1)[0]
    return (
        "".join(f"{line}\n" for line in [shebang, *kept])
        + render_directives(request)
        + script[body_start(script) :]
    )


def _option(name: str, value: str | None) -> str:
    if value is None:
        return f"--{name}"
    if "\n" in value or "\0" in value:
        raise ValueError(f"--{name}: a directive line cannot hold a newline or NUL: {value!r}")
    if not value:
        return f"--{name}="
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'--{name}="{escaped}"'
