"""The `genz` profile on several chips (TP, PP, EP, beams, int8/fp8) against
GenZ's rules worked by hand.

`genz_by_hand` below is plain Python arithmetic written from
tests/data/genz/CONVENTIONS.md alone (no jaxplat code): each operator's
roofline max(compute, memory, communication) summed over the whole model,
GenZ's collective formulas, its PP conventions (ub = max(batch // pp, 1),
every layer plus pp - 1 message passes, its throughput formula) and its
summary numbers (weights and KV per chip summed over stages, KV of one
micro-batch). The end-to-end TP=8 70B numbers of tests/data/genz/README.md are
checked too, so the multi-chip path did not move the one-chip anchor.
"""

import math

import pytest
from helpers import GiB, genz_system, workload

import jaxplat as jp

OPTS = jp.Options(profile="genz")
ONCHIP = 18000 * GiB  # GenZ's on-chip bandwidth
OVERHEAD = 5e-6  # s added to every AR / AG / A2A


def genz_by_hand(cfg, sysd, *, batch, beams, prompt, output, tp=1, pp=1, ep=1, bits="bf16"):
    """GenZ's prefill and decode latency (s), decode throughput (tokens/s),
    weights and KV (bytes per chip), from CONVENTIONS.md with plain floats.

    cfg: dict with L, D, H, Hkv, Dq, Df, V, fi and for MoE E, K (Df = expert width).
    sysd: dict with F (bf16 FLOP/s), BW (B/s), eff, link (B/s), lat (s).
    """
    L, D, H, Hkv, Dq, Df, V, fi = (cfg[k] for k in ("L", "D", "H", "Hkv", "Dq", "Df", "V", "fi"))
    E, K = cfg.get("E", 0), cfg.get("K", 0)
    F, BW, eff, link, lat = (sysd[k] for k in ("F", "BW", "eff", "link", "lat"))
    bpe = {"bf16": 2.0, "int8": 1.0, "fp8": 1.0}[bits]
    mult = {"bf16": 1.0, "int8": 0.5, "fp8": 0.5}[bits]
    ub = max(batch // pp, 1) if pp > 1 else batch
    nmb = batch // ub
    h = math.ceil(H / (tp * ep))
    hk = max(math.ceil(Hkv / (tp * ep)), 1)
    dff = math.ceil(Df / tp)
    vs = V // (tp * ep)

    def op(macs, off=0.0, on=0.0):  # element counts; 0 when there is no work
        if macs == 0:
            return 0.0
        return max(2 * macs * mult / (F * eff), (off * bpe / BW + on * bpe / ONCHIP) / eff)

    def ar(n, elems):
        return 0.0 if n == 1 else OVERHEAD + 2 * (n - 1) * lat + 2 * (n - 1) * elems * bpe / (n * link)

    def ag(n, elems):  # also A2A
        return 0.0 if n == 1 else OVERHEAD + (n - 1) * lat + (n - 1) * elems * bpe / (n * link)

    def msg(elems):
        return lat + elems * bpe / link

    def ffn(B, T, on_chip):  # dense FFN or MoE, one layer, plus its collectives
        tok = B * T
        io = (lambda a, w, o: (w, a + o)) if on_chip else (lambda a, w, o: (a + w + o, 0.0))
        if not E:
            t = op(tok * fi * dff * D, *io(tok * D, fi * dff * D, tok * fi * dff))
            t += op(tok * dff * D, *io(tok * dff, dff * D, tok * D))
            return t + ar(tp, tok * D)
        t = op(tok * E * (D // tp), tok * (D // tp) + E * (D // tp) + tok * E)  # gate, off-chip
        t += ar(tp, tok * (E if T > 1 else D))
        t += 2 * ag(ep, tok * K * D)  # dispatch and collect A2A
        if T > 1:
            n_tok = B * (T * K // E)
            local = E // ep
            t += op(n_tok * local * dff * fi * D, n_tok * D + local * dff * fi * D + n_tok * local * dff * fi)
            t += op(n_tok * local * dff * D, n_tok * local * dff + local * dff * D + n_tok * D)
        else:
            a = max(1, math.ceil(K / ep))
            t += op(tok * a * dff * fi * D, *io(tok * D, a * dff * fi * D, tok * a * dff * fi))
            t += op(tok * a * dff * D, *io(tok * a * dff, a * dff * D, tok * D))
        return t + ar(tp, tok * D)

    # Prefill: one micro-batch (B = ub, no beams) crossing the pipeline.
    B, T = ub, prompt
    layer = (op(B * T * (h + 2 * hk) * Dq * D, B * T * D + (h + 2 * hk) * Dq * D + B * T * (h + 2 * hk) * Dq)
             + op(B * h * T * T * Dq, B * T * h * Dq + B * T * hk * Dq, B * h * T * T)      # logit
             + op(B * h * T * T * Dq, B * T * hk * Dq + B * T * h * Dq, B * h * T * T)      # attend
             + op(B * T * h * Dq * D, B * T * h * Dq + h * Dq * D + B * T * D)              # out proj
             + ar(tp * ep, B * T * D) + ffn(B, T, on_chip=False))
    emb = op(B * T * D * vs, B * vs * T + D * vs + B * T * D) + ar(tp * ep, B * T * D)
    head = op(B * T * D * vs, B * T * D + vs * D + B * T * vs) + ag(tp * ep, B * T * V)
    prefill = emb + L * layer + head + (pp - 1) * msg(B * T * D)

    # Decode: one step at context prompt + output, B = ub x beams.
    b, B, P, O = ub, ub * beams, prompt, output
    layer = (op(B * (h + 2 * hk) * Dq * D, (h + 2 * hk) * Dq * D, B * D + B * (h + 2 * hk) * Dq)
             + op(b * h * P * Dq, b * P * hk * Dq, b * h * Dq + b * h * P)             # logit prefix
             + op(B * h * O * Dq, B * O * hk * Dq, B * h * Dq + B * h * O)             # logit suffix
             + op(b * h * P * Dq, b * P * hk * Dq, b * h * P + b * h * Dq)             # attend prefix
             + op(B * h * O * Dq, B * O * hk * Dq, B * h * O + B * h * Dq)             # attend suffix
             + op(B * h * Dq * D, h * Dq * D, B * h * Dq + B * D)                      # out proj
             + ar(tp * ep, B * D) + ffn(B, 1, on_chip=True))
    head = op(B * D * vs, B * D + vs * D + B * vs) + ag(tp * ep, B * V)
    decode = L * layer + head + (pp - 1) * msg(B * D)
    ltot = decode if pp == 1 else (nmb - 1) * decode / pp + decode
    throughput = batch / ltot

    # Summary numbers: per chip, summed over the stages.
    attn_w = (h + 2 * hk) * Dq * D + h * Dq * D
    if E:
        ffn_w = E * (D // tp) + (E // ep) * dff * (fi + 1) * D
    else:
        ffn_w = (fi + 1) * dff * D
    weights = (L * (attn_w + ffn_w) + 2 * vs * D) * bpe
    kv = L * 2 * (ub * hk * P + ub * beams * hk * O) * Dq * bpe
    return dict(prefill=prefill, decode=decode, throughput=throughput, weights=weights, kv=kv)


LLAMA70 = dict(L=80, D=8192, H=64, Hkv=8, Dq=128, Df=28672, V=128256, fi=2)
LLAMA7 = dict(L=32, D=4096, H=32, Hkv=32, Dq=128, Df=11008, V=32000, fi=2)
MIXTRAL = dict(L=32, D=4096, H=32, Hkv=8, Dq=128, Df=14336, V=32000, fi=2, E=8, K=2)


def _model(cfg):
    d = dict(num_hidden_layers=cfg["L"], hidden_size=cfg["D"], num_attention_heads=cfg["H"],
             num_key_value_heads=cfg["Hkv"], head_dim=cfg["Dq"], intermediate_size=cfg["Df"],
             vocab_size=cfg["V"])
    if cfg.get("E"):
        d.update(num_local_experts=cfg["E"], num_experts_per_tok=cfg["K"])
    return jp.model.model_from_config(d)


H100 = dict(F=989e12, BW=3400 * GiB, eff=1.0, link=450 * GiB, lat=1e-6)
B200 = dict(F=2250e12, BW=8000 * GiB, eff=0.8, link=900 * GiB, lat=0.25e-6)

CASES = [  # (name, model, system, workload, parallel)
    ("70b_tp8_anchor", LLAMA70, H100, dict(batch=8, beams=1, prompt=1024, output=256), dict(tp=8)),
    ("70b_tp4_pp2_beams2_int8", LLAMA70, H100, dict(batch=8, beams=2, prompt=512, output=128, bits="int8"),
     dict(tp=4, pp=2)),
    ("70b_tp16_kv_replicated_fp8", LLAMA70, B200, dict(batch=4, beams=1, prompt=2000, output=300, bits="fp8"),
     dict(tp=16)),
    ("7b_pp4_batch3_beams4", LLAMA7, B200, dict(batch=3, beams=4, prompt=700, output=50), dict(pp=4)),
    ("mixtral_tp2_ep4_int8", MIXTRAL, H100, dict(batch=4, beams=1, prompt=1024, output=64, bits="int8"),
     dict(tp=2, ep=4)),
    ("mixtral_ep8_pp2_beams2", MIXTRAL, B200, dict(batch=6, beams=2, prompt=333, output=99), dict(ep=8, pp=2)),
]


def _system(s):
    return genz_system(s["F"] / 1e12, s["BW"] / GiB, eff=s["eff"], link_gbs=s["link"] / GiB, link_us=s["lat"] * 1e6)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_genz_multichip_matches_hand_worked_rules(case):
    _, cfg, sysd, wlk, park = case
    wlk = dict(wlk)
    bits = wlk.pop("bits", "bf16")
    want = genz_by_hand(cfg, sysd, bits=bits, **wlk, **park)
    m = jp.evaluate(_model(cfg), _system(sysd), jp.Parallel(**park), workload(dtype=bits, **wlk), OPTS)
    assert float(m.ttft) == pytest.approx(want["prefill"], rel=1e-3)
    assert float(m.tpot) == pytest.approx(want["decode"], rel=1e-3)
    assert float(m.throughput) == pytest.approx(want["throughput"], rel=1e-3)
    assert float(m.weights_bytes) == pytest.approx(want["weights"], rel=1e-4)
    assert float(m.kv_bytes) == pytest.approx(want["kv"], rel=1e-4)


def test_genz_tp8_anchor_is_readme_number():
    """The hand rules themselves reproduce GenZ's published 70B TP=8 numbers
    (tests/data/genz/README.md: 234.02 ms prefill, 8.011 ms decode)."""
    want = genz_by_hand(LLAMA70, H100, batch=8, beams=1, prompt=1024, output=256, tp=8)
    assert want["prefill"] * 1e3 == pytest.approx(234.02, rel=1e-3)
    assert want["decode"] * 1e3 == pytest.approx(8.011, rel=1e-3)


def test_genz_fit_rule_uses_pp_chips():
    """GenZ checks weights + KV (summed over stages) against pp chips' memory:
    a 70B model in bf16 (141 GB) does not fit one 80 GB chip, fits two stages."""
    hw = genz_system(989, 3400, link_gbs=450, link_us=1.0, mem_gb=80)
    wl = workload(batch=1, prompt=128, output=16)
    one = jp.evaluate(_model(LLAMA70), hw, jp.Parallel(), wl, OPTS)
    two = jp.evaluate(_model(LLAMA70), hw, jp.Parallel(pp=2), wl, OPTS)
    assert not bool(one.fits) and bool(two.fits)
    assert float(two.weights_bytes) == pytest.approx(float(one.weights_bytes), rel=1e-6)  # summed over stages
