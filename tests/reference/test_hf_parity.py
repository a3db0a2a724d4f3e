"""Parity of ``semantics="gemma3n"`` with Hugging Face transformers' Gemma3nForCausalLM.

A tiny Gemma 3n with every structural feature of the ``tiny`` preset is instantiated in
transformers with every parameter randomised (norm weights around 1 with spread, a random
``altup_scale``), saved with ``save_pretrained`` (Hugging Face key names, tied LM head),
converted by the project's importer without quantisation, and decoded one token at a time.
At every step the logits must match the transformers forward over the same prefix to 1e-4
with the same argmax. The sequence is longer than the sliding window (4) and contains a
token id beyond the per-layer table, so the window and the id rule are exercised.
"""

from __future__ import annotations

import numpy as np
import pytest

from pccx_flow.model.config import get_config

pytestmark = pytest.mark.parity

torch = transformers = None  # imported by `hf`, when a test of this module runs


@pytest.fixture(scope="module", autouse=True)
def hf():
    """torch and transformers, or a skip saying what is missing. Imported here, not at
    collection: torch and transformers took ~2 s of every xdist worker's collection, and
    only the worker that runs these tests needs them."""
    global torch, transformers
    torch = pytest.importorskip(
        "torch", reason="parity with Hugging Face needs torch (extra: parity)"
    )
    transformers = pytest.importorskip(
        "transformers", reason="parity with Hugging Face needs transformers (extra: parity)"
    )


TOKENS = [2, 500, 17, 447, 448, 100, 2, 9, 311]  # 9 positions > window 4; ids >= 448 present
TOLERANCE = 1e-4


def _hf_tiny_config():
    cfg = get_config("tiny")
    n = cfg.n_layers
    layer_types = [
        "full_attention" if i % cfg.global_period == cfg.global_period - 1 else "sliding_attention"
        for i in range(n)
    ]
    return transformers.Gemma3nTextConfig(
        vocab_size=cfg.vocab,
        vocab_size_per_layer_input=cfg.vocab_per_layer,
        hidden_size=cfg.hidden,
        intermediate_size=cfg.ffn,
        num_hidden_layers=n,
        num_attention_heads=cfg.n_q_heads,
        num_key_value_heads=cfg.n_kv_heads,
        head_dim=cfg.head_dim,
        hidden_size_per_layer_input=cfg.ple_dim,
        altup_num_inputs=cfg.altup_streams,
        laurel_rank=cfg.laurel_rank,
        num_kv_shared_layers=n - cfg.first_kv_shared_layer,
        activation_sparsity_pattern=[0.95] * cfg.n_sparse_layers
        + [0.0] * (n - cfg.n_sparse_layers),
        sliding_window=cfg.sliding_window,
        layer_types=layer_types,
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": cfg.theta_global},
            "sliding_attention": {"rope_type": "default", "rope_theta": cfg.theta_local},
        },
        final_logit_softcapping=cfg.final_softcap,
        rms_norm_eps=cfg.rms_eps,
        max_position_embeddings=cfg.max_seq,
        attn_implementation="eager",
        dtype=torch.float32,
    )


def _randomise(model) -> None:
    """Every parameter random: norms U(0.5, 1.5), altup_scale U(-1.5, 1.5), the rest
    fan-in scaled normal (embeddings std 0.5, so logits spread over several units)."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                new = 0.5 + torch.rand(p.shape, generator=gen)
            elif name.endswith("altup.correct_output_scale"):
                new = 3.0 * torch.rand(p.shape, generator=gen) - 1.5
            elif "embed_tokens" in name:
                new = 0.5 * torch.randn(p.shape, generator=gen)
            else:
                new = torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5
            p.copy_(new)


def _unused_k_norms(model, folder):
    """k_norm weights for the KV-sharing layers, in a shard of their own.

    transformers 5 builds no k_norm on KV-sharing layers, so ``save_pretrained`` leaves
    them out, while the tensor manifest lists them for every layer (published Gemma 3n
    checkpoints carry them). No decode step reads them; random values prove that.
    """
    from safetensors.torch import save_file

    cfg = model.config
    first_shared = cfg.num_hidden_layers - cfg.num_kv_shared_layers
    gen = torch.Generator().manual_seed(1)
    extra = {
        f"model.layers.{i}.self_attn.k_norm.weight": torch.rand(cfg.head_dim, generator=gen) + 5
        for i in range(first_shared, cfg.num_hidden_layers)
    }
    path = folder / "unused-k-norms.safetensors"
    save_file(extra, str(path))
    return path


@pytest.fixture(scope="module")
def hf_and_ckpt(hf, tmp_path_factory):
    from pccx_flow.weights.checkpoint import open_checkpoint
    from pccx_flow.weights.hf_import import import_safetensors

    model = transformers.Gemma3nForCausalLM(_hf_tiny_config()).eval()
    _randomise(model)
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied, as the spec says
    hf_dir = tmp_path_factory.mktemp("hf-tiny")
    model.save_pretrained(hf_dir)
    extra = _unused_k_norms(model, tmp_path_factory.mktemp("hf-extra"))
    sources = sorted(hf_dir.glob("*.safetensors")) + [extra]
    out = tmp_path_factory.mktemp("hf-tiny-pccx") / "ckpt"
    import_safetensors(sources, out, config=get_config("tiny"), quantize=False, progress=False)
    return model, open_checkpoint(out)


def _hf_logits(model, prefix):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prefix]), use_cache=False)
    return out.logits[0, -1].numpy()


def test_gemma3n_semantics_matches_transformers_step_by_step(hf_and_ckpt):
    from pccx_flow.reference.decode import decode_step, new_kv_cache

    model, ckpt = hf_and_ckpt
    cache = new_kv_cache(ckpt.config, "gemma3n")
    for position, token in enumerate(TOKENS):
        ours = decode_step(ckpt, token, position, cache, semantics="gemma3n")
        ref = _hf_logits(model, TOKENS[: position + 1])
        err = float(np.abs(ours - ref).max())
        assert err <= TOLERANCE, f"position {position}: max abs error {err:.3g}"
        assert int(np.argmax(ours)) == int(np.argmax(ref)), f"argmax differs at {position}"


def test_the_specification_semantics_is_not_transformers(hf_and_ckpt):
    """The comparison above can fail: the spec's own semantics disagrees by whole units."""
    from pccx_flow.reference.decode import decode_step, new_kv_cache

    model, ckpt = hf_and_ckpt
    cache = new_kv_cache(ckpt.config, "pccx")
    worst = 0.0
    for position, token in enumerate(TOKENS[:3]):
        ours = decode_step(ckpt, token, position, cache, semantics="pccx")
        worst = max(worst, float(np.abs(ours - _hf_logits(model, TOKENS[: position + 1])).max()))
    assert worst > 0.5
