# Sourced by check.sh and slice.sh (after `cd` to the repository root, with $out set): the Python that runs
# them ($PYTHON, else python3). Where it lacks pydantic (the GPU machine's), the wheels in .whl/
# (benchmarks/gpu/wheels.sh fetches them) are installed first into a private target. Writes what it runs
# on to $out/versions.txt, so committed results say which torch, transformers and GPU measured them.
python=${PYTHON:-python3}
if ! "$python" -c "import pydantic" 2>/dev/null; then
  if ! compgen -G ".whl/*.whl" >/dev/null; then
    echo "$python lacks pydantic and .whl/ holds no wheels: run benchmarks/gpu/wheels.sh and carry .whl" >&2
    exit 1
  fi
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/advisor-site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/advisor-site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$out"
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  git rev-parse HEAD 2>/dev/null || echo "commit unknown (no git here)"
  "$python" - <<'PY'
import importlib.metadata as metadata
import platform

print("python", platform.python_version())
for name in ("torch", "torchvision", "transformers", "timm", "huggingface_hub", "pydantic", "numpy"):
    try:
        print(name, metadata.version(name))
    except metadata.PackageNotFoundError:
        print(name, "missing")
PY
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
} >"$out/versions.txt" 2>&1
