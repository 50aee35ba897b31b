"""For the C++ tests of tests/quant/test_gguf.cpp, with the Python gguf package:

  write_gguf.py FILE                      writes a small GGUF file: metadata of several types
                                          and f32, f16 and q8_0 tensors whose values are
                                          x[i] = scale * sin(0.37 i + 1)
  write_gguf.py --decode TYPE IN OUT      decodes the raw blocks of ggml type TYPE (q8_0,
                                          q4_K, q6_K) in IN with gguf's own dequantiser and
                                          writes the f32 values to OUT
"""
import sys

import gguf
import numpy as np


def ramp(rows, cols, scale):
    i = np.arange(rows * cols, dtype=np.float64)
    return (scale * np.sin(0.37 * i + 1.0)).astype(np.float32).reshape(rows, cols)


def main(path):
    w = gguf.GGUFWriter(path, "kaio-test")
    w.add_uint32("kaio.u32", 7)
    w.add_float32("kaio.f32", 0.5)
    w.add_string("kaio.text", "hello gguf")
    w.add_array("kaio.ints", [1, 2, 3])
    w.add_array("kaio.words", ["a", "bc"])
    w.add_tensor("w.f32", ramp(3, 8, 1.0))
    w.add_tensor("w.f16", ramp(2, 64, 2.0).astype(np.float16))
    q8 = gguf.quants.quantize(ramp(4, 128, 3.0), gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("w.q8_0", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def decode(type_name, src, dst):
    qtype = getattr(gguf.GGMLQuantizationType, type_name.upper())
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = np.fromfile(src, dtype=np.uint8).reshape(-1, size)
    gguf.quants.dequantize(raw, qtype).astype(np.float32).tofile(dst)


if __name__ == "__main__":
    if sys.argv[1] == "--decode":
        decode(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main(sys.argv[1])
