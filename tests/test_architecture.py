"""The package's shape, checked: one name per class, no vague module names twice, no cycle between parts.

A part is a subpackage (``advisor.bench``) or a top-level module (``advisor.store``); an import from one
part to another is an edge, at any depth of the importing module (function-level imports too).
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter, defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "advisor"
VAGUE = {"model.py", "models.py", "utils.py", "helpers.py", "common.py", "misc.py"}


@functools.cache
def _parsed() -> tuple[tuple[str, ast.Module], ...]:
    """Every module of the package, parsed once for all the tests here (none changes a tree it is given)."""
    return tuple(
        (".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts), ast.parse(path.read_text("utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
    )


def _modules() -> dict[str, ast.Module]:
    return dict(_parsed())


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


BENCHMARKS = PACKAGE.parent / "benchmarks"


def test_no_class_name_is_defined_twice() -> None:
    """In the package and the benchmarks together: a benchmark's class under a product class's name reads as
    that class (before: the harness declared its own WaitQuery, Decision, Outcome, Submission, Partition)."""
    benchmarks = (
        (".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts), ast.parse(path.read_text("utf-8")))
        for path in sorted(BENCHMARKS.rglob("*.py"))
    )
    where: dict[str, list[str]] = defaultdict(list)
    for module, tree in [*_parsed(), *benchmarks]:
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(module)
    assert {name: modules for name, modules in where.items() if len(modules) > 1} == {}


MODULE_LINES, FUNCTION_LINES, PARAMETERS = 400, 60, 6
"""The sizes a newcomer can read at once (issue 50): a longer module or function is split into named parts,
more parameters become a value (as `Ask` and `TaskInput` did)."""


def oversized(modules: dict[str, ast.Module], lines: dict[str, int]) -> list[str]:
    """Each module over `MODULE_LINES`, each function over `FUNCTION_LINES` or taking more than
    `PARAMETERS` (``self`` and ``cls`` not counted), named with its place."""
    found = [f"{name}: {count} lines" for name, count in lines.items() if count > MODULE_LINES]
    for name, tree in modules.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            given = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            count = len([arg for arg in given if arg.arg not in ("self", "cls")])
            if length > FUNCTION_LINES:
                found.append(f"{name}.{node.name} (line {node.lineno}): {length} lines")
            if count > PARAMETERS:
                found.append(f"{name}.{node.name} (line {node.lineno}): {count} parameters")
    return found


def test_no_module_function_or_parameter_list_outgrows_what_one_reads_at_once() -> None:
    paths = sorted(PACKAGE.rglob("*.py"))
    names = [".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts) for path in paths]
    lines = {name: len(path.read_text("utf-8").splitlines()) for name, path in zip(names, paths, strict=True)}
    assert oversized(_modules(), lines) == []


def test_an_oversized_function_is_named_with_its_place() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES))
    source = f"def long():\n{body}\n\n\ndef wide(self, a, b, c, d, e, f, g):\n    pass\n"
    planted = {"advisor.planted": ast.parse(source)}
    assert oversized(planted, {"advisor.planted": MODULE_LINES + 1}) == [
        f"advisor.planted: {MODULE_LINES + 1} lines",
        f"advisor.planted.long (line 1): {FUNCTION_LINES + 1} lines",
        f"advisor.planted.wide (line {FUNCTION_LINES + 4}): 7 parameters",
    ]


def test_no_vague_module_name_is_used_twice() -> None:
    names = Counter(path.name for path in PACKAGE.rglob("*.py") if path.name in VAGUE)
    assert [name for name, count in names.items() if count > 1] == []


PURE_CORE = (
    "advisor.jobscript",
    "advisor.introspect.table",
    "advisor.introspect.flops",
    "advisor.introspect.memory",
    "advisor.predict.types",
    "advisor.predict.bands",
    "advisor.predict.features",
    "advisor.predict.curves",
    "advisor.predict.roofline",
    "advisor.predict.stored_opsum",
    "advisor.predict.outsized",
    "advisor.predict.jobtime",
    "advisor.predict.calibration",
    "advisor.wait.simulate",
    "advisor.wait.snapshot",
    "advisor.wait.accuracy",
    "advisor.policy",
    "advisor.recommend.ask",
    "advisor.recommend.screen",
    "advisor.recommend.candidates",
    "advisor.recommend.placement",
    "advisor.recommend.estimate",
    "advisor.recommend.estimator",
    "advisor.recommend.choose",
    "advisor.recommend.kills",
    "advisor.recommend.advice",
    "advisor.recommend.explain",
    "advisor.recommend.history_limit",
    "advisor.recommend.arrays",
    "advisor.recommend.service",
    "advisor.history.past",
    "advisor.history.features",
    "advisor.history.point",
    "advisor.history.predictor",
    "advisor.history.replay",
    "advisor.comm.sync",
    "advisor.predict.array_outcome",
    "advisor.bench.plan",
    "advisor.bench.short_plans",
    "advisor.bench.plan_rows",
    "advisor.bench.sweeps",
    "advisor.bench.night",
    "advisor.bench.neighbours",
    "advisor.bench.sight_plan",
    "advisor.bench.zoo",
    "advisor.slurm.models",
    "advisor.slurm.values",
    "advisor.slurm.options",
    "advisor.records",
    "advisor.contract",
    "advisor.frozen",
    "advisor.tomlfile",
)
"""What decides (parsing, counting, predicting, simulating, choosing) takes its inputs as arguments: neither
it nor anything it imports, through any chain, reaches an edge, an I/O library, the clock or the environment
(`docs/ARCHITECTURE.md`'s module map lists the same modules)."""
EDGES = (
    "advisor.settings",
    "advisor.slurm.client",
    "advisor.slurm.runner",
    "advisor.store",
    "advisor.bench.measure",
    "advisor.bench.training",
    "advisor.bench.run",
    "advisor.bench.apart",
    "advisor.bench.reporting",
    "advisor.bench.job",
    "advisor.bench.measuring",
    "advisor.comm.allreduce",
    "advisor.comm.rows",
    "advisor.introspect.run",
    "advisor.introspect.child",
    "advisor.introspect.table_cache",
    "advisor.bench.tables",
    "advisor.bench.sequence",
    "advisor.factory_table",
    "advisor.daemon",
    "advisor.predict.model_files",
    "advisor.predict.model_check",
    "advisor.predict.boosters",
    "advisor.predict.service",
    "advisor.predict.retrain",
    "advisor.history.jobs",
    "advisor.history.service",
    "advisor.wait.collect",
    "advisor.wait.estimate",
    "advisor.submit",
    "advisor.submit_ask",
    "advisor.sandbox",
    "advisor.web",
    "advisor.recommend.edges",
    "advisor.recommend.cluster",
    "advisor.runtime",
)
"""The advisor's own edges: a database, Slurm, a socket, a child process, the settings (and through them the
environment), model files, torch's timing (`docs/ARCHITECTURE.md`'s module map lists the same modules)."""
IO_LIBRARIES = (
    "subprocess",
    "socket",
    "sqlite3",
    "sqlite_utils",
    "aiohttp",
    "fabric",
    "paramiko",
    "apscheduler",
)
CLOCKS = {("datetime", "now"), ("datetime", "utcnow"), ("date", "today"), ("time", "time")}
CLOCKS |= {("time", "monotonic"), ("time", "perf_counter")}
ENVIRONMENT_READERS = {
    "advisor.cli": "hands the process's environment to the settings, and SBATCH_* to `advisor parse`",
    "advisor.recommend.cli": "SBATCH_* variables, part of the submission `advisor recommend` reads",
    "advisor.submit": "the settings, and the user's environment, which sbatch runs with",
    "advisor.submit_ask": "the settings advise-submit asks the daemon with (caller_settings)",
    "advisor.remote_advice": "SBATCH_* variables: the submission `advisor recommend` asks the daemon about",
    "advisor.slurm.runner": "a Slurm command's environment: this one, less Slurm's own variables",
    "advisor.sandbox.processes": "the sandbox's daemons run with this environment and their marker",
    "advisor.bench.fingerprint": "the benchmark job's allocation (SLURM_*, CUDA_VISIBLE_DEVICES)",
    "advisor.bench.job": "the benchmark job's allocation: its CPU threads",
    "advisor.comm.allreduce": "each rank's place in its job (SLURM_*), and the rendezvous",
    "advisor.web.wsgi": "Passenger's entry point has no command line: its environment goes to the settings",
    "advisor.factory_table": "the user's PYTHONPATH, where the factory child finds their package",
    "advisor.bench.profile": "libkineto's log level, set unless the user set one: its lines amid the table",
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


def _runtime_imports(statements: list[ast.stmt]) -> set[str]:
    """What a module imports when it runs, at any depth (a function's import runs when it is called); not
    what only a type checker reads (``if TYPE_CHECKING:``). Imports are statements: only statement lists
    are walked."""
    found: set[str] = set()
    for node in statements:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        guarded = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for field in ("orelse",) if guarded else ("body", "orelse", "finalbody", "handlers", "cases"):
            found |= _runtime_imports(getattr(node, field, []))
    return found


def _calls(tree: ast.Module) -> set[tuple[str, str]]:
    """``owner.attribute`` pairs written in the module: ``os.environ``, ``datetime.now``..."""
    return {
        (node.value.id, node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    }


def _loads(modules: dict[str, ast.Module]) -> dict[str, set[str]]:
    """The advisor modules each module loads directly: those it imports, and their packages' ``__init__``
    (importing ``advisor.slurm.models`` runs ``advisor/slurm/__init__.py`` first)."""
    loads: dict[str, set[str]] = {}
    for name, tree in modules.items():
        found: set[str] = set()
        for target in _runtime_imports(tree.body):
            parts = target.split(".")
            found.update(".".join(parts[:end]) for end in range(2, len(parts) + 1))
        loads[name] = {target for target in found if target in modules and target != name}
    return loads


def _own_offences(tree: ast.Module) -> list[str]:
    """What a module does itself that a pure one may not: import an I/O library, read the clock or the
    environment."""
    imported = sorted({target for target in _runtime_imports(tree.body) if _in(target, IO_LIBRARIES)})
    called = sorted(f"{owner}.{attr}" for owner, attr in _calls(tree) & (CLOCKS | {("os", "environ")}))
    return imported + called


def impurities(modules: dict[str, ast.Module], core: tuple[str, ...]) -> dict[str, list[str]]:
    """For each pure module, every chain of imports that ends at an edge or at a module that does I/O
    itself: ``a -> b -> advisor.store``, ``a -> b (subprocess)``."""
    loads = _loads(modules)
    own = {name: _own_offences(tree) for name, tree in modules.items()}
    found: dict[str, list[str]] = {}
    for start in sorted(name for name in modules if _in(name, core) and not name.endswith(".cli")):
        came_from: dict[str, str | None] = {start: None}
        queue, chains = [start], []
        while queue:
            name = queue.pop(0)
            path = [name]
            while (before := came_from[path[-1]]) is not None:
                path.append(before)
            chain = " -> ".join(reversed(path))
            if _in(name, EDGES):
                chains.append(chain)
                continue
            if own[name]:
                chains.append(f"{chain} ({', '.join(own[name])})")
            for after in sorted(loads[name] - came_from.keys()):
                came_from[after] = name
                queue.append(after)
        if chains:
            found[start] = chains
    return found


def _package() -> dict[str, ast.Module]:
    return {name.removesuffix(".__init__"): tree for name, tree in _modules().items()}


def test_the_pure_core_reaches_no_database_slurm_socket_process_clock_or_environment() -> None:
    """Through any chain of imports, a package's ``__init__`` included: a pure module that imports a type
    from a module that also talks to the store loads the store."""
    modules = _package()
    assert all(any(_in(name, {listed}) for name in modules) for listed in PURE_CORE), "each is still there"
    assert impurities(modules, PURE_CORE) == {}


def test_an_import_planted_two_modules_deep_is_found_with_its_chain() -> None:
    """The check is not one import deep: a pure module that imports a pure one that imports
    `advisor.predict.service` (the store behind it) is caught, and so is a clock read in a module outside
    the core that the core imports."""
    modules = _package()
    kills, choose = "advisor.recommend.kills", "advisor.recommend.choose"
    planted = {**modules, kills: _with(modules[kills], "import advisor.predict.service")}
    found = impurities(planted, PURE_CORE)
    assert f"{kills} -> advisor.predict.service" in found[kills]
    assert f"{choose} -> {kills} -> advisor.predict.service" in found[choose]
    ticking = {
        **modules,
        "advisor.frozen": _with(modules["advisor.frozen"], "import datetime\ndatetime.now()"),
    }
    assert (
        f"{choose} -> advisor.recommend.arrays -> advisor.frozen (datetime.now)"
        in (impurities(ticking, PURE_CORE)[choose])
    ), "advisor.recommend.arrays is not in the core, and is followed all the same"


def _with(tree: ast.Module, source: str) -> ast.Module:
    return ast.Module(body=[*tree.body, *ast.parse(source).body], type_ignores=[])


MODULE_MAP = Path(__file__).resolve().parent.parent / "docs" / "ARCHITECTURE.md"


def module_map(text: str) -> dict[str, set[str]]:
    """The modules ``docs/ARCHITECTURE.md`` lists under each heading of its module map (``### Pure core``,
    ``### Edges``): each bullet's first path, ``advisor/recommend/screen.py`` or ``advisor/jobscript/``."""
    found: dict[str, set[str]] = {}
    heading = None
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip() if line.startswith("### ") else None
            continue
        match = re.match(r"- `(advisor/[\w/]*?)(?:\.py|/)?`", line)
        if heading is not None and match:
            found.setdefault(heading, set()).add(match.group(1).replace("/", "."))
    return found


def _unlike(listed: dict[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """Where the map and the lists differ: what each names that the other does not."""
    tests = {"Pure core": set(PURE_CORE), "Edges": set(EDGES)}
    return {
        heading: {
            "only in the doc": sorted(listed.get(heading, set()) - names),
            "only in the test": sorted(names - listed.get(heading, set())),
        }
        for heading, names in tests.items()
        if listed.get(heading, set()) != names
    }


def test_the_module_map_lists_the_pure_core_and_the_edges_the_test_checks() -> None:
    assert _unlike(module_map(MODULE_MAP.read_text("utf-8"))) == {}


def test_a_module_the_doc_lists_and_the_test_does_not_is_named() -> None:
    text = MODULE_MAP.read_text("utf-8").replace(
        "### Edges\n", "### Edges\n\n- `advisor/recommend/planted.py`: planted\n", 1
    )
    assert _unlike(module_map(text)) == {
        "Edges": {"only in the doc": ["advisor.recommend.planted"], "only in the test": []}
    }


def test_the_environment_is_read_where_the_list_says_and_nowhere_else() -> None:
    modules = _package()
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
    "advisor.bench.apart",
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
