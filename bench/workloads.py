# SPDX-License-Identifier: MIT
#
# bench/workloads.py: the programs the benchmark and the call tracer run,
# each written as its framework's users write it. A workload is built in the
# process that runs it (after any fork) by make(name, args, idx); prepare()
# builds it, computes a reference on the CPU, moves it to the GPU and checks
# the GPU's first answer against the reference (returning ("ok", "") or
# ("wrong", why)); request(k) serves one request. ITEMS says how many items
# one request stands for (tokens for the decode), for the throughput.
#
#   cnn          PyTorch batch-1 CNN (conv + batch norm + ReLU x4, pool, linear),
#                fp32, host input -> GPU -> forward -> result to the host
#   transformer  PyTorch 2-layer encoder on 64 tokens, same shape of request
#   decode       HF transformers GPT-2 (124M, built from its config with a fixed
#                seed), fp16, batch 1, greedy decode of 32 new tokens after 8
#   gemmfft      CuPy: DGEMM 1024^2, FFT of 2^20 complex doubles, reductions,
#                the scalar result to the host
#   compile      the CNN through torch.compile (default mode)
#   compile_ro   the CNN through torch.compile(mode="reduce-overhead"): CUDA graphs
#   conv_train   a cuDNN conv training step: fp16, channels_last, batch 32, SGD
#   jax          a JAX jit-compiled MLP training step, loss to the host
#   rawkernel    a CuPy RawKernel (saxpy) launched 8 times, a sum to the host
#
# Every check is against float64 or float32 on the CPU; nothing is timed
# here (bench/infer.py times requests). A workload that names MARKS calls
# self.mark(i) at those points of a request (after its last command before
# a synchronisation, and after its first command past one); bench/infer.py's
# INFER_GPU_SPANS sets mark to record an event there, so that the GPU's
# clock tells each part of a request, and each wait between, apart.

import hashlib
import os

INPUT_POOL = 16
RTOL = 1e-3
SEQ, VOCAB, D_MODEL = 64, 1000, 256
DECODE_PROMPT, DECODE_TOKENS = 8, 32


def _no_mark(i):
    pass


NAMES = ("cnn", "transformer", "decode", "gemmfft", "compile", "compile_ro", "conv_train", "jax", "rawkernel")
ITEMS = {"decode": DECODE_TOKENS}
UNITS = {"decode": "tokens/s"}
NEEDS_TORCH = {"cnn", "transformer", "decode", "compile", "compile_ro", "conv_train"}


def rel_err(got, ref):
    """max |got - ref| / max |ref| over arrays (numpy-like, on the CPU)."""
    import numpy as np
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    scale = max(float(np.abs(ref).max()), 1e-30)
    return float(np.abs(got - ref).max()) / scale


