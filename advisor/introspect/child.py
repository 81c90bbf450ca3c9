"""A factory model introspected in a child of `advise-submit` (``python -m advisor.introspect.child``).

A factory is the user's own code, imported and called at submission time in the user's own process tree,
as the user. Whatever it does (exit, abort, hang, exhaust memory, print) ends in this child: the wrapper
reads the layer table from the child's original standard output, and anything else means no advice.
Reads ``{"model", "input_shape", "model_kwargs"}`` as JSON on stdin.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the factory prints goes to stderr, never into the answer
    request = json.load(sys.stdin)
    from advisor.introspect.errors import IntrospectionError
    from advisor.introspect.run import introspect

    channels, height, width = request["input_shape"]
    try:
        table = introspect(
            request["model"], (channels, height, width), request["model_kwargs"], allow_factories=True
        )
    except IntrospectionError as error:
        print(f"advise-submit: {error}", file=sys.stderr)
        return 1
    answer.write(table.model_dump_json())
    answer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
