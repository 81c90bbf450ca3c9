"""A factory model introspected in a child of `advise-submit` (``python -I -m advisor.introspect.child``).

A factory is the user's own code, imported and called at submission time in the user's own process tree,
as the user. Whatever it does (exit, abort, hang, exhaust memory, print) ends in this child: the wrapper
reads the layer table from the child's original standard output, and anything else means no advice.
Reads ``{"model", "input_shape", "model_kwargs", "sequence_length", "task", "target_length", "places",
"memory_bytes", "search_path"}`` as JSON on stdin (``places``: the user's Hugging Face cache), and caps
its own address space at ``memory_bytes`` before importing anything of the user's (here, not in a
``preexec_fn``: the web app that starts it has threads, and a ``preexec_fn`` is unsafe with threads).

Started isolated (``-I``), it loads the standard library, the advisor and torch from the installation
alone; only then are the ``search_path`` places the user asked for appended, behind all of those, so
the factory's package is found where the user keeps it and nothing there shadows a module already
installed.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path


def main() -> int:
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the factory prints goes to stderr, never into the answer
    request = json.load(sys.stdin)
    limit = int(request["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from advisor.introspect.errors import IntrospectionError
    from advisor.introspect.run import TaskInput, introspect

    sys.path.extend(str(place) for place in request.get("search_path", []))
    channels, height, width = request["input_shape"]
    try:
        table = introspect(
            request["model"],
            (channels, height, width),
            request["model_kwargs"],
            allow_factories=True,
            given=TaskInput(
                request.get("sequence_length"), request.get("task"), request.get("target_length")
            ),
            places=[Path(place) for place in request.get("places", [])],
        )
    except IntrospectionError as error:
        print(f"advise-submit: {error}", file=sys.stderr)
        return 1
    # How the job trains is the daemon's reading of the script; a daemon from before it refuses the key.
    answer.write(table.model_dump_json(exclude={"training"}))
    answer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