class TorchWorkload:
    """A small model in eval mode under inference_mode; a request is a host
    array -> torch.from_numpy -> .to(device) -> forward -> .cpu(), as an
    interactive server does it (pageable memory, a synchronous copy back).
    `compile` runs the CNN through torch.compile (mode None or
    "reduce-overhead")."""

    def __init__(self, args, idx, model="cnn", compile_mode=False):
        import torch
        self.args, self.idx, self.torch, self.model_name = args, idx, torch, model
        self.compile_mode = compile_mode
        try:
            import numpy
            self.np = numpy
        except ImportError:          # torch runs without numpy: host tensors instead
            self.np = None

    def _build(self):
        torch, nn = self.torch, self.torch.nn
        torch.manual_seed(self.args.seed)
        if self.model_name == "cnn":
            def block(cin, cout, stride):
                return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                        nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
            net = nn.Sequential(*block(3, 32, 1), *block(32, 64, 2), *block(64, 128, 2),
                                *block(128, 128, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                nn.Linear(128, 10))
            # Fresh batch norms are the identity: give them statistics of
            # their own so the check compares a real computation.
            for m in net.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.1, 0.1)
                    m.running_var.uniform_(0.5, 1.5)
                    m.weight.data.uniform_(0.5, 1.5)
                    m.bias.data.uniform_(-0.1, 0.1)
            return net

        class TextClassifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(VOCAB, D_MODEL)
                self.pos = nn.Parameter(torch.randn(1, SEQ, D_MODEL) * 0.02)
                layer = nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=4 * D_MODEL,
                                                   batch_first=True)
                try:
                    self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
                except TypeError:    # older torch: no such argument
                    self.encoder = nn.TransformerEncoder(layer, num_layers=2)
                self.head = nn.Linear(D_MODEL, 10)

            def forward(self, ids):
                return self.head(self.encoder(self.embed(ids) + self.pos).mean(dim=1))
        return TextClassifier()

    def _inputs(self):
        seed = self.args.seed * 1000 + self.idx
        cnn = self.model_name == "cnn"
        if self.np is not None:
            rng = self.np.random.default_rng(seed)
            if cnn:
                return [rng.standard_normal((1, 3, 64, 64), dtype=self.np.float32) for _ in range(INPUT_POOL)]
            return [rng.integers(0, VOCAB, (1, SEQ), dtype=self.np.int64) for _ in range(INPUT_POOL)]
        g = self.torch.Generator().manual_seed(seed)
        if cnn:
            return [self.torch.randn(1, 3, 64, 64, generator=g) for _ in range(INPUT_POOL)]
        return [self.torch.randint(0, VOCAB, (1, SEQ), generator=g) for _ in range(INPUT_POOL)]

    def context(self):
        return self.torch.inference_mode()

    def prepare(self):
        torch = self.torch
        torch.set_num_threads(self.args.threads)
        # TF32 would make the GPU differ from the CPU by ~1e-3: keep fp32 exact
        # enough for the check (and the same in every column).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.inputs = self._inputs()
        self.model = self._build().eval()
        with torch.inference_mode():
            ref = self.model(self._host(0))
        self.dev = torch.device(self.args.device)
        self.model.to(self.dev)          # the child's first CUDA call: its context (or its refusal)
        if self.compile_mode is not False:
            self.model = torch.compile(self.model, mode=self.compile_mode)
        with torch.inference_mode():
            got = self.request(0)
            if self.compile_mode is not False:
                for k in range(3):       # reduce-overhead records its graph on the third call
                    got = self.request(0)
        scale = max(ref.abs().max().item(), 1e-6)
        if torch.allclose(got, ref, rtol=RTOL, atol=RTOL * scale):
            return "ok", ""
        err = (got - ref).abs().max().item()
        return "wrong", f"child {self.idx}: first answer differs from the CPU's by {err:.3g} (scale {scale:.3g})"

    def _host(self, k):
        x = self.inputs[k % INPUT_POOL]
        return self.torch.from_numpy(x) if self.np is not None else x

    MARKS = ("forward",)                 # then: the copy back and the wait for it
    mark = staticmethod(_no_mark)

    def request(self, k):
        y = self.model(self._host(k).to(self.dev))
        self.mark(0)
        return y.cpu()


class DecodeWorkload:
    """GPT-2 small from its configuration (random weights from a fixed seed),
    fp16 on the GPU, greedy decoding of DECODE_TOKENS tokens after a prompt
    of DECODE_PROMPT, KV cache on, as HF transformers' generate() does it.
    Checked: the prompt's logits against float32 on the CPU; the generated
    tokens are hashed (`answer`), so that columns can be compared."""

    def __init__(self, args, idx):
        import torch
        self.args, self.idx, self.torch = args, idx, torch

    def context(self):
        return self.torch.inference_mode()

    def prepare(self):
        torch = self.torch
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.set_num_threads(self.args.threads)
        torch.manual_seed(self.args.seed)
        cfg = GPT2Config()
        model = GPT2LMHeadModel(cfg).eval()
        g = torch.Generator().manual_seed(self.args.seed * 1000 + self.idx)
        self.prompt = torch.randint(0, cfg.vocab_size, (1, DECODE_PROMPT), generator=g)
        with torch.inference_mode():
            ref = model(self.prompt).logits[0, -1].float()
        self.dev = torch.device(self.args.device)
        self.model = model.half().to(self.dev)
        self.model.generation_config.pad_token_id = cfg.eos_token_id
        self.prompt_dev = self.prompt.to(self.dev)
        self.mask_dev = torch.ones_like(self.prompt_dev)
        with torch.inference_mode():
            got = self.model(self.prompt_dev).logits[0, -1].float().cpu()
            out = self.request(0)
        scale = max(ref.abs().max().item(), 1e-6)
        err = (got - ref).abs().max().item() / scale
        self.answer = hashlib.sha256(out.cpu().numpy().tobytes()).hexdigest()[:16]
        if out.shape[-1] != DECODE_PROMPT + DECODE_TOKENS:
            return "wrong", f"child {self.idx}: generated {out.shape[-1] - DECODE_PROMPT} tokens"
        if err > 2e-2:
            return "wrong", f"child {self.idx}: fp16 logits differ from float32 on the CPU by {err:.3g} of the largest"
        return "ok", ""

    def request(self, k):
        return self.model.generate(self.prompt_dev, attention_mask=self.mask_dev, max_new_tokens=DECODE_TOKENS,
                                   min_new_tokens=DECODE_TOKENS, do_sample=False)


