"""Adapters that plug actorcc's weight sync (actorcc.weight_sync) into RL frameworks' own plug-in
points, one module per framework (docs/rl.md has the recipe of each):

  actorcc.rl.verl   verl's CheckpointEngine "actorcc" (checkpoint_engine.backend=actorcc,
                    checkpoint_engine.custom_backend_module=actorcc.rl.verl)
  actorcc.rl.vllm   vLLM's weight transfer backend "actorcc" (registered in every vLLM process by
                    the vllm.general_plugins entry point, actorcc.rl.vllm_plugin)
  actorcc.rl.nemo_rl  NeMo-RL's refit transport
                    (refit_transport: "actorcc.rl.nemo_rl:ActorccCheckpointEngine")

Each module imports its framework only when the framework is installed (it then subclasses the
framework's base class and registers itself in the framework's registry); `pip install actorcc`
pulls none of them.
"""
