"""The Ray instance of the RL plug-in tests (test_rl_*.py): private, on loopback, 4 CPUs, the test
helpers importable in the workers; shut down and the environment restored after the module."""
import contextlib
import os
import sys

import ray

HERE = os.path.dirname(os.path.abspath(__file__))


@contextlib.contextmanager
def session(**init_kwargs):
    old = os.environ.get("PYTHONPATH")
    paths = [HERE] + [p for p in sys.path if p.endswith(("python/pkg", "site-packages")) and os.path.isdir(p)]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False,
             **init_kwargs)
    try:
        yield
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