class GemmFftWorkload:
    """CuPy, as an HPC rank uses it: a DGEMM of two 1024x1024 doubles, an FFT
    of 2^20 complex doubles, two reductions, their sum to the host."""

    def __init__(self, args, idx):
        self.args, self.idx = args, idx

    def context(self):
        return _Null()

    def prepare(self):
        import cupy as cp
        import numpy as np
        self.cp = cp
        rng = np.random.default_rng(self.args.seed * 1000 + self.idx)
        a, b = rng.standard_normal((1024, 1024)), rng.standard_normal((1024, 1024))
        x = rng.standard_normal(1 << 20) + 1j * rng.standard_normal(1 << 20)
        ref = (a @ b).sum() + np.abs(np.fft.fft(x)).max()
        self.a, self.b, self.x = cp.asarray(a), cp.asarray(b), cp.asarray(x)
        got = self.request(0)
        err = abs(got - ref) / max(abs(ref), 1e-30)
        return ("ok", "") if err < 1e-9 else ("wrong", f"child {self.idx}: {got} vs {ref} on the CPU (rel {err:.3g})")

    # The request's parts on the GPU's clock: the GEMM, FFT and first sum;
    # the copy of that sum and the way back to the next command; the
    # second reduction; and (to the closing event) the last copy and wait.
    MARKS = ("gemm+fft+sum", "sync 1", "abs+max")
    mark = staticmethod(_no_mark)

    def request(self, k):
        cp = self.cp
        c = self.a @ self.b
        f = cp.fft.fft(self.x)
        s = c.sum()
        self.mark(0)
        v = float(s)
        self.mark(1)
        m = cp.abs(f).max()
        self.mark(2)
        return v + float(m)


class ConvTrainWorkload:
    """One training step of a small conv net with cuDNN: fp16 weights and
    activations in channels_last, batch 32 of 3x64x64, cross-entropy, SGD;
    the loss to the host. Checked: the first step's loss against float32 on
    the CPU."""

    def __init__(self, args, idx):
        import torch
        self.args, self.idx, self.torch = args, idx, torch

    def context(self):
        return _Null()

    def _net(self):
        nn = self.torch.nn
        return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                             nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                             nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

    def prepare(self):
        torch = self.torch
        torch.set_num_threads(self.args.threads)
        torch.manual_seed(self.args.seed)
        net = self._net()
        g = torch.Generator().manual_seed(self.args.seed * 1000 + self.idx)
        self.x = torch.randn(32, 3, 64, 64, generator=g)
        self.y = torch.randint(0, 10, (32,), generator=g)
        ref = torch.nn.functional.cross_entropy(net(self.x), self.y).item()
        self.dev = torch.device(self.args.device)
        self.net = net.to(self.dev, memory_format=torch.channels_last).half()
        self.xd = self.x.to(self.dev).half().contiguous(memory_format=torch.channels_last)
        self.yd = self.y.to(self.dev)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=1e-3)
        got = self.request(0)
        err = abs(got - ref) / max(abs(ref), 1e-6)
        return ("ok", "") if err < 2e-2 else ("wrong", f"child {self.idx}: fp16 loss {got} vs {ref} on the CPU")

    def request(self, k):
        torch = self.torch
        self.opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(self.net(self.xd).float(), self.yd)
        loss.backward()
        self.opt.step()
        return loss.item()


