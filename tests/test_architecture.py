"""The package's shape, checked: one name per class, no vague module names twice, no cycle between parts.

A part is a subpackage (``advisor.bench``) or a top-level module (``advisor.store``); an import from one
part to another is an edge, at any depth of the importing module (function-level imports too).
"""

from __future__ import annotations

import ast
from collections import Counter, defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "advisor"
VAGUE = {"model.py", "models.py", "utils.py", "helpers.py", "common.py", "misc.py"}


def _modules() -> dict[str, ast.Module]:
    return {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts): ast.parse(path.read_text("utf-8"))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "advisor"


def _imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("advisor.")}


def _graph(modules: dict[str, ast.Module]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for name, tree in modules.items():
        source = _part(name.removesuffix(".__init__"))
        edges[source].update(_part(target) for target in _imports(tree) if _part(target) != source)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by depth-first search, each as the path that closes it."""
    found: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for after in sorted(edges.get(node, ())):
            if state.get(after) == "open":
                found.append([*path[path.index(after) :], after])
            elif after not in state:
                visit(after, [*path, after])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return found


def test_the_cycle_finder_finds_a_cycle_of_three() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": {"c"}}) == []


def test_no_part_of_the_package_imports_its_way_back_to_itself() -> None:
    assert cycles(_graph(_modules())) == []


def test_no_class_name_is_defined_twice() -> None:
    names = Counter(
        node.name for tree in _modules().values() for node in tree.body if isinstance(node, ast.ClassDef)
    )
    assert [name for name, count in names.items() if count > 1] == []


def test_no_vague_module_name_is_used_twice() -> None:
    names = Counter(path.name for path in PACKAGE.rglob("*.py") if path.name in VAGUE)
    assert [name for name, count in names.items() if count > 1] == []


PURE_CORE = (
    "advisor.jobscript",
    "advisor.introspect.table",
    "advisor.introspect.flops",
    "advisor.introspect.memory",
    "advisor.predict.features",
    "advisor.predict.curves",
    "advisor.predict.jobtime",
    "advisor.predict.calibration",
    "advisor.wait.simulate",
    "advisor.policy",
    "advisor.recommend.candidates",
    "advisor.recommend.choose",
    "advisor.recommend.placement",
    "advisor.recommend.service",
    "advisor.recommend.estimator",
    "advisor.recommend.advice",
    "advisor.recommend.history_limit",
    "advisor.history.features",
    "advisor.history.point",
    "advisor.history.predictor",
    "advisor.history.replay",
    "advisor.comm.sync",
    "advisor.bench.plan",
    "advisor.bench.zoo",
    "advisor.records",
    "advisor.contract",
    "advisor.frozen",
    "advisor.tomlfile",
)
"""What decides (parsing, counting, predicting, simulating, choosing) takes its inputs as arguments."""
EDGES = (
    "advisor.store",
    "advisor.slurm.client",
    "advisor.slurm.runner",
    "advisor.daemon",
    "advisor.sandbox",
    "advisor.settings",
    "subprocess",
    "socket",
    "sqlite3",
    "sqlite_utils",
    "aiohttp",
    "fabric",
    "paramiko",
    "apscheduler",
)
"""A database, Slurm, a socket, a child process, the settings (and through them the environment)."""
CLOCKS = {("datetime", "now"), ("datetime", "utcnow"), ("date", "today"), ("time", "time")}
CLOCKS |= {("time", "monotonic"), ("time", "perf_counter")}
ENVIRONMENT_READERS = {
    "advisor.cli": "hands the process's environment to the settings, and SBATCH_* to `advisor parse`",
    "advisor.recommend.cli": "SBATCH_* variables, part of the submission `advisor recommend` reads",
    "advisor.submit": "the settings, and the user's environment, which sbatch runs with",
    "advisor.slurm.runner": "a Slurm command's environment: this one, less Slurm's own variables",
    "advisor.sandbox.processes": "the sandbox's daemons run with this environment and their marker",
    "advisor.bench.fingerprint": "the benchmark job's allocation (SLURM_*, CUDA_VISIBLE_DEVICES)",
    "advisor.bench.job": "the benchmark job's allocation: its CPU threads",
    "advisor.comm.allreduce": "each rank's place in its job (SLURM_*), and the rendezvous",
    "advisor.web.wsgi": "Passenger's entry point has no command line: its environment goes to the settings",
    "advisor.factory_table": "the user's PYTHONPATH, where the factory child finds their package",
}
"""Where `os.environ` may be read, and why; every other module is handed what it needs. Only
`advisor.settings` interprets the advisor's own ``ADVISOR_*`` variables, from the mapping it is handed."""


def _in(module: str, prefixes: tuple[str, ...] | set[str]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def _all_imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _calls(tree: ast.Module) -> set[tuple[str, str]]:
    """``owner.attribute`` pairs written in the module: ``os.environ``, ``datetime.now``..."""
    return {
        (node.value.id, node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    }


def test_the_pure_core_reaches_no_database_slurm_socket_process_clock_or_environment() -> None:
    modules = {name.removesuffix(".__init__"): tree for name, tree in _modules().items()}
    commands = {name for name in modules if name.endswith(".cli")}
    core = {name: tree for name, tree in modules.items() if _in(name, PURE_CORE) and name not in commands}
    assert len(core) >= len(PURE_CORE), "every module named is still there"
    found = {
        name: sorted(
            {target for target in _all_imports(tree) if _in(target, EDGES)}
            | {f"{owner}.{attr}" for owner, attr in _calls(tree) & (CLOCKS | {("os", "environ")})}
        )
        for name, tree in core.items()
    }
    assert {name: reached for name, reached in found.items() if reached} == {}


def test_the_environment_is_read_where_the_list_says_and_nowhere_else() -> None:
    modules = {name.removesuffix(".__init__"): tree for name, tree in _modules().items()}
    readers = {
        name
        for name, tree in modules.items()
        if {("os", "environ"), ("os", "getenv")} & _calls(tree) or "getenv" in _all_imports(tree)
    }
    assert sorted(name for name in readers if not _in(name, set(ENVIRONMENT_READERS))) == []
    assert (
        sorted(reader for reader in ENVIRONMENT_READERS if not any(_in(n, {reader}) for n in readers)) == []
    )


SERVICE = ("advisor.daemon", "advisor.recommend", "advisor.predict", "advisor.admin", "advisor.submit")
BENCHMARK_ENGINE = (
    "advisor.bench.measure",
    "advisor.bench.training",
    "advisor.bench.run",
    "advisor.bench.job",
    "advisor.bench.profile",
)


def test_the_service_retrains_and_advises_without_the_benchmark_engine() -> None:
    """The daemon reads what the nightly jobs measured; the torch timing code runs only in those jobs."""
    modules = {name.removesuffix(".__init__"): tree for name, tree in _modules().items()}
    found = {
        name: sorted(target for target in _all_imports(tree) if _in(target, BENCHMARK_ENGINE))
        for name, tree in modules.items()
        if _in(name, SERVICE)
    }
    assert {name: reached for name, reached in found.items() if reached} == {}
