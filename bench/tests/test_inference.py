"""--mode inference on the CPU: the KV-cache decode is the model's own forward, the accuracy and throughput figures
are computed as documented, the backend choice and the errors are what the protocol says. Debian's torch 1.13 runs
these; the FP8 libraries are not needed (torch-fp8 runs its fp32 emulation; torchao / modelopt say why they cannot)."""
import torch
import torch.nn.functional as F

from plbench import inference
from plbench.presets import PRESETS, Preset
from plbench.workloads import TransformerLM, build_preset

LLAMA = Preset("tiny-llama", "llama", 64, 2, 4, 2, 128, 2, 32, "test: GQA 4/2 heads", vocab=512, hidden_test=True)


def _model(preset):
    torch.manual_seed(0)
    return TransformerLM(preset, seq=32).eval()


def _reference_logits(model, tokens):
    """The preset's own training forward, up to the lm-head (what LMHeadLoss computes before the loss)."""
    x = model.tok_emb(tokens)
    if model.pos_emb is not None:
        x = x + model.pos_emb(torch.arange(tokens.shape[1]))
    for blk in model.blocks:
        x = blk(x)
    return model.head.lm_head(model.head.norm(x))


def test_kv_cache_prefill_and_decode_equal_the_full_forward_gpt_and_gqa_llama():
    for preset in (PRESETS["tiny"], LLAMA):
        model = _model(preset)
        tokens = torch.randint(0, preset.vocab, (2, 12))
        with torch.no_grad():
            full = _reference_logits(model, tokens)
            cache = {}
            pre = inference.forward_logits(model, tokens[:, :8], cache, 0)
            steps = [inference.forward_logits(model, tokens[:, i:i + 1], cache, i) for i in range(8, 12)]
        assert torch.allclose(pre, full[:, :8], atol=1e-5), preset.name
        assert torch.allclose(torch.cat(steps, dim=1), full[:, 8:], atol=1e-5), preset.name
        assert cache[0][0].shape[2] == 12  # every position cached


def test_generate_is_greedy_and_returns_one_step_per_token():
    model = _model(PRESETS["tiny"])
    with torch.no_grad():
        prefill, steps = inference.generate(model, torch.randint(0, 512, (2, 5)), 3)
    assert prefill.shape == (2, 5, 512) and len(steps) == 3 and steps[0].shape == (2, 1, 512)


def test_accuracy_figures():
    ref = torch.tensor([[[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]]])
    out = torch.tensor([[[0.0, 0.5, 0.75], [2.0, 0.0, 0.5]]])
    acc = inference.accuracy(ref, out)
    assert acc["max_abs_logit_diff"] == 0.75
    assert abs(acc["mean_abs_logit_diff"] - 1.75 / 6) < 1e-7
    assert acc["next_token_agreement"] == 0.5  # position 0 flips from token 1 to token 2
    merged = inference.merge_accuracy([acc, inference.accuracy(ref, ref)])
    assert merged == {"max_abs_logit_diff": 0.75, "mean_abs_logit_diff": acc["mean_abs_logit_diff"] / 2,
                      "next_token_agreement": 0.75}
    assert inference.merge_accuracy([]) is None


def test_throughput_counts_every_prompt_token_and_one_token_per_sequence_per_step():
    t = inference.throughput(batch=4, prompt_len=128, new_tokens=16, prefill_s=0.5, decode_s=2.0)
    assert t == {"prefill_tokens_per_s": 1024.0, "decode_tokens_per_s": 32.0}
    assert inference.throughput(4, 128, 0, 0.5, 0.0)["decode_tokens_per_s"] is None


def test_backend_choice():
    no_fp8 = {"fp8": {"available": False}, "torch_fp8": {"available": False}, "te": {"installed": False}}
    assert inference.choose_backends("auto", no_fp8, "cpu") == ["bf16", "torch-fp8"]
    assert inference.choose_backends("bf16, torchao,bf16", no_fp8, "cuda") == ["bf16", "torchao"]
    try:
        inference.choose_backends("bf16,int4", no_fp8, "cuda")
        raise AssertionError("an unknown backend must be refused")
    except inference.BenchError as err:
        assert err.code == "usage" and "int4" in err.message