class JaxWorkload:
    """A jit-compiled training step of a 3-layer MLP (batch 64, 512 wide) in
    JAX, the loss to the host. Checked: the first loss against numpy."""

    def __init__(self, args, idx):
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        self.args, self.idx = args, idx

    def context(self):
        return _Null()

    def prepare(self):
        import jax
        import jax.numpy as jnp
        import numpy as np
        rng = np.random.default_rng(self.args.seed * 1000 + self.idx)
        ws = [rng.standard_normal(s).astype(np.float32) * 0.05 for s in ((256, 512), (512, 512), (512, 10))]
        x = rng.standard_normal((64, 256)).astype(np.float32)
        h = np.maximum(x @ ws[0], 0)
        h = np.maximum(h @ ws[1], 0)
        ref = float(((h @ ws[2]) ** 2).mean())

        def loss(p, x):
            h = jax.nn.relu(x @ p[0])
            h = jax.nn.relu(h @ p[1])
            return ((h @ p[2]) ** 2).mean()

        @jax.jit
        def step(p, x):
            v, g = jax.value_and_grad(loss)(p, x)
            return [w - 1e-3 * gw for w, gw in zip(p, g)], v

        self.step = step
        self.p = [jnp.asarray(w) for w in ws]
        self.x = jnp.asarray(x)
        got = self.request(0)
        err = abs(got - ref) / max(abs(ref), 1e-12)
        return ("ok", "") if err < 1e-2 else ("wrong", f"child {self.idx}: loss {got} vs {ref} in numpy")

    def request(self, k):
        self.p, v = self.step(self.p, self.x)
        return float(v)


class RawKernelWorkload:
    """A CuPy RawKernel (y = a*x + y on 2^20 floats) launched 8 times, then
    a sum to the host. Checked against numpy."""

    SRC = r'''
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''

    def __init__(self, args, idx):
        self.args, self.idx = args, idx

    def context(self):
        return _Null()

    def prepare(self):
        import cupy as cp
        import numpy as np
        self.cp, self.np = cp, np
        n = 1 << 20
        rng = np.random.default_rng(self.args.seed * 1000 + self.idx)
        x = rng.integers(-8, 8, n).astype(np.float32)
        y = rng.integers(-8, 8, n).astype(np.float32)
        self.kernel = cp.RawKernel(self.SRC, "saxpy")
        self.n = n
        self.x, self.y = cp.asarray(x), cp.asarray(y)
        got = self.request(0)
        ref = float((y.astype(np.float64) + 8 * 0.5 * x.astype(np.float64)).sum())
        return ("ok", "") if abs(got - ref) <= 1e-6 * max(abs(ref), 1) else \
            ("wrong", f"child {self.idx}: sum {got}, numpy {ref}")

    def request(self, k):
        cp = self.cp
        for _ in range(8):
            self.kernel(((self.n + 255) // 256,), (256,), (cp.float32(0.5), self.x, self.y, cp.int32(self.n)))
        s = float(self.y.sum(dtype=cp.float64))
        return s


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# INFER_GPU_SPANS's names for each part of a request: one per mark, then
# the last part, from the last mark to the event after the request.
LAST_PART = "copy back + wait"
MARK_NAMES = {n: TorchWorkload.MARKS + (LAST_PART,) for n in ("cnn", "transformer", "compile", "compile_ro")}
MARK_NAMES["gemmfft"] = GemmFftWorkload.MARKS + (LAST_PART,)


def make(name, args, idx):
    if name in ("cnn", "transformer"):
        return TorchWorkload(args, idx, name)
    if name == "compile":
        return TorchWorkload(args, idx, "cnn", compile_mode=None)
    if name == "compile_ro":
        return TorchWorkload(args, idx, "cnn", compile_mode="reduce-overhead")
    if name == "decode":
        return DecodeWorkload(args, idx)
    if name == "gemmfft":
        return GemmFftWorkload(args, idx)
    if name == "conv_train":
        return ConvTrainWorkload(args, idx)
    if name == "jax":
        return JaxWorkload(args, idx)
    if name == "rawkernel":
        return RawKernelWorkload(args, idx)
    raise ValueError(f"unknown workload {name}")
