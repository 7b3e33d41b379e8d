"""Canonical keys for torch tensors.

``Tensor.__reduce_ex__`` goes through ``torch.save``'s storage machinery: slow, a view pickles its
whole storage, and some layouts embed a storage pointer. So a tensor is keyed as:

* its class and instance state (``__dict__`` and slots, as torch's own pickling keeps them: a
  subclass's attributes are content) and ``requires_grad``;
* strided: dtype, shape and its elements in C order (device, strides, storage offset, lazy
  conjugate/negative bits are not content); bool bytes other than 0/1 read as True;
* sparse COO: dtype, shape and the *coalesced* indices and values (entry order and duplicates do
  not count; explicitly stored zeros do);
* quantized: dtype, quantization scheme and parameters, and the integer representation;
* nested: layout, dtype and each component;
* ``MaskedTensor``: its mask and its data with masked-out elements zeroed;
* meta tensors (no data): dtype, shape and layout only.

Other layouts (sparse CSR/CSC/BSR/BSC) take torch's own pickling.
"""

from __future__ import annotations

import sys
from typing import Any

from fncache.values.buffers import c_order_digest, class_token
from fncache.values.registry import guarded, register_lazy, register_type

__all__ = ["tensor_token"]

_SAME_SIZE_INT = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


def _state(torch: Any, t: Any) -> Any:
    get = getattr(torch._utils, "_get_obj_state", None)
    if get is not None:
        return get(t)
    return getattr(t, "__dict__", None) or None  # pragma: no cover - older torch


def _strided(torch: Any, t: Any) -> tuple[Any, ...]:
    """(dtype, shape, byte count, digest) of a strided tensor's elements in C order."""
    np = sys.modules.get("numpy") or __import__("numpy")
    data = t.detach()
    if data.device.type != "cpu":
        data = data.cpu()
    # Lazy conjugate / negative views carry a flag, not different bytes: materialise them.
    data = data.resolve_conj().resolve_neg()
    if data.dtype is torch.bool and data.numel() and int(data.view(torch.uint8).max()) > 1:
        data = data.view(torch.uint8) != 0
    try:
        arr = data.numpy()
    except (TypeError, RuntimeError):  # bfloat16, float8, complex32: same bytes as an int type
        arr = data.view(getattr(torch, _SAME_SIZE_INT[data.element_size()])).numpy()
    return (str(t.dtype), tuple(t.shape), *c_order_digest(np, arr))


def tensor_token(t: Any) -> Any:
    """A tensor as described in the module docstring, or ``NotImplemented`` for other layouts."""
    torch = sys.modules["torch"]
    kind = class_token(type(t), "torch")  # a Parameter is not a plain Tensor; a subclass by its code
    state = _state(torch, t)
    masked = sys.modules.get("torch.masked")
    if masked is not None and isinstance(t, masked.MaskedTensor):
        return _masked_token(torch, t, kind, state)
    head = (kind, bool(t.requires_grad), state)
    if t.is_nested:
        return (*head, "nested", str(t.layout), str(t.dtype),
                tuple(_strided(torch, c) for c in t.unbind()))
    if t.device.type == "meta":
        return (*head, "meta", str(t.dtype), tuple(t.shape), str(t.layout))
    if t.is_quantized:
        return (*head, *_quantized_token(torch, t))
    if t.layout is torch.sparse_coo:
        c = t.detach().coalesce()
        return (*head, "sparse_coo", str(t.dtype), tuple(t.shape),
                _strided(torch, c.indices()), _strided(torch, c.values()))
    if t.layout is torch.strided:
        return (*head, "strided", *_strided(torch, t))
    return NotImplemented


def _masked_token(torch: Any, t: Any, kind: Any, state: Any) -> Any:
    """A ``MaskedTensor``: its mask and its data with the masked-out elements zeroed."""
    # Its data and mask live in its __dict__: keyed here, not as part of its state.
    if isinstance(state, dict):
        state = {k: v for k, v in state.items() if k not in ("_masked_data", "_masked_mask")}
    head = (kind, bool(t.requires_grad), state)
    data, mask = t.get_data(), t.get_mask()
    if data.layout is torch.strided:
        data = data.masked_fill(~mask, 0)
    return (*head, "masked", tensor_token(mask), tensor_token(data))


def _quantized_token(torch: Any, t: Any) -> tuple[Any, ...]:
    """The parts of a quantized tensor's token after its head: scheme, its parameters (per tensor
    or per channel) and the integer representation."""
    scheme = t.qscheme()
    if scheme in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        params: Any = (float(t.q_scale()), int(t.q_zero_point()))
    else:
        params = (_strided(torch, t.q_per_channel_scales()),
                  _strided(torch, t.q_per_channel_zero_points()), int(t.q_per_channel_axis()))
    return ("quantized", str(t.dtype), str(scheme), params, _strided(torch, t.int_repr()))


@register_lazy("torch")
def _register() -> None:
    import torch

    register_type(torch.Tensor, guarded(tensor_token), not_content=(
        ("device, strides, storage offset, the storage beyond a view", "layout: C-order elements"),
        ("lazy conjugate and negative bits", "a flag for the same values, resolved before keying"),
        ("a sparse tensor's entry order and duplicates", "keyed coalesced"),
        ("grad, grad_fn, _backward_hooks", "autograd bookkeeping, not the tensor's value"),
    ))