def test_fp8_backend_keeps_the_lm_head_and_embeddings_and_stays_close_to_bf16():
    wl = build_preset("tiny", batch=2, seq=16, device="cpu", n_batches=1)
    model = wl.model.eval()
    tokens = torch.randint(0, 512, (2, 16))
    with torch.no_grad():
        ref = inference.forward_logits(model, tokens, {}, 0)
        model, ctx, notes = inference.prepare_backend("torch-fp8", model, wl, "cpu")
        with ctx():
            out = inference.forward_logits(model, tokens, {}, 0)
    assert set(notes["kept_high_precision"]) >= {"tok_emb", "pos_emb", "head.lm_head"}
    assert notes["emulated"] and notes["converted"] == 8  # qkv, proj, fc, proj in each of 2 blocks
    assert type(model.head.lm_head) is torch.nn.Linear
    acc = inference.accuracy(ref, out)
    assert 0 < acc["max_abs_logit_diff"] < 0.5 and acc["next_token_agreement"] > 0.8
    assert F.softmax(out, -1).sum(-1).allclose(torch.ones(2, 16))


def test_inference_mode_end_to_end_on_cpu(bench):
    r = bench(["--mode", "inference", "--device", "cpu", "--workload", "tiny", "--batch", "2", "--prompt-len", "16",
               "--new-tokens", "4", "--repeats", "1", "--eval-batches", "2"])
    assert r.rc == 0, r.stderr
    results = {e["backend"]: e for e in r.of("result")}
    assert list(results) == ["bf16", "torch-fp8"]
    for e in results.values():
        assert e["mode"] == "inference" and e["prefill_tokens_per_s"] > 0 and e["decode_tokens_per_s"] > 0
    assert "accuracy" not in results["bf16"]
    acc = results["torch-fp8"]["accuracy"]
    assert 0 < acc["max_abs_logit_diff"] and 0 < acc["next_token_agreement"] <= 1
    assert "EMULATED" in results["torch-fp8"]["label"]
    summary = r.of("summary")[0]
    assert summary["mode"] == "inference" and summary["ratios"]["torch-fp8"]["prefill_tokens_per_s"] > 0


def test_inference_mode_errors(bench):
    r = bench(["--mode", "inference", "--device", "cpu", "--workload", "tiny", "--backends", "bf16,torchao",
               "--prompt-len", "8", "--new-tokens", "2", "--repeats", "1", "--eval-batches", "1"])
    # bf16 still runs; torchao says why it cannot (not installed here, or no CUDA GPU)
    assert [e["backend"] for e in r.of("result")] == ["bf16"]
    assert r.errors("backend_failed") and r.rc != 0
    r = bench(["--mode", "inference", "--device", "cpu", "--workload", "mymodel:make"])
    assert r.errors("usage") and "presets" in r.errors("usage")[0]["message"]


def test_a_chunk_of_several_tokens_over_the_cache_equals_the_full_forward():
    # the masked branch: several new tokens attending to the cache and causally to each other
    model = _model(LLAMA)
    tokens = torch.randint(0, LLAMA.vocab, (2, 12))
    with torch.no_grad():
        full = _reference_logits(model, tokens)
        cache = {}
        inference.forward_logits(model, tokens[:, :7], cache, 0)
        chunk = inference.forward_logits(model, tokens[:, 7:12], cache, 7)
    assert torch.allclose(chunk, full[:, 7:12], atol=1e-5)


class _FakeTE(object):
    class Linear(torch.nn.Linear):
        seen_rows = []

        def forward(self, x):
            rows = x.numel() // x.shape[-1]
            assert rows % 8 == 0, "FP8 GEMM shape rule: %d rows" % rows
            self.seen_rows.append(rows)
            return super().forward(x)


def test_te_rows_are_padded_to_the_fp8_gemm_rule_and_the_output_is_unchanged():
    torch.manual_seed(1)
    model = torch.nn.Sequential(_FakeTE.Linear(16, 32), torch.nn.ReLU(), _FakeTE.Linear(32, 16))
    x = torch.randn(3, 1, 16)  # a decode step at batch 3
    with torch.no_grad():
        lin = torch.nn.functional.linear
        ref = lin(torch.relu(lin(x, model[0].weight, model[0].bias)), model[2].weight, model[2].bias)
        assert inference.pad_te_rows(model, _FakeTE) == 2
        out = model(x)
        again = model(torch.randn(8, 2, 16))  # 16 rows: no padding, hooks reset
    assert out.shape == (3, 1, 16) and torch.allclose(out, ref, atol=1e-6)
    assert _FakeTE.Linear.seen_rows == [8, 8, 16, 16] and again.shape == (8, 2, 16)


