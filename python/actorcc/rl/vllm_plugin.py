"""vLLM's general plugin (entry-point group `vllm.general_plugins`, loaded by vLLM in every process
it starts): registers the weight transfer backend "actorcc" (actorcc.rl.vllm) in both factories.
Light on purpose: the engines' module is imported only when the backend is used."""

BACKEND = "actorcc"


def register():
    """Registers "actorcc" in WeightTransferEngineFactory and WeightTransferTrainerFactory (by module
    path, as vLLM registers its own engines). Idempotent; a vLLM without weight transfer is left alone."""
    try:
        from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory, WeightTransferTrainerFactory
    except ImportError:
        return
    for factory, cls in ((WeightTransferEngineFactory, "ActorccWeightTransferEngine"),
                         (WeightTransferTrainerFactory, "ActorccTrainerEngine")):
        if BACKEND not in factory._registry:
            factory.register_engine(BACKEND, "actorcc.rl.vllm", cls)
