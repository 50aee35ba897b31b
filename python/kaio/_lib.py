"""Loads libkaio_c.so (kaio's C ABI, capi/kaio.h) and declares its functions for ctypes."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any, Callable

from . import errors

_LIB_NAME = "libkaio_c.so"


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """DLPack's DLTensor (kaio_tensor in capi/kaio.h)."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class Operand(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int32),
        ("value", ctypes.c_uint32),
        ("i", ctypes.c_int64),
        ("u", ctypes.c_uint64),
        ("f", ctypes.c_double),
    ]


class RopeParams(ctypes.Structure):
    _fields_ = [
        ("style", ctypes.c_int32),
        ("heads", ctypes.c_uint32),
        ("head_dim", ctypes.c_uint32),
        ("rotary_dim", ctypes.c_uint32),
        ("theta", ctypes.c_float),
        ("position_offset", ctypes.c_uint32),
    ]


class MatmulOptions(ctypes.Structure):
    _fields_ = [
        ("alpha", ctypes.c_float),
        ("beta", ctypes.c_float),
        ("tf32", ctypes.c_int32),
        ("fast_math", ctypes.c_int32),
        ("split_k", ctypes.c_uint32),
        ("bias", ctypes.c_void_p),
        ("activation", ctypes.c_char_p),
        ("activation_map", ctypes.c_void_p),
    ]


class AttentionOptions(ctypes.Structure):
    _fields_ = [
        ("scale", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("window_left", ctypes.c_int32),
        ("window_right", ctypes.c_int32),
        ("softcap", ctypes.c_float),
        ("kernel", ctypes.c_int32),
        ("alibi_slopes", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("cu_seqlens_q", ctypes.c_void_p),
        ("cu_seqlens_k", ctypes.c_void_p),
        ("max_seqlen_q", ctypes.c_uint32),
        ("max_seqlen_k", ctypes.c_uint32),
    ]


class DecodeOptions(ctypes.Structure):
    _fields_ = [
        ("scale", ctypes.c_float),
        ("causal", ctypes.c_int32),
        ("window_left", ctypes.c_int32),
        ("softcap", ctypes.c_float),
        ("splits", ctypes.c_uint32),
        ("validate", ctypes.c_int32),
        ("max_seqlen_k", ctypes.c_uint32),
        ("block_table", ctypes.c_void_p),
        ("alibi_slopes", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
    ]


class CompileOptions(ctypes.Structure):
    _fields_ = [
        ("arch", ctypes.c_char_p),
        ("use_cache", ctypes.c_int32),
        ("force", ctypes.c_int32),
        ("cache_dir", ctypes.c_char_p),
    ]


class Arg(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int32),
        ("tensor", ctypes.c_void_p),
        ("i", ctypes.c_int64),
        ("f", ctypes.c_double),
        ("address", ctypes.c_uint64),
    ]


BLOCK_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
LOOP_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32)
COND_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32))
MAP_BODY_FN = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_uint32),
    ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_uint32),
    ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_uint32),
)

_P = ctypes.c_void_p
_T = ctypes.c_void_p  # a DLTensor, by address
_TT = ctypes.POINTER(ctypes.c_void_p)  # an array of DLTensor addresses
_U32P = ctypes.POINTER(ctypes.c_uint32)
_S = ctypes.c_char_p
_F = ctypes.c_float
_U32 = ctypes.c_uint32
_SZ = ctypes.c_size_t
_I = ctypes.c_int
_FP = ctypes.POINTER(ctypes.c_float)
_PP = ctypes.POINTER(ctypes.c_void_p)  # a handle's out parameter

