#include "kaio/ops/matmul_tune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kaio/codegen/ptx.h"
#include "kaio/ir/half.h"
#include "kaio/jit/backend.h"
#include "kaio/jit/device.h"
#include "kaio/ops/tune_check.h"
#include "kaio/tuner/once.h"

namespace kaio::tuner {

namespace {

using ops::MatLayout;
using ops::MatmulProblem;
using ops::MatmulVariant;

uint32_t elem_bytes(ir::Scalar s) { return static_cast<uint32_t>(ir::scalar_bytes(s)); }

int device_sm() { return jit::device_info().sm; }

// The bits can_implement looks at besides types, layouts and sizes.
uint32_t align_bits(const MatmulProblem& q) {
  const MatmulProblem p = ops::matmul_resolved(q);
  const uint32_t e = ir::scalar_bytes(p.in) == 1 ? 16 : 8;  // elements of a 16-byte row step (fp8: 16)
  uint32_t bits = 0;
  if (p.ptr_align % 16 == 0) bits |= 1;
  if (p.lda % e == 0) bits |= 2;
  if (p.ldb % e == 0) bits |= 4;
  if (p.batch <= 1 || (p.stride_a % e == 0 && p.stride_b % e == 0)) bits |= 8;
  return bits;
}

double tolerance(const MatmulProblem& p) {
  if (p.out == ir::Scalar::BF16) return 2e-2;
  if (p.out == ir::Scalar::F16) return 5e-3;
  if (p.in == ir::Scalar::F32) return p.tf32 ? 2e-2 : 1e-4;
  return 1e-3;
}

double element(const std::vector<uint8_t>& bytes, size_t i, ir::Scalar t) {
  if (t == ir::Scalar::F32) {
    float f;
    std::memcpy(&f, &bytes[4 * i], 4);
    return f;
  }
  if (t == ir::Scalar::F16) {
    half h;
    std::memcpy(&h, &bytes[2 * i], 2);
    return float(h);
  }
  if (t == ir::Scalar::E4M3 || t == ir::Scalar::E5M2) return kaio::detail::fp8_bits_to_f32(bytes[i], t == ir::Scalar::E5M2);
  bfloat16 h;
  std::memcpy(&h, &bytes[2 * i], 2);
  return float(h);
}

// Up to 1024 evenly spaced indices of 0..n-1, the first and the last among them (edge
// tiles): the check compares a grid of them, so that it costs little host time at 8192^2.
std::vector<uint32_t> spread(uint32_t n) {
  std::vector<uint32_t> v;
  const uint32_t count = std::min<uint32_t>(n, 1024);
  for (uint32_t i = 0; i < count; ++i) v.push_back(count == 1 ? 0 : uint32_t(uint64_t(i) * (n - 1) / (count - 1)));
  return v;
}

std::vector<uint8_t> random_bytes(size_t elems, ir::Scalar t, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<uint8_t> out(elems * elem_bytes(t));
  for (size_t i = 0; i < elems; ++i) {
    const float f = d(rng);
    if (t == ir::Scalar::F32) std::memcpy(&out[4 * i], &f, 4);
    else if (t == ir::Scalar::F16) { const half h(f); std::memcpy(&out[2 * i], &h, 2); }
    else if (t == ir::Scalar::E4M3) out[i] = fp8_e4m3(f).bits;
    else if (t == ir::Scalar::E5M2) out[i] = fp8_e5m2(f).bits;
    else { const bfloat16 h(f); std::memcpy(&out[2 * i], &h, 2); }
  }
  return out;
}

// Scratch operands for the timed runs: `sets` copies of A, B and C rotated run after run.
struct Scratch {
  MatmulProblem p;
  std::vector<jit::DeviceBuffer<uint8_t>> a, b, c;
  size_t next = 0;
  detail::ReferenceCheck reference;  // C of the reference candidate on set 0
};

std::unique_ptr<Scratch> make_scratch(const MatmulProblem& q) {
  auto s = std::make_unique<Scratch>();
  s->p = q;
  s->p.alpha = 1.0f;
  s->p.beta = 0.0f;  // C is only written: a poisoned C shows what a candidate left out
  s->p.epilogue = {};  // timed without the fused epilogue, which costs every candidate about the same
  const MatmulProblem p = ops::matmul_resolved(s->p);
  const uint64_t ea = p.stride_a * (p.batch - 1) + (p.a == MatLayout::RowMajor ? uint64_t(p.lda) * p.m : uint64_t(p.lda) * p.k);
  const uint64_t eb = p.stride_b * (p.batch - 1) + (p.b == MatLayout::RowMajor ? uint64_t(p.ldb) * p.k : uint64_t(p.ldb) * p.n);
  const uint64_t ec = p.stride_c * (p.batch - 1) + uint64_t(p.ldc) * p.m;
  const uint64_t set_bytes = (ea + eb) * elem_bytes(p.in) + ec * elem_bytes(p.out);
  size_t sets = 1;
  if (!jit::interpret_mode()) {
    const uint64_t l2 = std::max<uint64_t>(device().l2_bytes, 64ull << 20);
    sets = size_t(std::clamp<uint64_t>((2 * l2 + set_bytes - 1) / std::max<uint64_t>(set_bytes, 1), 1, 64));
  }
  std::mt19937 rng(std::random_device{}());
  const std::vector<uint8_t> ha = random_bytes(ea, p.in, rng), hb = random_bytes(eb, p.in, rng);
  for (size_t i = 0; i < sets; ++i) {
    s->a.emplace_back(ha.size());
    s->a.back().upload(ha);
    s->b.emplace_back(hb.size());
    s->b.back().upload(hb);
    s->c.emplace_back(ec * elem_bytes(p.out));
  }
  return s;
}

std::string check_against_reference(Scratch& s, const MatmulVariant& v, const jit::Stream* stream) {
  s.c[0].fill_bytes(0xFF);  // NaN in every float type: a skipped element cannot pass
  ops::matmul(v, s.a[0].device_address(), s.b[0].device_address(), s.c[0].device_address(), s.p, stream);
  if (stream) stream->synchronize();
  else jit::synchronize();
  const std::vector<uint8_t> bytes = s.c[0].to_host();
  const MatmulProblem p = ops::matmul_resolved(s.p);
  // The first and the last batch, a grid of rows and columns of each.
  const std::vector<uint32_t> rows = spread(p.m), cols = spread(p.n);
  std::vector<double> c;
  c.reserve(rows.size() * cols.size() * (p.batch > 1 ? 2 : 1));
  for (uint32_t bt : p.batch > 1 ? std::vector<uint32_t>{0, p.batch - 1} : std::vector<uint32_t>{0})
    for (uint32_t r : rows)
      for (uint32_t col : cols) {
        const double x = element(bytes, bt * p.stride_c + uint64_t(r) * p.ldc + col, p.out);
        if (!std::isfinite(x))
          return "C[" + std::to_string(r) + "][" + std::to_string(col) + "] of batch " + std::to_string(bt) + " is not finite";
        c.push_back(x);
      }
  return s.reference(std::move(c), v.name, tolerance(s.p), "C");
}

}  // namespace

std::string matmul_key(const MatmulProblem& p) {
  const Device& d = device();
  auto lay = [](MatLayout l) { return l == MatLayout::RowMajor ? "row" : "col"; };
  return std::string("matmul|") + ir::scalar_name(p.in) + ">" + ir::scalar_name(p.out) + (p.tf32 ? "|tf32" : "") + "|" +
         lay(p.a) + "/" + lay(p.b) + "|" + d.arch + "|" + d.name + "|" + std::to_string(d.sms) + "sm|m" +
         std::to_string(bucket(p.m)) + "|n" + std::to_string(bucket(p.n)) + "|k" + std::to_string(bucket(p.k)) + "|b" +
         std::to_string(bucket(p.batch)) + "|align" + std::to_string(align_bits(p));
}

uint64_t matmul_table_hash() {
  static const uint64_t h = [] {
    std::string s;
    for (const MatmulVariant& v : ops::matmul_variants()) s += v.str() + ";";  // a cap, a cluster or a schedule changes the kernel
    return XXH3_64bits(s.data(), s.size());
  }();
  return h;
}

MatmulChoice choose_matmul(const MatmulProblem& p, const jit::Stream* stream, bool force, const Options& o) {
  const int sm = device_sm();
  std::vector<const MatmulVariant*> able;
  std::string reasons;
  for (const MatmulVariant& v : ops::matmul_variants()) {
    std::string why;
    if (v.can_implement(p, sm, &why)) able.push_back(&v);
    else reasons += "\n  " + why;
  }
  if (able.empty())
    throw UsageError("matmul_auto", "matmul_auto",
                     std::string("no matmul variant serves ") + ir::scalar_name(p.in) + " -> " + ir::scalar_name(p.out) +
                         " on sm_" + std::to_string(sm) + ":" + reasons);
  MatmulChoice ch;
  const Mode m = mode();
  if (m == Mode::Off) {
    ch.variant = able.front();
    detail::count_untuned();
    return ch;
  }
  // Tuned once per bucket, however many threads and processes ask (tuner/once.h).
  Job job;
  job.key = matmul_key(p);
  job.op = "matmul";
  job.table_hash = matmul_table_hash();
  job.force = force;
  job.options = o;
  if (!job.options.stream) job.options.stream = stream;
  job.usable = [&able](const Record& r) {
    for (const MatmulVariant* v : able)
      if (r.winner == v->name) return true;
    return false;
  };
  job.candidates = [&p, &able, stream] {
    std::shared_ptr<Scratch> s = make_scratch(p);
    std::vector<Candidate> cands;
    for (const MatmulVariant* v : able) {
      const ops::MatmulConfig cfg{static_cast<uint32_t>(v - ops::matmul_variants().data()), p.in, p.out, p.a, p.b};
      cands.push_back({v->name, [cfg] { ops::matmul_family().get(cfg); },
                       [s, v, stream] {
                         const size_t i = s->next++ % s->a.size();
                         ops::matmul(*v, s->a[i].device_address(), s->b[i].device_address(), s->c[i].device_address(),
                                     s->p, stream);
                       },
                       [s, v, stream] { return check_against_reference(*s, *v, stream); }});
    }
    return cands;
  };
  const Outcome out = tune_once(job);
  ch.variant = able.front();  // the default: no record, a tuning that failed, or one still running elsewhere
  ch.final = out.final;
  ch.waited = out.waited;
  if (out.record) {
    ch.record = *out.record;
    ch.source = out.source == Outcome::Stored ? MatmulChoice::Stored : MatmulChoice::Tuned;
    for (const MatmulVariant* v : able)
      if (ch.record.winner == v->name) ch.variant = v;
  }
  return ch;
}

}  // namespace kaio::tuner
