"""The sandbox description and the configuration rendered from it (pure: no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.sandbox.render import Identity, Layout, render_gres_conf, render_slurm_conf
from advisor.sandbox.spec import SandboxConfigError, load_spec

from .conftest import SANDBOX_CONFIG

GOLDEN = Path(__file__).parent / "data" / "sandbox"
LAYOUT = Layout(Path("/srv/sandbox"))
IDENTITY = Identity(user="slurm", hostname="login0")


def test_the_shipped_description_has_heterogeneous_gpu_partitions() -> None:
    spec = load_spec(SANDBOX_CONFIG)
    gpu_types = {p.gpu_type for p in spec.partition if p.gpu_type}
    assert {"a100", "v100", "t4"} <= gpu_types
    assert len({p.cpus_per_node for p in spec.partition}) == len(spec.partition)
    assert spec.default_partition() == "cpu"


@pytest.mark.parametrize("name", ["slurm.conf", "gres.conf"])
def test_rendered_configuration_matches_the_golden_file(name: str) -> None:
    spec = load_spec(SANDBOX_CONFIG)
    rendered = (
        render_slurm_conf(spec, LAYOUT, IDENTITY) if name == "slurm.conf" else render_gres_conf(spec, LAYOUT)
    )
    assert rendered == (GOLDEN / name).read_text()


def test_every_daemon_gets_its_own_port() -> None:
    spec = load_spec(SANDBOX_CONFIG)
    ports = [spec.slurmctld_port, spec.slurmdbd_port, spec.mariadb_port, *spec.slurmd_ports().values()]
    assert len(set(ports)) == len(ports) == spec.port_count()
    assert not {6817, 6818, 6819} & set(ports)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = 'x'\n[[partition]\n", "not valid TOML"),
        ("base_port = 80\n", "base_port"),
        (
            "[[partition]]\nname='gpu'\nnodes=1\ncpus_per_node=2\nmemory_mb=1000\ngpus_per_node=2\n",
            "gpu_type",
        ),
        (
            "[[partition]]\nname='a'\nnodes=1\ncpus_per_node=2\nmemory_mb=1000\nmax_time='soon'\n",
            "partition[0].max_time",
        ),
        (
            "[[partition]]\nname='a'\nnodes=1\ncpus_per_node=2\nmemory_mb=1000\n"
            "[[partition]]\nname='a'\nnodes=1\ncpus_per_node=2\nmemory_mb=1000\n",
            "repeated: a",
        ),
        ("[[partition]]\nname='a'\nnodes=1\ncpus_per_node=2\nmemory_mb=1000\ncolour='red'\n", "colour"),
    ],
)
def test_bad_descriptions_name_the_file_and_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(text)
    with pytest.raises(SandboxConfigError) as caught:
        load_spec(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


def test_a_missing_description_is_named(tmp_path: Path) -> None:
    with pytest.raises(SandboxConfigError, match="cannot read"):
        load_spec(tmp_path / "absent.toml")


def test_a_sandbox_with_the_cli_filter_loads_the_plugin_and_one_without_does_not() -> None:
    spec = load_spec(SANDBOX_CONFIG)
    assert "CliFilterPlugins" not in render_slurm_conf(spec, LAYOUT, IDENTITY)
    filtered = spec.model_copy(update={"cli_filter": True})
    assert render_slurm_conf(filtered, LAYOUT, IDENTITY).splitlines()[-1] == "CliFilterPlugins=cli_filter/lua"