# name: (restype, argtypes); restype int means a status checked by check().
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "kaio_abi_version": (_I, []),
    "kaio_version": (_S, []),
    "kaio_last_error_message": (_S, []),
    "kaio_last_error_field": (_S, [_S]),
    "kaio_interpret_mode": (_I, []),
    "kaio_synchronize": (_I, []),
    "kaio_toolchain_id": (_S, []),
    "kaio_flush_cache_writes": (_I, []),
    "kaio_elementwise": (_I, [_S, _T, _TT, _SZ, _FP, _SZ, _P]),
    "kaio_reduce_rows": (_I, [_S, _T, _T, _P]),
    "kaio_reduce": (_I, [_S, _T, _T, _P]),
    "kaio_softmax": (_I, [_T, _T, _I, _P]),
    "kaio_rms_norm": (_I, [_T, _T, _T, _F, _P]),
    "kaio_layer_norm": (_I, [_T, _T, _T, _T, _F, _P]),
    "kaio_add_rms_norm": (_I, [_T, _T, _T, _T, _T, _F, _P]),
    "kaio_rope": (_I, [_T, _T, _T, _T, ctypes.POINTER(RopeParams), _P]),
    "kaio_matmul": (_I, [_S, _T, _T, _T, ctypes.POINTER(MatmulOptions), _P]),
    "kaio_matmul_variant_names": (_I, [ctypes.c_char_p, _SZ, ctypes.POINTER(_SZ)]),
    "kaio_builder_new": (_I, [_S, ctypes.POINTER(_P)]),
    "kaio_builder_free": (None, [_P]),
    "kaio_builder_value_type": (_I, [_P, _U32, ctypes.c_char_p, _SZ]),
    "kaio_builder_param": (_I, [_P, _S, _S, _U32P]),
    "kaio_builder_spec": (_I, [_P, _S, _S, Operand, _U32P]),
    "kaio_builder_constant": (_I, [_P, _S, Operand, _U32P]),
    "kaio_builder_special": (_I, [_P, _S, _U32P]),
    "kaio_builder_unary": (_I, [_P, _S, _U32, _U32P]),
    "kaio_builder_binary": (_I, [_P, _S, Operand, Operand, _U32P]),
    "kaio_builder_select": (_I, [_P, _U32, Operand, Operand, _U32P]),
    "kaio_builder_fma": (_I, [_P, Operand, Operand, Operand, _U32P]),
    "kaio_builder_cast": (_I, [_P, _U32, _S, _S, _I, _U32P]),
    "kaio_builder_load": (_I, [_P, _U32, Operand, _S, _U32P]),
    "kaio_builder_store": (_I, [_P, _U32, Operand, Operand, _S]),
    "kaio_builder_atomic": (_I, [_P, _S, _U32, Operand, Operand, Operand, _U32P]),
    "kaio_builder_shfl": (_I, [_P, _S, _U32, Operand, _U32, _U32, _U32P]),
    "kaio_builder_vote": (_I, [_P, _S, _U32, _U32, _U32P]),
    "kaio_builder_reduce": (_I, [_P, _S, _U32, _U32P]),
    "kaio_builder_shared": (_I, [_P, _S, _U32, _U32, _U32P]),
    "kaio_builder_barrier": (_I, [_P]),
    "kaio_builder_var": (_I, [_P, _S, Operand, _U32P]),
    "kaio_builder_var_get": (_I, [_P, _U32, _U32P]),
    "kaio_builder_var_set": (_I, [_P, _U32, Operand]),
    "kaio_builder_if": (_I, [_P, _U32, BLOCK_FN, _P, _U32P]),
    "kaio_builder_else": (_I, [_P, _U32, BLOCK_FN, _P]),
    "kaio_builder_for": (_I, [_P, Operand, Operand, Operand, LOOP_FN, _P]),
    "kaio_builder_while": (_I, [_P, COND_FN, _P, BLOCK_FN, _P]),
    "kaio_builder_return": (_I, [_P]),
    "kaio_builder_launch_bounds": (_I, [_P, _U32, _U32]),
    "kaio_builder_fast_math": (_I, [_P, _I]),
    "kaio_builder_max_registers": (_I, [_P, _U32]),
    "kaio_builder_comment": (_I, [_P, _S]),
    "kaio_builder_build": (_I, [_P, ctypes.POINTER(_P)]),
    "kaio_kernel_free": (None, [_P]),
    "kaio_kernel_str": (_S, [_P, _S]),
    "kaio_kernel_cache_key": (_I, [_P, _S, ctypes.c_char_p]),
    "kaio_compile": (_I, [_P, ctypes.POINTER(CompileOptions), ctypes.POINTER(_P)]),
    "kaio_compiled_free": (None, [_P]),
    "kaio_compiled_str": (_S, [_P, _S]),
    "kaio_compiled_cubin": (_I, [_P, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_SZ)]),
    "kaio_compiled_from_cache": (_I, [_P]),
    "kaio_compiled_num_params": (_SZ, [_P]),
    "kaio_compiled_param_type": (_S, [_P, _SZ]),
    "kaio_launch": (_I, [_P, ctypes.POINTER(_U32), ctypes.POINTER(_U32), _U32, _P, ctypes.POINTER(Arg), _SZ]),
    "kaio_map_new": (_I, [_S, _U32, _U32, MAP_BODY_FN, _P, ctypes.POINTER(_P)]),
    "kaio_map_free": (None, [_P]),
    "kaio_map_call": (_I, [_P, _T, _TT, _SZ, _FP, _SZ, _P]),
    "kaio_plan_elementwise": (_I, [_S, _T, _TT, _SZ, _SZ, _PP]),
    "kaio_plan_map": (_I, [_P, _T, _TT, _SZ, _SZ, _PP]),
    "kaio_plan_reduce_rows": (_I, [_S, _T, _T, _PP]),
    "kaio_plan_reduce": (_I, [_S, _T, _T, _PP]),
    "kaio_plan_softmax": (_I, [_T, _T, _I, _PP]),
    "kaio_plan_rms_norm": (_I, [_T, _T, _T, _PP]),
    "kaio_plan_layer_norm": (_I, [_T, _T, _T, _T, _PP]),
    "kaio_plan_add_rms_norm": (_I, [_T, _T, _T, _T, _T, _PP]),
    "kaio_plan_rope": (_I, [_T, _T, _T, _T, ctypes.POINTER(RopeParams), _PP]),
    "kaio_plan_matmul": (_I, [_S, _T, _T, _T, ctypes.POINTER(MatmulOptions), _PP]),
    "kaio_attention": (_I, [_T, _T, _T, _T, ctypes.POINTER(AttentionOptions), _P]),
    "kaio_plan_attention": (_I, [_T, _T, _T, _T, ctypes.POINTER(AttentionOptions), _PP]),
    "kaio_attention_backward": (_I, [_T] * 9 + [ctypes.POINTER(AttentionOptions), _P]),
    "kaio_plan_attention_backward": (_I, [_T] * 9 + [ctypes.POINTER(AttentionOptions), _PP]),
    "kaio_attention_decode": (_I, [_T, _T, _T, _T, _T, ctypes.POINTER(DecodeOptions), _P]),
    "kaio_plan_attention_decode": (_I, [_T, _T, _T, _T, _T, ctypes.POINTER(DecodeOptions), _PP]),
    "kaio_matmul_int8": (_I, [_T, _T, _T, _T, _T, _T, ctypes.c_int32, _P]),
    "kaio_plan_matmul_int8": (_I, [_T, _T, _T, _T, _T, _T, ctypes.c_int32, _PP]),
    "kaio_matmul_int8_qkv": (_I, [_T, _TT, _TT, _T, _TT, _TT, _P]),
    "kaio_matmul_int8_tiles": (_I, [ctypes.c_char_p, _SZ, ctypes.POINTER(_SZ)]),
    "kaio_matmul_int4": (_I, [_T, _T, _T, _T, _T, _T, _P]),
    "kaio_plan_matmul_int4": (_I, [_T, _T, _T, _T, _T, _T, _PP]),
    "kaio_matmul_int4_qkv": (_I, [_T, _TT, _TT, _TT, _TT, _TT, _P]),
    "kaio_quant_matmul_workspace": (_SZ, [_SZ, _SZ]),
    "kaio_quant_matmul": (_I, [_T, _T, _U32, _T, _T, _U32, _P]),
    "kaio_plan_quant_matmul": (_I, [_T, _T, _U32, _T, _T, _U32, _PP]),
    "kaio_quantize_int8": (_I, [_P, _U32, _U32, _P, _P]),
    "kaio_quantize_int4": (_I, [_P, _U32, _U32, _U32, _S, _I, _P, _P, _P]),
    "kaio_pack_int4": (_I, [_P, _U32, _U32, _P]),
    "kaio_dequantize_int4": (_I, [_P, _P, _P, _U32, _U32, _U32, _S, _P]),
    "kaio_dequantize_int4_exact": (_I, [_P, _P, _P, _U32, _U32, _U32, _S, _P]),
    "kaio_plan_launch": (_I, [_P, ctypes.POINTER(ctypes.c_uint64), _SZ, ctypes.POINTER(ctypes.c_double), _SZ, _P]),
    "kaio_plan_launch_packed": (_I, [ctypes.c_char_p]),
    "kaio_plan_arrays": (_SZ, [_P]),
    "kaio_plan_values": (_SZ, [_P]),
    "kaio_plan_op": (_S, [_P]),
    "kaio_plan_free": (None, [_P]),
}


def library_path() -> Path:
    """Where libkaio_c.so is: $KAIO_LIBRARY, else the package's _lib folder."""
    env = os.environ.get("KAIO_LIBRARY")
    if env:
        return Path(env)
    from . import __path__ as pkg_path  # type: ignore[attr-defined]

    for d in pkg_path:  # an editable install may spread the package over folders
        p = Path(d) / "_lib" / _LIB_NAME
        if p.exists():
            return p
    raise ImportError(
        f"kaio: {_LIB_NAME} was not found in the package ({', '.join(pkg_path)}); "
        "install kaio with pip (it builds the library) or set KAIO_LIBRARY to its path"
    )


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(library_path()))
    for name, (res, args) in _SIGNATURES.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


lib = _load()


def check(status: int) -> None:
    """Raises the Python form of the C ABI's last error unless status is KAIO_OK."""
    if status == 0:
        return
    raise errors.from_status(status, lib)


def call(fn: Callable[..., int], *args: Any) -> None:
    check(fn(*args))


def s(text: str | None) -> bytes | None:
    return None if text is None else text.encode()
