"""Run by test_ray.py in its own process (it needs a Ray instance of its own to shut down):
one actor of group "a" is killed (the root must warn about it), then ray.shutdown() ends
groups "a" (its survivors) and "b" (whole) while they are alive, which must not read as
failures. Prints "ready" before the shutdown; the test checks the root's lines on stderr."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
os.environ["PYTHONPATH"] = os.pathsep.join([HERE] + [p for p in [os.environ.get("PYTHONPATH")] if p])
sys.path.insert(0, HERE)

import ray  # noqa: E402

import actorcc.ray  # noqa: E402
import ray_actors  # noqa: E402


def main():
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, configure_logging=False)
    Worker = ray.remote(num_cpus=0)(ray_actors.Worker)
    a = [Worker.remote() for _ in range(3)]
    b = [Worker.remote() for _ in range(3)]
    actorcc.ray.create_group(a, name="a", backend="cpu", join_timeout=60)
    actorcc.ray.create_collective_group(b, group_name="b", backend="cpu", join_timeout=60)
    ray.get([w.allreduce.remote("a", 1.0) for w in a])
    ray.kill(a[1])
    time.sleep(7)  # longer than the root's grace for logging a loss (kLossGrace, 5 s)
    print("ready", flush=True)
    sys.stderr.flush()
    ray.shutdown()
    time.sleep(7)  # the roots see the actors go, and log them within their grace
    print("done", flush=True)


if __name__ == "__main__":
    main()
