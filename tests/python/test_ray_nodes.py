"""actorcc.ray passes Ray's node id as the node identity: actors on two Ray nodes of one
machine (ray.cluster_utils.Cluster: same host name, same boot id) form a group of two nodes,
and the group runs across them (CPU: shared memory inside a node, TCP between)."""
import os
import sys

import numpy as np
import pytest

import actorcc
import actorcc.ray

HERE = os.path.dirname(os.path.abspath(__file__))


def test_node_identity_plumbing(monkeypatch):
    """Without Ray's cluster: Ray's node id becomes ACTORCC_NODE_ID, an explicit one wins."""
    class Ctx:
        def get_node_id(self):
            return "abc123"

    class FakeRay:
        def get_runtime_context(self):
            return Ctx()

    monkeypatch.setattr(actorcc.ray.groups, "_ray", lambda: FakeRay())
    monkeypatch.delenv("ACTORCC_NODE_ID", raising=False)
    assert actorcc.ray.groups._use_ray_node_id() == "ray-abc123"
    assert os.environ["ACTORCC_NODE_ID"] == "ray-abc123"
    monkeypatch.setenv("ACTORCC_NODE_ID", "mine")
    assert actorcc.ray.groups._use_ray_node_id() == "mine"

    class NoRay:
        def get_runtime_context(self):
            raise RuntimeError("not in ray")

    monkeypatch.setattr(actorcc.ray.groups, "_ray", lambda: NoRay())
    monkeypatch.delenv("ACTORCC_NODE_ID", raising=False)
    assert actorcc.ray.groups._use_ray_node_id() is None
    assert "ACTORCC_NODE_ID" not in os.environ


def _users_ray_init_stays_out(test_address):
    """A Cluster writes its address to <Ray temp dir>/ray_current_cluster, where a plain
    ray.init() looks first: a user's ray.init() in another shell attached to the tests' cluster
    (and hung on "Failed to connect to GCS" once it was gone). With the tests' private RAY_TMPDIR
    (conftest) the user's default file never names it, and a plain ray.init() run as the user
    would run it starts its own instance."""
    import subprocess

    import conftest
    from ray._common.utils import get_default_ray_temp_dir
    env = conftest.user_env()
    default_dir = env.get("RAY_TMPDIR") or os.path.join(env.get("TMPDIR") or "/tmp", "ray")
    assert get_default_ray_temp_dir().startswith(conftest.RAY_TMPDIR)
    current = os.path.join(default_dir, "ray_current_cluster")
    if os.path.exists(current):
        with open(current) as fh:
            assert fh.read().strip() != test_address
    code = ("import ray; ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False); "
            "print('GCS', ray.get_runtime_context().gcs_address, flush=True); ray.shutdown()")
    env.pop("RAY_ADDRESS", None)  # as a user without one set
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    line = next((x for x in p.stdout.splitlines() if x.startswith("GCS ")), None)
    assert line is not None, p.stdout + p.stderr[-3000:]
    assert line.split()[1] != test_address, line


@pytest.mark.ray
def test_two_ray_nodes_on_one_host():
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    old = os.environ.get("PYTHONPATH")
    paths = [HERE] + [p for p in sys.path if p.endswith(("python/pkg", "site-packages")) and os.path.isdir(p)]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    os.environ.pop("ACTORCC_NODE_ID", None)
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    except Exception as e:  # noqa: BLE001 - a machine where a second raylet cannot start
        pytest.skip(f"ray.cluster_utils.Cluster does not start here: {e}")
    try:
        cluster.add_node(num_cpus=2)
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        cluster.wait_for_nodes()
        _users_ray_init_stays_out(cluster.address)
        import ray_actors
        Worker = ray.remote(num_cpus=0)(ray_actors.Worker)
        nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
        assert len(nodes) == 2
        # 2 actors on each node, interleaved by rank: ranks 0, 2 on the first node, 1, 3 on the other
        actors = [Worker.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nodes[r % 2], soft=False)).remote()
                  for r in range(4)]
        infos = actorcc.ray.create_group(actors, name="nodes", timeout=30, join_timeout=60, backend="cpu")
        assert len({i["hostname"] for i in infos}) == 1  # one machine ...
        assert [i["node_id"] for i in infos] == [f"ray-{nodes[r % 2]}" for r in range(4)]
        assert all(i["num_nodes"] == 2 for i in infos)  # ... two nodes
        outs = ray.get([a.allreduce.remote("nodes", r + 1, n=1001) for r, a in enumerate(actors)])
        assert all(len(o) == 1001 and np.array_equal(o, 10.0 * ray_actors.pattern(1001)) for o in outs)
        actorcc.ray.destroy_group(actors, "nodes")
    finally:
        ray.shutdown()
        cluster.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
