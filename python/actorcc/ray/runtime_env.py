"""nccl_runtime_env: the runtime_env that puts actorcc's libnccl.so.2 (NCCL's C API on actorcc)
in Ray actors, so their torch "nccl" groups, vLLM and CuPy use actorcc unchanged
(docs/nccl-use.md)."""
from __future__ import annotations

__all__ = ["nccl_runtime_env"]


# Variables that hold a list of files: actorcc's entry goes first, the caller's stay after it.
_PATH_LISTS = {"LD_PRELOAD": ":", "LD_AUDIT": ":"}


def nccl_runtime_env(base=None, mode="preload"):
    """The runtime_env that makes Ray actors' torch, CuPy and vLLM load actorcc's libnccl.so.2
    (actorcc/nccl.py: mode "preload" sets LD_PRELOAD, "audit" LD_AUDIT; both VLLM_NCCL_SO_PATH),
    merged into `base` (a runtime_env dict, not changed) without losing any of its keys:

        actor = Trainer.options(runtime_env=actorcc.ray.nccl_runtime_env({"pip": [...]})).remote()
        ray.init(runtime_env=actorcc.ray.nccl_runtime_env())   # every worker of the job

    An LD_PRELOAD or LD_AUDIT already in base's env_vars is kept, after actorcc's entry. A base
    that sets VLLM_NCCL_SO_PATH or ACTORCC_NCCL_ABI_LIB to another file raises ValueError (the
    actors would mix two NCCLs). The paths are this (the driver's) machine's: the actors must
    see actorcc installed at the same place, as with one image or one virtualenv everywhere."""
    from .. import nccl

    out = dict(base or {})
    env_vars = dict(out.get("env_vars") or {})
    for key, value in nccl.env(mode).items():
        old = env_vars.get(key)
        if not old or old == value:
            env_vars[key] = value
        elif key in _PATH_LISTS:
            sep = _PATH_LISTS[key]
            env_vars[key] = sep.join([value] + [p for p in old.split(sep) if p and p != value])
        else:
            raise ValueError(f"nccl_runtime_env: the runtime_env sets {key}={old!r}, but actorcc's NCCL needs "
                             f"{key}={value!r}; drop it from env_vars")
    out["env_vars"] = env_vars
    return out
