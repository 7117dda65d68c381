"""Inference: from source ids to hypotheses, on nmt's own engine or on CTranslate2.

    choices.py        the names a user picks among (engines, precisions, quantisations); no torch
    contract.py       the engine contract: the Engine protocol, EngineOptions, and what each engine
                      can do (Capabilities), refused in one place
    plan.py           what a call asks for and how it is cut: SearchRequest, WorkerPolicy,
                      batches and workers per call
    batch_search.py   what one batch computes: a free function of model, ids, request and limits
    workers.py        where batches run: in the caller, in threads or in worker processes
    torch_engine.py   nmt's engine: plan -> workers -> results in input order
    mc_dropout.py     the model's dropout kept on for seeded scoring passes (MC dropout quality scores)
    shortlist.py      a lexical shortlist: the candidate words a batch's search scores
    precision.py      fp32 / bf16 / int8 models (int8_linear.py, packed_linear.py: their layers)
    export_ctranslate2.py, ctranslate2_engine.py   the same model run by CTranslate2
    engine_choice.py  `--engine auto`: the faster engine that can run a model, and its cached export
    loading.py        a model directory and EngineOptions -> an engine

This package imports nothing at load, so `nmt --help` can read `choices` without torch.
"""
