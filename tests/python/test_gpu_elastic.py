"""Elastic membership on the CUDA backend (device machine; skipped without torch + CUDA): 4 ranks
sharing GPU 0 (ACTORCC_CUDA_SHARE_GPU=1). A rank is SIGKILLed while the others' all_reduce kernel
waits for it; the survivors' synchronize raises naming it, they shrink (a new CUDA group of 3)
and get exact results, and a restarted process takes the dead rank back through grow. Prints the
time from the kill to the survivors' first correct call and a restarted process's rejoin time
(bars: 1 s each). Run by scripts/device.sh elastic."""
import statistics

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import actorcc  # noqa: E402
from elastic_workers import kill_rejoin_cycles, kill_shrink_grow  # noqa: E402
from mp_helpers import run_ranks  # noqa: E402

pytestmark = pytest.mark.gpu
ENV = {"ACTORCC_CUDA_SHARE_GPU": "1", "CUDA_VISIBLE_DEVICES": "0"}


@pytest.mark.parametrize("world,victim", [(3, 2), (4, 0)])
def test_kill_while_a_kernel_waits_then_shrink_and_grow(world, victim, tmp_path):
    uid = actorcc.UniqueId.create("127.0.0.1")
    res = run_ranks(world, kill_shrink_grow, str(uid), "cuda", victim, str(tmp_path), 1 << 20, timeout=120,
                    env=ENV, expect_errors=True)
    assert res[victim][0] == "died", res[victim]
    alive = [r for r in range(world) if r != victim]
    for r in alive:
        assert res[r][0] == "ok", res[r]
    kill = max(res[r][1]["kill_to_first_ok"] for r in alive)
    rejoin = [res[r][1]["rejoin"] for r in alive if res[r][1]["rejoin"] is not None]
    print(f"ELASTIC-GPU world {world} victim {victim}: kill -> first correct call {kill:.3f} s "
          f"(detect {statistics.median(res[r][1]['detect'] for r in alive):.3f} s); "
          f"restarted process ready -> first correct call {rejoin[0]:.3f} s")
    assert kill <= 1.0 and rejoin[0] <= 1.0, (kill, rejoin)


def test_twenty_kill_rejoin_cycles_at_4_ranks(tmp_path):
    """The bars' figures: 20 cycles of kill (a kernel waiting on the dead rank), shrink, exact
    call, restart and grow back, with the 3 survivors' processes living through all of them."""
    world, cycles = 4, 20
    uid = actorcc.UniqueId.create("127.0.0.1")
    res = run_ranks(world, kill_rejoin_cycles, str(uid), "cuda", str(tmp_path), cycles, 1 << 20, timeout=240,
                    env=ENV, expect_errors=True)
    assert res[world - 1][0] == "died", res[world - 1]
    for r in range(world - 1):
        assert res[r][0] == "ok", res[r]
    kill = [max(res[r][1]["kill_to_first_ok"][i] for r in range(world - 1)) for i in range(cycles)]
    rejoin = res[0][1]["rejoin"]
    assert len(kill) == cycles and len(rejoin) == cycles
    print(f"ELASTIC-GPU-CYCLES world {world}, {cycles} cycles: kill -> first correct call median "
          f"{statistics.median(kill):.3f} s, max {max(kill):.3f} s; restarted process ready -> first correct call "
          f"median {statistics.median(rejoin):.3f} s, max {max(rejoin):.3f} s")
    assert max(kill) <= 1.0 and max(rejoin) <= 1.0, (kill, rejoin)