def test_compile_blocks_says_what_it_did():
    model = _model(PRESETS["tiny"])
    assert inference.compile_blocks(model, "te").startswith("no: TE modules")
    assert inference.compile_blocks(model, "modelopt").startswith("no: fake-quant")
    if not hasattr(torch, "compile"):
        assert inference.compile_blocks(model, "bf16").startswith("no: torch")
        return
    assert inference.compile_blocks(model, "bf16").startswith("yes")
    assert all(type(b.mlp).__name__ == "OptimizedModule" for b in model.blocks)


def test_a_backend_that_raises_is_one_non_fatal_error_naming_it():
    import types

    def broken_builder():
        raise RuntimeError("library bug")
    rc = {"args": types.SimpleNamespace(new_tokens=1, repeats=1, compile=False), "device": "cpu",
          "builder": broken_builder}
    try:
        inference.run_one_safely(rc, "torchao", [], [], None)
        raise AssertionError("must raise")
    except inference.BenchError as err:
        assert err.code == "backend_failed" and err.backend == "torchao" and err.fatal is False
        assert "RuntimeError: library bug" in err.message


def test_real_modelopt_fake_quant_reference_on_cpu(bench):
    import pytest
    pytest.importorskip("modelopt.torch.quantization")
    r = bench(["--mode", "inference", "--device", "cpu", "--workload", "tiny", "--batch", "2", "--prompt-len", "16",
               "--new-tokens", "2", "--repeats", "1", "--eval-batches", "1", "--backends", "bf16,modelopt"])
    assert r.rc == 0, r.stderr
    mo = [e for e in r.of("result") if e["backend"] == "modelopt"][0]
    assert mo["reference_only"] and "REFERENCE ONLY" in mo["label"]
    assert 0 < mo["accuracy"]["max_abs_logit_diff"] and mo["accuracy"]["next_token_agreement"] > 0.5


def test_backend_report_says_why_each_inference_backend_cannot_run():
    from plbench import inference_report as rep
    h200 = {"torch": "2.11", "cuda_available": True, "gpus": [{"name": "NVIDIA H200"}],
            "te": {"installed": True, "error": None}, "torchao": {"installed": True},
            "fp8": {"available": True}, "torch_fp8": {"available": True}}
    by = {b["id"]: b for b in rep.backend_report(h200)}
    assert list(by) == list(rep.INFERENCE_BACKENDS)
    assert all(by[b]["available"] for b in ("bf16", "torchao", "te", "torch-fp8"))
    assert by["modelopt"]["reference_only"] and "ACCURACY REFERENCE ONLY" in by["modelopt"]["description"]
    a100 = dict(h200, te={"installed": False}, torchao={"installed": False},
                fp8={"available": False, "reason": "compute capability 8.0 < 8.9"},
                torch_fp8={"available": False, "reason": "compute capability 8.0 < 8.9"})
    by = {b["id"]: b for b in rep.backend_report(a100)}
    assert by["bf16"]["available"] and by["bf16"]["reason"] is None
    assert by["te"]["reason"] == "Transformer Engine not installed"
    assert by["torchao"]["reason"] == "torchao not installed"
    assert by["torch-fp8"]["reason"] == "compute capability 8.0 < 8.9"
    no_gpu = dict(h200, cuda_available=False, gpus=[])
    assert {b["reason"] for b in rep.backend_report(no_gpu)} == {"no CUDA device"}
    assert {b["reason"] for b in rep.backend_report({"torch": None})} == {"PyTorch is not installed in this interpreter"}


def test_peak_memory_is_that_of_serving_not_of_building(monkeypatch):
    # the preset is built in fp32 and cast to bf16, conversions copy weights: the peak is reset after all that
    import types
    calls = []
    real_prepare, real_forward = inference.prepare_backend, inference.forward_logits
    monkeypatch.setattr(inference, "_peak_reset", lambda device: calls.append("reset"))
    monkeypatch.setattr(inference, "prepare_backend", lambda *a, **k: calls.append("prepare") or real_prepare(*a, **k))
    monkeypatch.setattr(inference, "forward_logits", lambda *a, **k: calls.append("forward") or real_forward(*a, **k))
    args = types.SimpleNamespace(new_tokens=1, repeats=1, compile=False)
    rc = {"args": args, "device": "cpu", "builder": lambda: build_preset("tiny", batch=1, seq=8, device="cpu", n_batches=1)}
    res, _ = inference.run_one(rc, "bf16", [torch.randint(0, 512, (1, 4))], [], None)
    first_forward = calls.index("forward")
    assert calls[:2] == ["reset", "prepare"] and calls[first_forward - 1] == "reset"
    assert "model_memory_bytes" in res["notes"]
